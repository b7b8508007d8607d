//go:build integration

package gateway

import (
	"context"
	"fmt"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime/schema"

	"github.com/metalambda/metalambda/internal/engine"
	"github.com/metalambda/metalambda/internal/kubetest"
)

// TestCompositeControllerConvergesWithAGatewayFunction registers a function with the
// API, points a CompositeController's sync hook at its URL, and watches the engine
// converge the children.
func TestCompositeControllerConvergesWithAGatewayFunction(t *testing.T) {
	convergeThroughGateway(t, "")
}

// The same through a gateway whose hooks need a token: the controller presents it
// with webhook.authorization, read from a Secret.
func TestCompositeControllerPresentsTheGatewayHookToken(t *testing.T) {
	convergeThroughGateway(t, "gateway-s3cret")
}

func convergeThroughGateway(t *testing.T, hookToken string) {
	g := startGateway(t, func(o *Options) { o.HookToken = hookToken })
	ns := env.Namespace(t)
	ctx := kubetest.Context(t)
	env.InstallCRDs(t, kubetest.SchemalessCRD("gateway.test.metalambda.dev", "Greeting", "greetings", "greeting"))

	source := `function sync(request) {
  var p = request.parent;
  var children = [];
  for (var i = 0; i < p.spec.count; i++) {
    children.push({apiVersion: "v1", kind: "ConfigMap", metadata: {name: p.metadata.name + "-" + i}, data: {greeting: "hello " + p.spec.who}});
  }
  return {status: {configMaps: Object.keys(request.children["ConfigMap.v1"]).length}, children: children};
}`
	r := g.do(t, "POST", "/v1/namespaces/"+ns+"/functions", g.token, map[string]any{"name": "greeter", "runtime": "javascript", "source": source})
	if r.status != http.StatusCreated {
		t.Fatalf("register = %d %s", r.status, r.raw)
	}
	fn := waitFunction(t, ns, "greeter", func(o *unstructured.Unstructured) error { return readyIs(o, "True", "Compiled") })
	hookURL, _, _ := unstructured.NestedString(fn.Object, "status", "url")

	mgr, err := engine.New(env.Config, func() engine.Options {
		o := engine.Defaults()
		o.TargetSelector = labels.SelectorFromSet(labels.Set{"test": ns})
		return o
	}(), prometheus.NewRegistry())
	if err != nil {
		t.Fatal(err)
	}
	kubetest.Run(t, "the engine", mgr.Run, nil)

	webhook := map[string]any{"url": hookURL}
	if hookToken != "" {
		secret := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: "hook-token"}, StringData: map[string]string{"token": hookToken + "\n"}}
		if _, err := env.Kube.CoreV1().Secrets(ns).Create(ctx, secret, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
		webhook["authorization"] = map[string]any{"secretRef": map[string]any{"name": "hook-token", "namespace": ns, "key": "token"}}
		if r := g.do(t, "POST", "/hooks/"+ns+"/greeter", "", map[string]any{}); r.status != http.StatusUnauthorized {
			t.Fatalf("the hook without its token answered %d, want 401", r.status)
		}
	}
	cc := &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": "metacontroller.k8s.io/v1alpha1", "kind": "CompositeController",
		"metadata": map[string]any{"name": ns, "labels": map[string]any{"test": ns}},
		"spec": map[string]any{
			"generateSelector": true,
			"parentResource":   map[string]any{"apiVersion": "gateway.test.metalambda.dev/v1", "resource": "greetings"},
			"childResources":   []any{map[string]any{"apiVersion": "v1", "resource": "configmaps", "updateStrategy": map[string]any{"method": "InPlace"}}},
			"hooks":            map[string]any{"sync": map[string]any{"webhook": webhook}},
		},
	}}
	ccGVR := schema.GroupVersionResource{Group: "metacontroller.k8s.io", Version: "v1alpha1", Resource: "compositecontrollers"}
	if _, err := env.Dynamic.Resource(ccGVR).Create(ctx, cc, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = env.Dynamic.Resource(ccGVR).Delete(context.Background(), ns, metav1.DeleteOptions{}) })
	greetings := schema.GroupVersionResource{Group: "gateway.test.metalambda.dev", Version: "v1", Resource: "greetings"}
	parent := &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": "gateway.test.metalambda.dev/v1", "kind": "Greeting",
		"metadata": map[string]any{"name": "g"}, "spec": map[string]any{"count": int64(2), "who": "world"},
	}}
	if _, err := env.Dynamic.Resource(greetings).Namespace(ns).Create(ctx, parent, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	kubetest.Eventually(t, 30*time.Second, "the engine converges the children the gateway function returns", func(ctx context.Context) (bool, error) {
		for _, name := range []string{"g-0", "g-1"} {
			cm, err := env.Kube.CoreV1().ConfigMaps(ns).Get(ctx, name, metav1.GetOptions{})
			if err != nil {
				return false, err
			}
			if cm.Data["greeting"] != "hello world" {
				return false, fmt.Errorf("%s data = %v", name, cm.Data)
			}
		}
		p, err := env.Dynamic.Resource(greetings).Namespace(ns).Get(ctx, "g", metav1.GetOptions{})
		if err != nil {
			return false, err
		}
		n, _, _ := unstructured.NestedInt64(p.Object, "status", "configMaps")
		return n == 2, fmt.Errorf("status = %v", p.Object["status"])
	})
}

func TestHookToken(t *testing.T) {
	g := startGateway(t)
	ns := env.Namespace(t)
	createFunction(t, ns, "echo", "javascript", fmt.Sprintf(echoJS, "t"), 0)
	g.waitHook(t, ns, "echo", "p-t")
	// A second gateway on the same cluster with a hook token serves the same function.
	second := startGatewayWith(t, env.Config, func(o *Options) { o.HookToken = "s3cret" })
	kubetest.Eventually(t, 30*time.Second, "the second replica loads the function", func(context.Context) (bool, error) {
		return second.gw.store.get(ns, "echo") != nil, nil
	})
	if r := second.do(t, "POST", "/hooks/"+ns+"/echo", "", hookRequest("p")); r.status != http.StatusUnauthorized {
		t.Errorf("hook without token = %d, want 401", r.status)
	}
	if r := second.do(t, "POST", "/hooks/"+ns+"/echo", "wrong", hookRequest("p")); r.status != http.StatusUnauthorized {
		t.Errorf("hook with a wrong token = %d, want 401", r.status)
	}
	if r := second.do(t, "POST", "/hooks/"+ns+"/echo", "s3cret", hookRequest("p")); r.status != 200 || childName(r) != "p-t" {
		t.Errorf("hook with the token = %d %s", r.status, r.raw)
	}
	// A Kubernetes token passes the check a test call makes: invoke in the namespace.
	applyShippedRBAC(t)
	invoker := serviceAccount(t, ns, "invoker", false, clusterRole("metalambda-function-invoker"))
	nobody := serviceAccount(t, ns, "nobody", false)
	second.waitStatus(t, "POST", "/hooks/"+ns+"/echo", invoker, hookRequest("p"), http.StatusOK)
	if r := second.do(t, "POST", "/hooks/"+ns+"/echo", nobody, hookRequest("p")); r.status != http.StatusForbidden || !strings.Contains(r.raw, "may not invoke") {
		t.Errorf("hook with the token of a user who may not invoke = %d %s, want 403", r.status, r.raw)
	}
}
