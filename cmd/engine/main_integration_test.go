//go:build integration

package main

import (
	"context"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"

	"github.com/metalambda/metalambda/crds"
	"github.com/metalambda/metalambda/internal/kubetest"
	"github.com/metalambda/metalambda/internal/localcluster"
)

var env *kubetest.Env

func TestMain(m *testing.M) {
	kubetest.Main(m, &env, localcluster.Options{Components: []localcluster.Component{}})
}

// TestEngineServesHealthAndMetrics runs the engine's main path against the cluster.
func TestEngineServesHealthAndMetrics(t *testing.T) {
	all, err := crds.All()
	if err != nil {
		t.Fatal(err)
	}
	if err := crds.Install(kubetest.Context(t), env.Extensions, all...); err != nil {
		t.Fatal(err)
	}
	o := defaultOptions()
	o.kubeconfig = env.Cluster.KubeconfigPath
	o.metricsAddress, o.healthProbeAddress = freeAddr(t), freeAddr(t)
	if err := o.validate(); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- run(ctx, o) }()
	defer func() {
		cancel()
		if err := <-done; err != nil {
			t.Errorf("run returned %v", err)
		}
	}()
	kubetest.Eventually(t, 30*time.Second, "/readyz answers 200", func(context.Context) (bool, error) {
		code, body, err := httpGet("http://" + o.healthProbeAddress + "/readyz")
		return code == 200, fmt.Errorf("%d %s %v", code, body, err)
	})
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

func freeAddr(t *testing.T) string {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	return l.Addr().String()
}
