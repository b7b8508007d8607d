//go:build integration

package engine

import (
	"context"
	"fmt"
	"reflect"
	"sync"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/types"

	"github.com/metalambda/metalambda/internal/apis/metacontroller/v1alpha1"
	"github.com/metalambda/metalambda/internal/engine/apply"
	"github.com/metalambda/metalambda/internal/kubetest"
)

// TestThreeWayApply runs the engine in the kubectl-apply-like mode: children carry the
// last-applied annotation, a field the hook drops is removed, a field someone else set
// is kept, and a steady state costs no writes.
func TestThreeWayApply(t *testing.T) {
	setup(t)
	ns := env.Namespace(t)
	eng := startEngine(t, ns, func(o *Options) { o.ApplyStrategy = ThreeWay })
	data := map[string]any{"a": "1", "b": "2"}
	hook := newHookServer(t, nil)
	hook.set(func(req map[string]any) (int, any) {
		hook.mu.Lock()
		d := map[string]any{}
		for k, v := range data {
			d[k] = v
		}
		hook.mu.Unlock()
		return 200, map[string]any{"children": []any{configMap("p-0", d, nil)}}
	})
	create(t, ccGVR, "", compositeManifest, ns, hook.URL, 1, "InPlace")
	create(t, parentsGVR, ns, parentManifest, "p", 0)
	cm := env.WaitFor(t, "the child exists with the last-applied annotation", configMapsGVR, ns, "p-0", func(o *unstructured.Unstructured) error {
		if o.GetAnnotations()[apply.LastAppliedAnnotation] == "" {
			return fmt.Errorf("annotations = %v", o.GetAnnotations())
		}
		return nil
	})
	// Someone else adds a key; the hook drops "b".
	patch := []byte(`{"data":{"other":"kept"}}`)
	if _, err := env.Dynamic.Resource(configMapsGVR).Namespace(ns).Patch(kubetest.Context(t), "p-0", types.MergePatchType, patch, metav1.PatchOptions{}); err != nil {
		t.Fatal(err)
	}
	hook.mu.Lock()
	delete(data, "b")
	hook.mu.Unlock()
	env.WaitFor(t, "b is removed and other is kept", configMapsGVR, ns, "p-0", func(o *unstructured.Unstructured) error {
		d := o.Object["data"].(map[string]any)
		if _, has := d["b"]; has || d["other"] != "kept" || d["a"] != "1" {
			return fmt.Errorf("data = %v", d)
		}
		return nil
	})
	if got := env.MustGet(t, configMapsGVR, ns, "p-0"); got.GetUID() != cm.GetUID() {
		t.Fatal("InPlace recreated the child")
	}
	time.Sleep(1500 * time.Millisecond)
	writes, calls := eng.writes(t), hook.calls.Load()
	kubetest.Eventually(t, 30*time.Second, "two more resyncs", func(context.Context) (bool, error) { return hook.calls.Load() >= calls+2, nil })
	if w := eng.writes(t) - writes; w != 0 {
		t.Errorf("three-way steady state cost %v writes", w)
	}
}

// TestIgnoreStatusChanges: a status-only change of the parent does not call the hook.
func TestIgnoreStatusChanges(t *testing.T) {
	setup(t)
	ns := env.Namespace(t)
	startEngine(t, ns)
	hook := newHookServer(t, func(map[string]any) (int, any) { return 200, map[string]any{"status": map[string]any{"by": "hook"}} })
	create(t, ccGVR, "", `
apiVersion: metacontroller.k8s.io/v1alpha1
kind: CompositeController
metadata: {name: %[1]s, labels: {metalambda.dev/test-engine: %[1]s}}
spec:
  generateSelector: true
  parentResource: {apiVersion: test.metalambda.dev/v1, resource: parents, ignoreStatusChanges: true, labelSelector: {matchLabels: {metalambda.dev/test-engine: %[1]s}}}
  hooks: {sync: {webhook: {url: "%[2]s"}}}
`, ns, hook.URL)
	create(t, parentsGVR, ns, parentManifest, "p", 0)
	p := env.WaitFor(t, "the first sync", parentsGVR, ns, "p", func(o *unstructured.Unstructured) error {
		if field(o.Object, "status", "by") != "hook" {
			return fmt.Errorf("status = %v", o.Object["status"])
		}
		return nil
	})
	time.Sleep(500 * time.Millisecond)
	calls := hook.calls.Load()
	p.Object["status"] = map[string]any{"by": "someone else"}
	if _, err := env.Dynamic.Resource(parentsGVR).Namespace(ns).UpdateStatus(kubetest.Context(t), p, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	time.Sleep(time.Second)
	if n := hook.calls.Load(); n != calls {
		t.Fatalf("a status-only change called the hook %d times", n-calls)
	}
	patchSpec(t, ns, "p", map[string]any{"size": 0, "changed": true})
	kubetest.Eventually(t, 30*time.Second, "a spec change calls the hook", func(context.Context) (bool, error) { return hook.calls.Load() > calls, nil })
}

// TestInformersAreSharedAndReleased: two controllers with the same child type share one
// informer, and deleting both releases every informer they opened.
func TestInformersAreSharedAndReleased(t *testing.T) {
	setup(t)
	ns := env.Namespace(t)
	eng := startEngine(t, ns)
	base := eng.mgr.env.informers.Active() // CompositeController and DecoratorController
	hook := newHookServer(t, keepObserved)
	for _, suffix := range []string{"a", "b"} {
		create(t, ccGVR, "", `
apiVersion: metacontroller.k8s.io/v1alpha1
kind: CompositeController
metadata: {name: %[1]s-%[3]s, labels: {metalambda.dev/test-engine: %[1]s}}
spec:
  generateSelector: true
  parentResource: {apiVersion: test.metalambda.dev/v1, resource: parents, labelSelector: {matchLabels: {metalambda.dev/test-engine: %[1]s}}}
  childResources: [{apiVersion: v1, resource: configmaps}, {apiVersion: v1, resource: secrets}]
  hooks: {sync: {webhook: {url: "%[2]s"}}}
`, ns, hook.URL, suffix)
	}
	kubetest.Eventually(t, 30*time.Second, "both controllers run", func(context.Context) (bool, error) {
		eng.mgr.mu.Lock()
		defer eng.mgr.mu.Unlock()
		return len(eng.mgr.hosted) == 2, nil
	})
	// With generateSelector, each child type has one informer, of labelled objects.
	if got := eng.mgr.env.informers.Active() - base; got != 3 {
		t.Errorf("two controllers on parents, configmaps and secrets opened %d informers, want 3 shared ones", got)
	}
	for _, suffix := range []string{"a", "b"} {
		if err := env.Dynamic.Resource(ccGVR).Delete(kubetest.Context(t), ns+"-"+suffix, metav1.DeleteOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	kubetest.Eventually(t, 30*time.Second, "deleting both controllers closes their informers", func(context.Context) (bool, error) {
		n := eng.mgr.env.informers.Active() - base
		return n == 0, fmt.Errorf("%d informers still open", n)
	})
}

// TestServiceWebhookThroughResolver: a hook given as a Service (the upstream seed
// manifest's form) is reached through the engine's service resolver.
func TestServiceWebhookThroughResolver(t *testing.T) {
	setup(t)
	ns := env.Namespace(t)
	hook := newHookServer(t, func(map[string]any) (int, any) {
		return 200, map[string]any{"status": map[string]any{"via": "service"}}
	})
	startEngine(t, ns, func(o *Options) {
		o.ResolveService = func(ref v1alpha1.ServiceReference) (string, bool) {
			if ref.Name == "hooks" && ref.Namespace == "hook-system" {
				return hook.URL, true
			}
			return "", false
		}
	})
	create(t, ccGVR, "", `
apiVersion: metacontroller.k8s.io/v1alpha1
kind: CompositeController
metadata: {name: %[1]s, labels: {metalambda.dev/test-engine: %[1]s}}
spec:
  generateSelector: true
  parentResource: {apiVersion: test.metalambda.dev/v1, resource: parents, labelSelector: {matchLabels: {metalambda.dev/test-engine: %[1]s}}}
  hooks: {sync: {webhook: {service: {name: hooks, namespace: hook-system, port: 8080}, path: /sync}}}
`, ns)
	create(t, parentsGVR, ns, parentManifest, "p", 0)
	env.WaitFor(t, "the hook is reached through the service", parentsGVR, ns, "p", func(o *unstructured.Unstructured) error {
		if field(o.Object, "status", "via") != "service" {
			return fmt.Errorf("status = %v", o.Object["status"])
		}
		return nil
	})
}

// TestPodChildrenAreNotRecreatedInSteadyState: Pods get fields from admission (the
// service-account token volume and mount, tolerations, defaults); with method
// Recreate, a naive comparison would delete and recreate them on every sync.
func TestPodChildrenAreNotRecreatedInSteadyState(t *testing.T) {
	setup(t)
	ns := env.Namespace(t)
	kubetest.Eventually(t, 30*time.Second, "the default ServiceAccount exists", func(ctx context.Context) (bool, error) {
		_, err := env.Kube.CoreV1().ServiceAccounts(ns).Get(ctx, "default", metav1.GetOptions{})
		return err == nil, err
	})
	eng := startEngine(t, ns)
	hook := newHookServer(t, func(req map[string]any) (int, any) {
		name := field(req["parent"].(map[string]any), "metadata", "name").(string)
		return 200, map[string]any{"children": []any{
			configMap(name+"-code", map[string]any{"main.py": "print('hi')"}, nil),
			map[string]any{
				"apiVersion": "v1", "kind": "Pod",
				"metadata": map[string]any{"name": name + "-pod", "labels": map[string]any{"app": name}},
				"spec": map[string]any{
					"containers": []any{map[string]any{
						"name": "main", "image": "python:3.11",
						"command":      []any{"python3", "/code/main.py"},
						"resources":    map[string]any{"requests": map[string]any{"cpu": "0.1", "memory": "64Mi"}},
						"volumeMounts": []any{map[string]any{"name": "code", "mountPath": "/code"}},
					}},
					"volumes": []any{map[string]any{"name": "code", "configMap": map[string]any{"name": name + "-code"}}},
				},
			},
		}}
	})
	create(t, ccGVR, "", `
apiVersion: metacontroller.k8s.io/v1alpha1
kind: CompositeController
metadata: {name: %[1]s, labels: {metalambda.dev/test-engine: %[1]s}}
spec:
  generateSelector: true
  resyncPeriodSeconds: 1
  parentResource: {apiVersion: test.metalambda.dev/v1, resource: parents, labelSelector: {matchLabels: {metalambda.dev/test-engine: %[1]s}}}
  childResources:
  - {apiVersion: v1, resource: configmaps, updateStrategy: {method: Recreate}}
  - {apiVersion: v1, resource: pods, updateStrategy: {method: Recreate}}
  hooks: {sync: {webhook: {url: "%[2]s"}}}
`, ns, hook.URL)
	create(t, parentsGVR, ns, parentManifest, "p", 0)
	pod := env.WaitFor(t, "the Pod exists with the token volume admission added", podsGVR, ns, "p-pod", func(o *unstructured.Unstructured) error {
		vols, _, _ := unstructured.NestedSlice(o.Object, "spec", "volumes")
		if len(vols) < 2 {
			return fmt.Errorf("volumes = %v", vols)
		}
		return nil
	})
	time.Sleep(1500 * time.Millisecond)
	writes, calls := eng.writes(t), hook.calls.Load()
	kubetest.Eventually(t, 30*time.Second, "three more resyncs", func(context.Context) (bool, error) { return hook.calls.Load() >= calls+3, nil })
	if w := eng.writes(t) - writes; w != 0 {
		t.Errorf("steady state with a Pod child cost %v writes", w)
	}
	if now := env.MustGet(t, podsGVR, ns, "p-pod"); now.GetUID() != pod.GetUID() {
		t.Fatal("the Pod was recreated in steady state")
	}
}

// TestCreatedServiceIsUpdatedWithoutLoops: a Service child is created with a plain
// create, which makes the engine's manager own the fields the API server defaulted too.
// When the hook drops a label, the update removes it, the Service keeps its allocated
// clusterIP and gets its defaulted fields back, and the steady state that follows
// costs no writes.
func TestCreatedServiceIsUpdatedWithoutLoops(t *testing.T) {
	setup(t)
	ns := env.Namespace(t)
	eng := startEngine(t, ns)
	var mu sync.Mutex
	dropped := false
	hook := newHookServer(t, func(req map[string]any) (int, any) {
		mu.Lock()
		labels := map[string]any{"dropped": "soon", "kept": "yes"}
		if dropped {
			delete(labels, "dropped")
		}
		mu.Unlock()
		return 200, map[string]any{"children": []any{map[string]any{
			"apiVersion": "v1", "kind": "Service",
			"metadata": map[string]any{"name": "p", "labels": labels},
			"spec":     map[string]any{"selector": map[string]any{"app": "p"}, "ports": []any{map[string]any{"port": 80, "targetPort": 8080}}},
		}}}
	})
	create(t, ccGVR, "", compositeManifest, ns, hook.URL, 1, "InPlace")
	create(t, parentsGVR, ns, parentManifest, "p", 0)
	created := env.WaitFor(t, "the Service is created", servicesGVR, ns, "p", nil)
	mu.Lock()
	dropped = true
	mu.Unlock()
	updated := env.WaitFor(t, "the dropped label is removed", servicesGVR, ns, "p", func(o *unstructured.Unstructured) error {
		if l := o.GetLabels(); l["dropped"] != "" || l["kept"] != "yes" {
			return fmt.Errorf("labels = %v", l)
		}
		return nil
	})
	if updated.GetUID() != created.GetUID() {
		t.Fatal("InPlace recreated the Service")
	}
	for _, path := range [][]string{{"spec", "clusterIP"}, {"spec", "type"}, {"spec", "sessionAffinity"}, {"spec", "internalTrafficPolicy"}} {
		if before, after := field(created.Object, path...), field(updated.Object, path...); before == nil || before != after {
			t.Errorf("Service %v was %v, is %v", path, before, after)
		}
	}
	if before, after := field(created.Object, "spec", "ports"), field(updated.Object, "spec", "ports"); !reflect.DeepEqual(before, after) {
		t.Errorf("Service ports were %v, are %v", before, after)
	}
	time.Sleep(1500 * time.Millisecond)
	writes, calls := eng.writes(t), hook.calls.Load()
	kubetest.Eventually(t, 30*time.Second, "two more resyncs", func(context.Context) (bool, error) { return hook.calls.Load() >= calls+2, nil })
	if w := eng.writes(t) - writes; w != 0 {
		t.Errorf("the steady state after the update cost %v writes", w)
	}
}
