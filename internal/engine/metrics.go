package engine

import (
	"net/http"
	"strconv"
	"strings"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"k8s.io/klog/v2"
)

// metrics are the engine's own Prometheus series; hook call series live in package
// hook.
type metrics struct {
	syncs        *prometheus.CounterVec
	syncDuration *prometheus.HistogramVec
	apiRequests  *prometheus.CounterVec
	// queues serves the workqueue_* series of every work queue the engine creates.
	queues *queueMetrics
}

func newMetrics(reg prometheus.Registerer) *metrics {
	m := &metrics{
		syncs: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "metalambda_engine_syncs_total", Help: "Parent syncs by controller and result (success or error).",
		}, []string{"controller", "result"}),
		syncDuration: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Name: "metalambda_engine_sync_duration_seconds", Help: "Time to sync one parent, hook call included.",
			Buckets: prometheus.ExponentialBuckets(0.001, 2, 16),
		}, []string{"controller"}),
		apiRequests: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "metalambda_engine_api_requests_total", Help: "Requests the engine sent to the Kubernetes API, by verb, resource and status code.",
		}, []string{"verb", "resource", "code"}),
		queues: newQueueMetrics(),
	}
	if reg != nil {
		reg.MustRegister(m.syncs, m.syncDuration, m.apiRequests)
		m.queues.register(reg)
	}
	return m
}

func (m *metrics) observeSync(controller string, start time.Time, err error) {
	result := "success"
	if err != nil {
		result = "error"
	}
	m.syncs.WithLabelValues(controller, result).Inc()
	m.syncDuration.WithLabelValues(controller).Observe(time.Since(start).Seconds())
}

// forget drops a removed controller's series.
func (m *metrics) forget(kind, controller string) {
	m.syncs.DeletePartialMatch(prometheus.Labels{"controller": controller})
	m.syncDuration.DeletePartialMatch(prometheus.Labels{"controller": controller})
	m.queues.forget(queueName(kind, controller))
}

// queueName is the name of a hosted controller's work queue, as Metacontroller names
// it: "CompositeController-<name>" or "DecoratorController-<name>".
func queueName(kind, controller string) string { return kind + "-" + controller }

// countingTransport counts every API request by verb, resource and status code.
type countingTransport struct {
	next    http.RoundTripper
	counter *prometheus.CounterVec
}

func (t *countingTransport) RoundTrip(req *http.Request) (*http.Response, error) {
	start := time.Now()
	resp, err := t.next.RoundTrip(req)
	code := "error"
	if err == nil {
		code = strconv.Itoa(resp.StatusCode)
	}
	verb, resource := classify(req)
	t.counter.WithLabelValues(verb, resource, code).Inc()
	// Verbosity 4 logs every interaction with the API server, like upstream's level 4.
	klog.FromContext(req.Context()).V(4).Info("API request", "verb", verb, "resource", resource, "path", req.URL.Path, "code", code, "duration", time.Since(start))
	return resp, err
}

// classify names a request like the API server's audit log: get, list, watch, create,
// update, patch, apply, delete; and the resource (with subresource) it addresses.
func classify(req *http.Request) (verb, resource string) {
	resource = resourceOf(req.URL.Path)
	switch req.Method {
	case http.MethodGet:
		switch {
		case req.URL.Query().Get("watch") == "true" || req.URL.Query().Get("watch") == "1":
			return "watch", resource
		case isCollection(req.URL.Path):
			return "list", resource
		}
		return "get", resource
	case http.MethodPost:
		return "create", resource
	case http.MethodPut:
		return "update", resource
	case http.MethodPatch:
		if strings.HasPrefix(req.Header.Get("Content-Type"), "application/apply-patch") {
			return "apply", resource
		}
		return "patch", resource
	case http.MethodDelete:
		return "delete", resource
	}
	return strings.ToLower(req.Method), resource
}

// apiPath splits /api/v1/namespaces/ns/pods/name/status or /apis/g/v/... into the
// segments after the group-version.
func apiPath(path string) []string {
	parts := strings.Split(strings.Trim(path, "/"), "/")
	switch {
	case len(parts) >= 2 && parts[0] == "api":
		parts = parts[2:]
	case len(parts) >= 3 && parts[0] == "apis":
		parts = parts[3:]
	default:
		return nil
	}
	if len(parts) >= 2 && parts[0] == "namespaces" && len(parts) != 2 {
		parts = parts[2:]
	}
	return parts
}

func resourceOf(path string) string {
	parts := apiPath(path)
	switch len(parts) {
	case 0:
		return "discovery"
	case 1, 2:
		return parts[0]
	default:
		return parts[0] + "/" + parts[2]
	}
}

func isCollection(path string) bool { return len(apiPath(path)) == 1 }
