package engine

import (
	"net/http"
	"strconv"
	"strings"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"k8s.io/klog/v2"

	"github.com/metalambda/metalambda/internal/workloop"
)

// metrics are the engine's own Prometheus series; hook call series live in package
// hook.
type metrics struct {
	// syncs are the work loop's series of the hosted controllers' parent syncs:
	// metalambda_engine_syncs_total, _sync_duration_seconds, _sync_panics_total and
	// _active_workers, labelled controller.
	syncs       *workloop.Metrics
	apiRequests *prometheus.CounterVec
	// queues serves the workqueue_* series of every work queue the engine creates.
	queues *queueMetrics
	// rolloutStep, rolloutShare and rolloutHalts follow the rollout driver, by
	// Function (namespace, function).
	rolloutStep, rolloutShare *prometheus.GaugeVec
	rolloutHalts              *prometheus.CounterVec
}

func newMetrics(reg prometheus.Registerer) *metrics {
	m := &metrics{
		syncs: workloop.NewMetrics(reg, workloop.MetricsOptions{Prefix: "metalambda_engine", Label: "controller", Item: "parent"}),
		apiRequests: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "metalambda_engine_api_requests_total", Help: "Requests the engine sent to the Kubernetes API, by verb, resource and status code.",
		}, []string{"verb", "resource", "code"}),
		queues: newQueueMetrics(),
		rolloutStep: prometheus.NewGaugeVec(prometheus.GaugeOpts{
			Name: "metalambda_engine_rollout_step", Help: "The step (index in spec.rollout.steps) the rollout of each Function's latest revision reached.",
		}, []string{"namespace", "function"}),
		rolloutShare: prometheus.NewGaugeVec(prometheus.GaugeOpts{
			Name: "metalambda_engine_rollout_share_percent", Help: "The share of the parents, in percent, the rollout driver gave each Function's latest revision.",
		}, []string{"namespace", "function"}),
		rolloutHalts: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "metalambda_engine_rollout_halts_total", Help: "Rollouts the driver halted, by Function and reason (FailureBudgetExceeded, Aborted).",
		}, []string{"namespace", "function", "reason"}),
	}
	if reg != nil {
		reg.MustRegister(m.apiRequests, m.rolloutStep, m.rolloutShare, m.rolloutHalts)
		m.queues.register(reg)
	}
	return m
}

// loops are the series of the hosted controllers' work loops; nil (none) without
// metrics, as in unit tests that build a controller by hand.
func (m *metrics) loops() *workloop.Metrics {
	if m == nil {
		return nil
	}
	return m.syncs
}

// forget drops a removed controller's series.
func (m *metrics) forget(kind, controller string) {
	m.syncs.Forget(controller)
	m.queues.forget(queueName(kind, controller))
}

// rolloutAt records the step and share a rollout reached.
func (m *metrics) rolloutAt(key functionKey, step, share int32) {
	m.rolloutStep.WithLabelValues(key.namespace, key.name).Set(float64(step))
	m.rolloutShare.WithLabelValues(key.namespace, key.name).Set(float64(share))
}

// rolloutHalted counts a halt; the latest revision then serves no parent.
func (m *metrics) rolloutHalted(key functionKey, reason string) {
	m.rolloutHalts.WithLabelValues(key.namespace, key.name, reason).Inc()
	m.rolloutShare.WithLabelValues(key.namespace, key.name).Set(0)
}

// forgetRollout drops a deleted Function's rollout series.
func (m *metrics) forgetRollout(key functionKey) {
	labels := prometheus.Labels{"namespace": key.namespace, "function": key.name}
	m.rolloutStep.Delete(labels)
	m.rolloutShare.Delete(labels)
	m.rolloutHalts.DeletePartialMatch(labels)
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
	// Verbosity 4 logs every interaction with the API server, like upstream's level 4
	// (its arguments, built only then, cost an allocation each).
	if log := klog.FromContext(req.Context()).V(4); log.Enabled() {
		log.Info("API request", "verb", verb, "resource", resource, "path", req.URL.Path, "code", code, "duration", time.Since(start))
	}
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
