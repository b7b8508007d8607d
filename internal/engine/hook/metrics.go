package hook

import (
	"errors"
	"strconv"
	"sync"
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
	// upstream holds Metacontroller's series, by hook name.
	upstream map[string]*upstreamMetrics

	mu sync.Mutex
	// series lists the upstream series recorded, so that Prune can find the stale ones.
	series map[upstreamSeries]struct{}
}

// upstreamMetrics are Metacontroller's series of one hook (pkg/metrics/http.go), whose
// const labels url, controller_name and controller_type are plain labels here, which
// reads the same on /metrics and lets series be deleted.
type upstreamMetrics struct {
	requests *prometheus.CounterVec
	duration *prometheus.HistogramVec
	inFlight *prometheus.GaugeVec
}

// upstreamSeries is one label set of an upstream hook's series.
type upstreamSeries struct {
	hook, url, controllerName, controllerType string
}

func (s upstreamSeries) labels() prometheus.Labels {
	return prometheus.Labels{"url": s.url, "controller_name": s.controllerName, "controller_type": s.controllerType}
}

// NewMetrics creates the hook metrics and registers them with reg (when not nil):
//
//	metalambda_hook_requests_total{controller,hook,code}
//	metalambda_hook_request_duration_seconds{controller,hook}
//	metalambda_hook_in_flight_requests{controller,hook}
//
// code is the HTTP status code, "timeout" or "error". For dashboards built for
// Metacontroller, it also serves its names, for <hook> sync, finalize and customize:
//
//	metacontroller_<hook>_requests_total{code,method,url,controller_name,controller_type}
//	metacontroller_<hook>_request_duration_histogram_seconds{method,url,controller_name,controller_type}
//	metacontroller_<hook>_in_flight_requests{url,controller_name,controller_type}
//
// As there, code is the HTTP status, method is "post", and calls that got no HTTP
// answer are neither counted nor timed.
//
// Metrics already registered with reg (by an earlier call) are reused; any other
// registration failure panics, as prometheus.MustRegister does.
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
		upstream: map[string]*upstreamMetrics{},
		series:   map[upstreamSeries]struct{}{},
	}
	for _, hook := range []string{HookSync, HookFinalize, HookCustomize} {
		m.upstream[hook] = newUpstreamMetrics(hook)
	}
	if reg == nil {
		return m
	}
	m.requests = register(reg, m.requests)
	m.duration = register(reg, m.duration)
	m.inFlight = register(reg, m.inFlight)
	for _, u := range m.upstream {
		u.requests = register(reg, u.requests)
		u.duration = register(reg, u.duration)
		u.inFlight = register(reg, u.inFlight)
	}
	return m
}

func newUpstreamMetrics(hook string) *upstreamMetrics {
	target := []string{"url", "controller_name", "controller_type"}
	return &upstreamMetrics{
		requests: prometheus.NewCounterVec(prometheus.CounterOpts{
			Namespace: "metacontroller", Subsystem: hook, Name: "requests_total",
			Help: "A counter for outgoing requests from the wrapped client.",
		}, append([]string{"code", "method"}, target...)),
		duration: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Namespace: "metacontroller", Subsystem: hook, Name: "request_duration_histogram_seconds",
			Help: "A histogram of outgoing request latencies.", Buckets: prometheus.DefBuckets,
		}, append([]string{"method"}, target...)),
		inFlight: prometheus.NewGaugeVec(prometheus.GaugeOpts{
			Namespace: "metacontroller", Subsystem: hook, Name: "in_flight_requests",
			Help: "A gauge of in-flight outgoing requests for the wrapped client.",
		}, target),
	}
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

// Forget drops every series of a controller, for when it is deleted: the
// metalambda_hook_* series of every controller of that name, and the upstream-named
// series of that type and name.
func (m *Metrics) Forget(controllerType, controller string) {
	if m == nil {
		return
	}
	labels := prometheus.Labels{"controller": controller}
	m.requests.DeletePartialMatch(labels)
	m.duration.DeletePartialMatch(labels)
	m.inFlight.DeletePartialMatch(labels)
	m.Prune(controllerType, controller, nil)
}

// Prune drops the upstream-named series of a controller whose hook no longer calls
// the URL they name; live maps each hook the controller has to its URL. Call it
// when a controller is rebuilt, so that changed URLs leave no series behind.
func (m *Metrics) Prune(controllerType, controller string, live map[string]string) {
	if m == nil {
		return
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	for s := range m.series {
		if s.controllerType != controllerType || s.controllerName != controller {
			continue
		}
		if u, ok := live[s.hook]; ok && u == s.url {
			continue
		}
		um := m.upstream[s.hook]
		um.requests.DeletePartialMatch(s.labels())
		um.duration.DeletePartialMatch(s.labels())
		um.inFlight.DeletePartialMatch(s.labels())
		delete(m.series, s)
	}
}

// start records the start of a call to url and returns the function that records
// its end with the result code.
func (m *Metrics) start(info CallInfo, url string) func(code string) {
	if m == nil {
		return func(string) {}
	}
	inFlight := m.inFlight.WithLabelValues(info.Controller, info.Hook)
	inFlight.Inc()
	upstreamDone := m.startUpstream(info, url)
	began := time.Now()
	return func(code string) {
		elapsed := time.Since(began).Seconds()
		inFlight.Dec()
		m.duration.WithLabelValues(info.Controller, info.Hook).Observe(elapsed)
		m.requests.WithLabelValues(info.Controller, info.Hook, code).Inc()
		upstreamDone(code, elapsed)
	}
}

// startUpstream is start for the upstream-named series of the call's hook.
func (m *Metrics) startUpstream(info CallInfo, url string) func(code string, elapsed float64) {
	um := m.upstream[info.Hook]
	if um == nil {
		return func(string, float64) {}
	}
	s := upstreamSeries{hook: info.Hook, url: url, controllerName: info.Controller, controllerType: info.ControllerType}
	m.mu.Lock()
	m.series[s] = struct{}{}
	m.mu.Unlock()
	target := []string{url, info.Controller, info.ControllerType}
	inFlight := um.inFlight.WithLabelValues(target...)
	inFlight.Inc()
	return func(code string, elapsed float64) {
		inFlight.Dec()
		if _, err := strconv.Atoi(code); err != nil {
			return // no HTTP answer
		}
		um.requests.WithLabelValues(append([]string{code, "post"}, target...)...).Inc()
		um.duration.WithLabelValues(append([]string{"post"}, target...)...).Observe(elapsed)
	}
}
