//go:build integration

package main

import (
	"context"
	"fmt"
	"io"
	"net"
	"net/http"
	"strings"
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	fnv1 "github.com/metalambda/metalambda/internal/apis/metalambda/v1alpha1"
	"github.com/metalambda/metalambda/internal/gateway"
	"github.com/metalambda/metalambda/internal/kubetest"
)

// A gateway told to stop (SIGTERM) first fails /readyz while it goes on serving,
// then stops accepting connections and lets the calls in flight finish before it
// stops their workers: a rolled or scaled-down replica fails no call it took.
func TestShutdownDrainsCallsInFlight(t *testing.T) {
	env.InstallCRDs(t)
	ns := env.Namespace(t)
	o := defaultOptions()
	o.kubeconfig = env.Cluster.KubeconfigPath
	o.listen = kubetest.FreeAddr(t)
	o.shutdownDelay, o.shutdownTimeout = 2*time.Second, 30*time.Second
	if err := o.validate(); err != nil {
		t.Fatal(err)
	}
	base := "http://" + o.listen
	stopped := make(chan time.Time, 1)
	stop := kubetest.Run(t, "the gateway", func(ctx context.Context) error {
		err := run(ctx, o, nil)
		stopped <- time.Now()
		return err
	}, func(context.Context) (bool, error) {
		code, _ := get(base + "/readyz")
		return code == http.StatusOK, nil
	})

	gvr := gateway.FunctionsGVR
	env.Create(t, gvr, ns, &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": fnv1.Group + "/" + fnv1.Version, "kind": "Function",
		"metadata": map[string]any{"name": "slow"},
		"spec":     map[string]any{"runtime": "python", "source": "import time\n\ndef sync(request):\n    time.sleep(3)\n    return {'status': {'slept': True}}\n"},
	}})
	env.WaitFor(t, "the Function is served", gvr, ns, "slow", func(u *unstructured.Unstructured) error {
		conds, _, _ := unstructured.NestedSlice(u.Object, "status", "conditions")
		for _, c := range conds {
			if m, _ := c.(map[string]any); m["type"] == "Ready" && m["status"] == "True" {
				return nil
			}
		}
		return fmt.Errorf("status %v", u.Object["status"])
	})

	type answer struct {
		code int
		body string
		err  error
		at   time.Time
	}
	inFlight := make(chan answer, 1)
	go func() {
		resp, err := http.Post(base+"/hooks/"+ns+"/slow", "application/json", strings.NewReader(`{"parent": {}}`))
		if err != nil {
			inFlight <- answer{err: err, at: time.Now()}
			return
		}
		defer resp.Body.Close()
		body, _ := io.ReadAll(resp.Body)
		inFlight <- answer{code: resp.StatusCode, body: string(body), at: time.Now()}
	}()
	time.Sleep(500 * time.Millisecond) // the call is in the worker's sleep
	stopping := time.Now()
	go stop()

	kubetest.Eventually(t, 5*time.Second, "/readyz fails while draining", func(context.Context) (bool, error) {
		code, body := get(base + "/readyz")
		return code == http.StatusServiceUnavailable && strings.Contains(body, "draining"), nil
	})
	if code, _ := get(base + "/healthz"); code != http.StatusOK {
		t.Errorf("/healthz while draining = %d, want 200: the gateway serves everything but readiness until the delay ends", code)
	}
	a := <-inFlight
	if a.err != nil || a.code != http.StatusOK || !strings.Contains(a.body, `"slept":true`) {
		t.Errorf("the call in flight at the shutdown: %d %q %v, want 200 and its answer", a.code, a.body, a.err)
	}
	end := <-stopped
	t.Logf("the call in flight answered %s after the stop, and the gateway stopped after %s", a.at.Sub(stopping).Round(time.Millisecond), end.Sub(stopping).Round(time.Millisecond))
	if end.Before(a.at) {
		t.Errorf("the gateway stopped before the call in flight answered")
	}
	if conn, err := net.DialTimeout("tcp", o.listen, time.Second); err == nil {
		conn.Close()
		t.Errorf("the gateway still accepts connections at %s after it stopped", o.listen)
	}
}

// get returns the status code and body of a GET of url (0 when it failed).
func get(url string) (int, string) {
	resp, err := http.Get(url)
	if err != nil {
		return 0, err.Error()
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(body)
}
