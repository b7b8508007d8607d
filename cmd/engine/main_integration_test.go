//go:build integration

package main

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"

	"github.com/metalambda/metalambda/internal/engine"
	"github.com/metalambda/metalambda/internal/kubetest"
	"github.com/metalambda/metalambda/internal/local/cluster"
)

var env *kubetest.Env

func TestMain(m *testing.M) {
	opts := cluster.Defaults()
	opts.Components = nil // etcd and kube-apiserver alone
	kubetest.Main(m, &env, opts)
}

// TestEngineServesHealthAndMetrics runs the engine's main path against the cluster.
func TestEngineServesHealthAndMetrics(t *testing.T) {
	env.InstallCRDs(t)
	o := defaultOptions()
	o.kubeconfig = env.Cluster.KubeconfigPath
	o.metricsAddress, o.healthProbeAddress = kubetest.FreeAddr(t), kubetest.FreeAddr(t)
	if err := o.validate(); err != nil {
		t.Fatal(err)
	}
	defer kubetest.Run(t, "the engine", func(ctx context.Context) error { return run(ctx, o) }, answersReadyz(o))()
	if code, _, _ := httpGet("http://" + o.healthProbeAddress + "/healthz"); code != 200 {
		t.Errorf("/healthz = %d", code)
	}
	hookURL, calls := decorateConfigMaps(t)
	kubetest.Eventually(t, 30*time.Second, "the engine calls the sync hook", func(context.Context) (bool, error) {
		return calls.Load() > 0, nil
	})
	want := []string{
		"metalambda_engine_api_requests_total", "go_goroutines", "process_resident_memory_bytes",
		// Metacontroller's names, for dashboards built for it.
		`metacontroller_sync_requests_total{code="200",controller_name="metrics-test",controller_type="DecoratorController",method="post",url="` + hookURL + `"}`,
		`metacontroller_sync_request_duration_histogram_seconds_count{controller_name="metrics-test",controller_type="DecoratorController",method="post",url="` + hookURL + `"}`,
		`metacontroller_sync_in_flight_requests{controller_name="metrics-test",controller_type="DecoratorController",url="` + hookURL + `"}`,
		`rest_client_requests_total{code="200",host="`, "rest_client_request_duration_seconds_bucket{",
		`workqueue_adds_total{controller="DecoratorController-metrics-test",name="DecoratorController-metrics-test"}`,
		`workqueue_depth{controller="DecoratorController-metrics-test",name="DecoratorController-metrics-test"}`,
		`workqueue_queue_duration_seconds_count{controller="DecoratorController-metrics-test",name="DecoratorController-metrics-test"}`,
	}
	kubetest.Eventually(t, 30*time.Second, "/metrics serves every expected series", func(context.Context) (bool, error) {
		_, body, err := httpGet("http://" + o.metricsAddress + "/metrics")
		if err != nil {
			return false, err
		}
		for _, name := range want {
			if !strings.Contains(body, name) {
				return false, fmt.Errorf("/metrics lacks %s", name)
			}
		}
		return true, nil
	})
}

// decorateConfigMaps creates a DecoratorController of ConfigMaps labelled for this
// test, whose sync hook answers {}, and one such ConfigMap. It returns the hook's URL
// and its call count.
func decorateConfigMaps(t *testing.T) (string, *atomic.Int64) {
	t.Helper()
	var calls atomic.Int64
	hook := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		_, _ = io.Copy(io.Discard, r.Body)
		calls.Add(1)
		_, _ = io.WriteString(w, "{}")
	}))
	t.Cleanup(hook.Close)
	ns := env.Namespace(t)
	hookURL := hook.URL + "/sync"
	ctx := kubetest.Context(t)
	if _, err := env.Apply(ctx, []byte(fmt.Sprintf(`
apiVersion: metacontroller.k8s.io/v1alpha1
kind: DecoratorController
metadata: {name: metrics-test}
spec:
  resources: [{apiVersion: v1, resource: configmaps, labelSelector: {matchLabels: {metalambda.dev/metrics-test: "yes"}}}]
  hooks: {sync: {webhook: {url: %q}}}
---
apiVersion: v1
kind: ConfigMap
metadata: {name: decorated, namespace: %s, labels: {metalambda.dev/metrics-test: "yes"}}
`, hookURL, ns))); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		_ = env.Dynamic.Resource(decoratorGVR).Delete(context.Background(), "metrics-test", metav1.DeleteOptions{})
	})
	return hookURL, &calls
}

var compositeGVR = schema.GroupVersionResource{Group: "metacontroller.k8s.io", Version: "v1alpha1", Resource: "compositecontrollers"}

var widgetsGVR = schema.GroupVersionResource{Group: "flags.metalambda.dev", Version: "v1", Resource: "widgets"}

// installCRDs installs the project's CRDs and widgets, the parent resource of this
// package's CompositeControllers.
func installCRDs(t *testing.T) {
	t.Helper()
	env.InstallCRDs(t)
	env.InstallCRDs(t, kubetest.SchemalessCRD(widgetsGVR.Group, "Widget", widgetsGVR.Resource, "widget"))
}

// startEngine runs the engine's main path with args, as its command line would give
// them, and returns its options and a function that stops it and waits for it.
func startEngine(t *testing.T, args ...string) (*options, func()) {
	t.Helper()
	o, _, err := parse(t, append([]string{"--kubeconfig", env.Cluster.KubeconfigPath,
		"--metrics-address", kubetest.FreeAddr(t), "--health-probe-bind-address", kubetest.FreeAddr(t)}, args...)...)
	if err != nil {
		t.Fatal(err)
	}
	stop := kubetest.Run(t, "the engine", func(ctx context.Context) error { return run(ctx, o) }, answersReadyz(o))
	return o, stop
}

// answersReadyz holds once the engine's /readyz answers 200.
func answersReadyz(o *options) kubetest.Condition {
	return func(context.Context) (bool, error) {
		code, body, err := httpGet("http://" + o.healthProbeAddress + "/readyz")
		return code == 200, fmt.Errorf("%d %s %v", code, body, err)
	}
}

// hookServer answers sync hooks with status {ok: true} and no children, or with a
// 500 while failing is set, and counts its calls.
func hookServer(t *testing.T, failing bool) (*httptest.Server, *atomic.Int64) {
	var calls atomic.Int64
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		calls.Add(1)
		if failing {
			http.Error(w, "boom", http.StatusInternalServerError)
			return
		}
		_ = json.NewEncoder(w).Encode(map[string]any{"status": map[string]any{"ok": true}, "children": []any{}})
	}))
	t.Cleanup(srv.Close)
	return srv, &calls
}

func createCompositeController(t *testing.T, name, hookURL string) {
	t.Helper()
	cc := &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": "metacontroller.k8s.io/v1alpha1", "kind": "CompositeController",
		"metadata": map[string]any{"name": name},
		"spec": map[string]any{
			"generateSelector": true,
			"parentResource":   map[string]any{"apiVersion": "flags.metalambda.dev/v1", "resource": "widgets"},
			"hooks":            map[string]any{"sync": map[string]any{"webhook": map[string]any{"url": hookURL}}},
		},
	}}
	env.Create(t, compositeGVR, "", cc)
}

// waitForLifecycle waits until the controller object's events include reasons, each
// a Normal event from upstream's source with upstream's message.
func waitForLifecycle(t *testing.T, name string, reasons ...string) {
	t.Helper()
	kubetest.Eventually(t, 30*time.Second, fmt.Sprintf("events %v on CompositeController %s", reasons, name), func(context.Context) (bool, error) {
		var seen []string
		for _, e := range env.Events(t, "default", engine.CompositeKind, name) {
			if e.Type == corev1.EventTypeNormal && e.Source.Component == "metacontroller" && e.Message == e.Reason+" controller: "+name {
				seen = append(seen, e.Reason)
			}
		}
		for _, r := range reasons {
			if !slices.Contains(seen, r) {
				return false, fmt.Errorf("seen %v", seen)
			}
		}
		return true, nil
	})
}

// TestEngineWithUpstreamProductionArgs runs the engine with the arguments of upstream
// Metacontroller's production manifest plus --pprof-address, and checks pprof and the
// lifecycle events of a CompositeController: when it starts, when it is deleted and
// when the engine stops.
func TestEngineWithUpstreamProductionArgs(t *testing.T) {
	installCRDs(t)
	o, stop := startEngine(t, "--zap-log-level=4", "--discovery-interval=20s", "--pprof-address", kubetest.FreeAddr(t))
	if o.engine.DiscoveryInterval != 20*time.Second || o.logConfig.Verbosity != 4 {
		t.Fatalf("options: discovery %s, verbosity %d", o.engine.DiscoveryInterval, o.logConfig.Verbosity)
	}
	for path, want := range map[string]string{"/debug/pprof/": "goroutine", "/debug/pprof/cmdline": "", "/debug/pprof/goroutine?debug=1": "goroutine profile"} {
		code, body, err := httpGet("http://" + o.pprofAddress + path)
		if err != nil || code != 200 || !strings.Contains(body, want) {
			t.Errorf("GET %s = %d, %v; body lacks %q", path, code, err, want)
		}
	}
	if code, _, _ := httpGet("http://" + o.metricsAddress + "/debug/pprof/"); code == 200 {
		t.Error("pprof is served on the metrics address too")
	}

	hook, _ := hookServer(t, false)
	createCompositeController(t, "flags-deleted", hook.URL)
	waitForLifecycle(t, "flags-deleted", engine.ReasonStarting, engine.ReasonStarted)
	if err := env.Dynamic.Resource(compositeGVR).Delete(kubetest.Context(t), "flags-deleted", metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	waitForLifecycle(t, "flags-deleted", engine.ReasonStopping, engine.ReasonStopped)

	createCompositeController(t, "flags-engine-stops", hook.URL)
	waitForLifecycle(t, "flags-engine-stops", engine.ReasonStarting, engine.ReasonStarted)
	stop()
	waitForLifecycle(t, "flags-engine-stops", engine.ReasonStopping, engine.ReasonStopped)
}

// TestEventsBurstLimitsEventsPerObject gives a parent a failing hook and an engine
// that allows two events per object: the hook fails again and again, the parent gets
// two SyncError events.
func TestEventsBurstLimitsEventsPerObject(t *testing.T) {
	installCRDs(t)
	_, stop := startEngine(t, "--events-burst=2")
	hook, calls := hookServer(t, true)
	createCompositeController(t, "flags-burst", hook.URL)
	ns := env.Namespace(t)
	parent := &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": "flags.metalambda.dev/v1", "kind": "Widget",
		"metadata": map[string]any{"name": "failing"}, "spec": map[string]any{},
	}}
	if _, err := env.Dynamic.Resource(widgetsGVR).Namespace(ns).Create(kubetest.Context(t), parent, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	kubetest.Eventually(t, 60*time.Second, "the hook fails 6 times", func(context.Context) (bool, error) {
		return calls.Load() >= 6, fmt.Errorf("%d calls", calls.Load())
	})
	stop() // waits for the events recorded so far to be written
	var syncErrors int32
	for _, e := range env.Events(t, ns, "Widget", "failing") {
		if e.Reason == "SyncError" {
			syncErrors += e.Count
		}
	}
	if syncErrors != 2 {
		t.Errorf("%d SyncError events after %d failed syncs; want 2 (--events-burst=2)", syncErrors, calls.Load())
	}
}

var decoratorGVR = schema.GroupVersionResource{Group: "metacontroller.k8s.io", Version: "v1alpha1", Resource: "decoratorcontrollers"}

func httpGet(url string) (int, string, error) {
	resp, err := http.Get(url)
	if err != nil {
		return 0, "", err
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	return resp.StatusCode, string(body), err
}
