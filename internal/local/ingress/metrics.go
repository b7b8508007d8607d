package ingress

import (
	"net/http"
	"strconv"
	"time"

	"github.com/prometheus/client_golang/prometheus"
)

type metrics struct {
	requests *prometheus.CounterVec
	holds    *prometheus.HistogramVec
}

func newMetrics(reg prometheus.Registerer) *metrics {
	m := &metrics{
		requests: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "metalambda_ingress_requests_total",
			Help: `Requests by the Ingress rule host that served them ("*" for rules without host and default backends, "" when none did) and HTTP status code.`,
		}, []string{"host", "code"}),
		holds: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Name:    "metalambda_ingress_hold_seconds",
			Help:    `Seconds requests for a backend scaled to zero were held, by outcome: "served", "timeout", "full" (too many held), "error" (demand not written), "canceled".`,
			Buckets: []float64{0.1, 0.25, 0.5, 0.75, 1, 1.5, 2, 3, 5, 10, 30},
		}, []string{"outcome"}),
	}
	if reg != nil {
		reg.MustRegister(m.requests, m.holds)
	}
	return m
}

func (m *metrics) hold(outcome string, start time.Time) {
	m.holds.WithLabelValues(outcome).Observe(time.Since(start).Seconds())
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
