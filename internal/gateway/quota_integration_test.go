//go:build integration

package gateway

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	"github.com/metalambda/metalambda/internal/kubetest"
)

// TestFunctionsPerNamespaceLimit: with a limit of one function per namespace, the
// API refuses a second one with 403 naming the namespace, the limit and the flag; a
// second one applied past the API is not loaded and says why in its status; once
// the first is deleted, the second is served.
func TestFunctionsPerNamespaceLimit(t *testing.T) {
	g := startGateway(t, func(o *Options) { o.MaxFunctionsPerNamespace = 1 })
	ns := env.Namespace(t)
	base := "/v1/namespaces/" + ns + "/functions"
	fn := func(name string) map[string]any {
		return map[string]any{"name": name, "runtime": "javascript", "source": fmt.Sprintf(echoJS, name)}
	}
	if r := g.do(t, "POST", base, g.token, fn("one")); r.status != 201 {
		t.Fatalf("first function: %d %s", r.status, r.raw)
	}
	kubetest.Eventually(t, 30*time.Second, "the gateway knows the first function", func(context.Context) (bool, error) {
		return g.gw.store.get(ns, "one") != nil, nil
	})
	r := g.do(t, "POST", base, g.token, fn("two"))
	if r.status != 403 || r.body["error"] != "too_many_functions" {
		t.Fatalf("second function through the API: %d %s, want 403 too_many_functions", r.status, r.raw)
	}
	for _, want := range []string{`namespace \"` + ns + `\"`, "has 1 functions", "--max-functions-per-namespace"} {
		if !strings.Contains(r.raw, want) {
			t.Errorf("the refusal %s does not name %s", r.raw, want)
		}
	}
	if r := g.do(t, "PUT", base+"/two", g.token, fn("two")); r.status != 403 {
		t.Errorf("second function by PUT: %d %s, want 403", r.status, r.raw)
	}

	two := &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": FunctionsGVR.GroupVersion().String(), "kind": "Function",
		"metadata": map[string]any{"name": "two", "namespace": ns},
		"spec":     map[string]any{"runtime": "javascript", "source": fmt.Sprintf(echoJS, "two")},
	}}
	if _, err := env.Dynamic.Resource(FunctionsGVR).Namespace(ns).Create(kubetest.Context(t), two, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	waitFunction(t, ns, "two", func(o *unstructured.Unstructured) error {
		if err := readyIs(o, "False", "TooManyFunctions"); err != nil {
			return err
		}
		if msg := readyMessage(o); !strings.Contains(msg, "--max-functions-per-namespace") {
			return fmt.Errorf("message %q", msg)
		}
		return nil
	})
	if r := g.do(t, "POST", "/hooks/"+ns+"/two", "", hookRequest("p")); r.status == 200 {
		t.Errorf("the hook of a function past the limit answered %s", r.raw)
	}

	if r := g.do(t, "DELETE", base+"/one", g.token, nil); r.status != 204 {
		t.Fatalf("delete: %d %s", r.status, r.raw)
	}
	g.waitHook(t, ns, "two", "p-two")
	waitFunction(t, ns, "two", func(o *unstructured.Unstructured) error { return readyIs(o, "True", "Compiled") })
}
