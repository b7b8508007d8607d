//go:build integration

package gateway

import (
	"context"
	"fmt"
	"net/http"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime/schema"

	"github.com/metalambda/metalambda/internal/engine"
	"github.com/metalambda/metalambda/internal/kubetest"
)

// versionedJS answers one ConfigMap per parent whose data names the code's version.
const versionedJS = `function sync(request) {
  var p = request.parent;
  return {children: [{apiVersion: "v1", kind: "ConfigMap", metadata: {name: p.metadata.name}, data: {code: %q}}]};
}`

var versionGreetings = schema.GroupVersionResource{Group: "resync.test.metalambda.dev", Version: "v1", Resource: "greetings"}

// TestCodeChangeResyncsEveryParent: without a rollout policy, new code of the
// Function a controller's sync hook calls re-syncs every parent of the controller,
// though no parent changes.
func TestCodeChangeResyncsEveryParent(t *testing.T) {
	g := startGateway(t)
	ns := env.Namespace(t)
	ctx := kubetest.Context(t)
	env.InstallCRDs(t, kubetest.SchemalessCRD(versionGreetings.Group, "Greeting", "greetings", "greeting"))
	base := "/v1/namespaces/" + ns + "/functions"
	if r := g.do(t, "POST", base, g.token, map[string]any{"name": "versioned", "runtime": "javascript", "source": fmt.Sprintf(versionedJS, "v1")}); r.status != http.StatusCreated {
		t.Fatalf("register = %d %s", r.status, r.raw)
	}
	fn := waitFunction(t, ns, "versioned", func(o *unstructured.Unstructured) error { return readyIs(o, "True", "Compiled") })
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
	createVersionedController(t, ns, hookURL, nil)
	const parents = 30
	for i := range parents {
		p := &unstructured.Unstructured{Object: map[string]any{
			"apiVersion": versionGreetings.GroupVersion().String(), "kind": "Greeting",
			"metadata": map[string]any{"name": fmt.Sprintf("p%02d", i)}, "spec": map[string]any{},
		}}
		if _, err := env.Dynamic.Resource(versionGreetings).Namespace(ns).Create(ctx, p, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	waitChildren(t, ns, parents, "v1")

	if r := g.do(t, "PUT", base+"/versioned", g.token, map[string]any{"runtime": "javascript", "source": fmt.Sprintf(versionedJS, "v2")}); r.status != http.StatusOK {
		t.Fatalf("update = %d %s", r.status, r.raw)
	}
	waitChildren(t, ns, parents, "v2")
}

// createVersionedController runs a CompositeController over versionGreetings whose
// sync hook is hookURL; parentLabels, if set, limit it to the parents with those
// labels.
func createVersionedController(t *testing.T, ns, hookURL string, parentLabels map[string]any) {
	t.Helper()
	parent := map[string]any{"apiVersion": versionGreetings.GroupVersion().String(), "resource": "greetings"}
	if parentLabels != nil {
		parent["labelSelector"] = map[string]any{"matchLabels": parentLabels}
	}
	cc := &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": "metacontroller.k8s.io/v1alpha1", "kind": "CompositeController",
		"metadata": map[string]any{"name": ns, "labels": map[string]any{"test": ns}},
		"spec": map[string]any{
			"generateSelector": true,
			"parentResource":   parent,
			"childResources":   []any{map[string]any{"apiVersion": "v1", "resource": "configmaps", "updateStrategy": map[string]any{"method": "InPlace"}}},
			"hooks":            map[string]any{"sync": map[string]any{"webhook": map[string]any{"url": hookURL}}},
		},
	}}
	ccGVR := schema.GroupVersionResource{Group: "metacontroller.k8s.io", Version: "v1alpha1", Resource: "compositecontrollers"}
	if _, err := env.Dynamic.Resource(ccGVR).Create(kubetest.Context(t), cc, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = env.Dynamic.Resource(ccGVR).Delete(context.Background(), ns, metav1.DeleteOptions{}) })
}

// waitChildren waits until each of the n parents has its ConfigMap from code version.
func waitChildren(t *testing.T, ns string, n int, version string) {
	t.Helper()
	kubetest.Eventually(t, 60*time.Second, "every parent's child comes from code "+version, func(ctx context.Context) (bool, error) {
		cms, err := env.Kube.CoreV1().ConfigMaps(ns).List(ctx, metav1.ListOptions{})
		if err != nil {
			return false, err
		}
		got := 0
		for _, cm := range cms.Items {
			if cm.Data["code"] == version {
				got++
			}
		}
		return got == n, fmt.Errorf("%d of %d children from %s", got, n, version)
	})
}
