package ingress

import (
	"net/http"
	"strconv"

	"github.com/prometheus/client_golang/prometheus"
)

type metrics struct {
	requests *prometheus.CounterVec
}

func newMetrics(reg prometheus.Registerer) *metrics {
	m := &metrics{
		requests: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "metalambda_ingress_requests_total",
			Help: `Requests by the Ingress rule host that served them ("*" for rules without host and default backends, "" when none did) and HTTP status code.`,
		}, []string{"host", "code"}),
	}
	if reg != nil {
		reg.MustRegister(m.requests)
	}
	return m
}

func (m *metrics) observe(host string, code int) {
	m.requests.WithLabelValues(host, strconv.Itoa(code)).Inc()
}

// statusRecorder remembers the final status code written; Unwrap lets the reverse
// proxy reach Flush and Hijack of the underlying writer.
type statusRecorder struct {
	http.ResponseWriter
	code int
}

func (s *statusRecorder) WriteHeader(code int) {
	if s.code == 0 && (code >= 200 || code == http.StatusSwitchingProtocols) {
		s.code = code
	}
	s.ResponseWriter.WriteHeader(code)
}

func (s *statusRecorder) Write(b []byte) (int, error) {
	if s.code == 0 {
		s.code = http.StatusOK
	}
	return s.ResponseWriter.Write(b)
}

func (s *statusRecorder) Unwrap() http.ResponseWriter { return s.ResponseWriter }

func (s *statusRecorder) status() int {
	if s.code == 0 {
		return http.StatusOK
	}
	return s.code
}
