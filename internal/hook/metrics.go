package hook

import (
	"errors"
	"time"

	"github.com/prometheus/client_golang/prometheus"
)

// Values of the code label besides HTTP status codes.
const (
	CodeError   = "error"
	CodeTimeout = "timeout"
)

// Metrics counts hook calls. A nil *Metrics records nothing.
type Metrics struct {
	requests *prometheus.CounterVec
	duration *prometheus.HistogramVec
	inFlight *prometheus.GaugeVec
}

// NewMetrics creates the hook metrics and registers them with reg (when not nil):
//
//	metalambda_hook_requests_total{controller,hook,code}
//	metalambda_hook_request_duration_seconds{controller,hook}
//	metalambda_hook_in_flight_requests{controller,hook}
//
// code is the HTTP status code, "timeout" or "error". Metrics already registered with
// reg (by an earlier call) are reused; any other registration failure panics, as
// prometheus.MustRegister does.
func NewMetrics(reg prometheus.Registerer) *Metrics {
	m := &Metrics{
		requests: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "metalambda_hook_requests_total",
			Help: "Hook calls by controller, hook and result code (HTTP status, timeout or error).",
		}, []string{"controller", "hook", "code"}),
		duration: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Name:    "metalambda_hook_request_duration_seconds",
			Help:    "Duration of hook calls, failed ones included.",
			Buckets: prometheus.DefBuckets,
		}, []string{"controller", "hook"}),
		inFlight: prometheus.NewGaugeVec(prometheus.GaugeOpts{
			Name: "metalambda_hook_in_flight_requests",
			Help: "Hook calls under way.",
		}, []string{"controller", "hook"}),
	}
	if reg != nil {
		m.requests = register(reg, m.requests)
		m.duration = register(reg, m.duration)
		m.inFlight = register(reg, m.inFlight)
	}
	return m
}

// register registers c, or returns the equal collector registered before.
func register[C prometheus.Collector](reg prometheus.Registerer, c C) C {
	err := reg.Register(c)
	var dup prometheus.AlreadyRegisteredError
	if errors.As(err, &dup) {
		if existing, ok := dup.ExistingCollector.(C); ok {
			return existing
		}
	}
	if err != nil {
		panic(err)
	}
	return c
}

// Forget drops every series of controller, for when the controller is deleted.
func (m *Metrics) Forget(controller string) {
	if m == nil {
		return
	}
	labels := prometheus.Labels{"controller": controller}
	m.requests.DeletePartialMatch(labels)
	m.duration.DeletePartialMatch(labels)
	m.inFlight.DeletePartialMatch(labels)
}

// start records the start of a call and returns the function that records its end
// with the result code.
func (m *Metrics) start(info CallInfo) func(code string) {
	if m == nil {
		return func(string) {}
	}
	inFlight := m.inFlight.WithLabelValues(info.Controller, info.Hook)
	inFlight.Inc()
	began := time.Now()
	return func(code string) {
		inFlight.Dec()
		m.duration.WithLabelValues(info.Controller, info.Hook).Observe(time.Since(began).Seconds())
		m.requests.WithLabelValues(info.Controller, info.Hook, code).Inc()
	}
}
