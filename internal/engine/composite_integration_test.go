//go:build integration

package engine

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	"github.com/metalambda/metalambda/internal/kubetest"
)

const compositeManifest = `
apiVersion: metacontroller.k8s.io/v1alpha1
kind: CompositeController
metadata:
  name: %[1]s
  labels: {metalambda.dev/test-engine: %[1]s}
spec:
  generateSelector: true
  resyncPeriodSeconds: %[3]d
  parentResource: {apiVersion: test.metalambda.dev/v1, resource: parents, labelSelector: {matchLabels: {metalambda.dev/test-engine: %[1]s}}}
  childResources:
  - {apiVersion: v1, resource: configmaps, updateStrategy: {method: %[4]s}}
  - {apiVersion: v1, resource: services, updateStrategy: {method: InPlace}}
  hooks:
    sync:
      webhook: {url: "%[2]s/sync", timeout: 2s}
`

const parentManifest = `
apiVersion: test.metalambda.dev/v1
kind: Parent
metadata: {name: %s}
spec: {size: %d}
`

// echoChildren is a hook that returns n ConfigMaps and a Service named after the
// parent, and reports in status how many children it saw.
func echoChildren(value string) func(req map[string]any) (int, any) {
	return func(req map[string]any) (int, any) {
		parent := req["parent"].(map[string]any)
		name := field(parent, "metadata", "name").(string)
		size := int(field(parent, "spec", "size").(float64))
		var children []any
		for i := range size {
			children = append(children, configMap(fmt.Sprintf("%s-%d", name, i), map[string]any{"value": value}, nil))
		}
		children = append(children, map[string]any{
			"apiVersion": "v1", "kind": "Service",
			"metadata": map[string]any{"name": name},
			"spec": map[string]any{
				"selector": map[string]any{"app": name},
				"ports":    []any{map[string]any{"port": 80, "targetPort": 8080}},
			},
		})
		seen := len(req["children"].(map[string]any)["ConfigMap.v1"].(map[string]any))
		return 200, map[string]any{"status": map[string]any{"configMaps": seen}, "children": children}
	}
}

func TestCompositeCreatesChildrenAndWritesStatus(t *testing.T) {
	setup(t)
	ns := env.Namespace(t)
	eng := startEngine(t, ns)
	hook := newHookServer(t, echoChildren("one"))
	create(t, ccGVR, "", compositeManifest, ns, hook.URL, 0, "Recreate")
	parent := create(t, parentsGVR, ns, parentManifest, "p", 2)

	for _, name := range []string{"p-0", "p-1"} {
		cm := env.WaitFor(t, "ConfigMap "+name+" is created", configMapsGVR, ns, name, nil)
		ref := metav1.GetControllerOf(cm)
		if ref == nil || ref.UID != parent.GetUID() || ref.BlockOwnerDeletion == nil || !*ref.BlockOwnerDeletion {
			t.Errorf("%s: controller reference %+v, want the parent with blockOwnerDeletion", name, ref)
		}
		if got := cm.GetLabels()[ControllerUIDLabel]; got != string(parent.GetUID()) {
			t.Errorf("%s: label %s=%q, want the parent's UID", name, ControllerUIDLabel, got)
		}
	}
	env.WaitFor(t, "Service p is created", servicesGVR, ns, "p", nil)
	env.WaitFor(t, "the parent's status reports both ConfigMaps", parentsGVR, ns, "p", func(o *unstructured.Unstructured) error {
		n, _, _ := unstructured.NestedInt64(o.Object, "status", "configMaps")
		gen, _, _ := unstructured.NestedInt64(o.Object, "status", "observedGeneration")
		if n != 2 || gen != o.GetGeneration() {
			return fmt.Errorf("status = %v", o.Object["status"])
		}
		return nil
	})
	// The v1 request keys children by name, under "<Kind>.<apiVersion>".
	children := hook.last()["children"].(map[string]any)
	if _, ok := children["ConfigMap.v1"].(map[string]any)["p-0"]; !ok {
		t.Errorf("v1 request children = %v, want ConfigMap.v1 keyed by name", keys(children["ConfigMap.v1"]))
	}
	if _, ok := children["Service.v1"]; !ok {
		t.Errorf("request lacks the Service.v1 entry: %v", keys(children))
	}
	if eng.writes(t) == 0 {
		t.Error("the engine counted no writes although it created children")
	}

	// Scale down: the child the hook no longer returns is deleted.
	patchSpec(t, ns, "p", map[string]any{"size": 1})
	env.WaitGone(t, "ConfigMap p-1 is deleted after scale-down", configMapsGVR, ns, "p-1")
	env.WaitFor(t, "ConfigMap p-0 stays", configMapsGVR, ns, "p-0", nil)
}

// TestSteadyStateCostsNoWrites resyncs every second and checks that a converged
// parent with a server-defaulted Service child costs no writes and no uncached reads.
func TestSteadyStateCostsNoWrites(t *testing.T) {
	setup(t)
	ns := env.Namespace(t)
	eng := startEngine(t, ns)
	hook := newHookServer(t, echoChildren("steady"))
	create(t, ccGVR, "", compositeManifest, ns, hook.URL, 1, "InPlace")
	create(t, parentsGVR, ns, parentManifest, "p", 2)
	env.WaitFor(t, "status is written", parentsGVR, ns, "p", func(o *unstructured.Unstructured) error {
		if n, _, _ := unstructured.NestedInt64(o.Object, "status", "configMaps"); n != 2 {
			return fmt.Errorf("status = %v", o.Object["status"])
		}
		return nil
	})
	svc := env.WaitFor(t, "the Service has its defaulted clusterIP", servicesGVR, ns, "p", func(o *unstructured.Unstructured) error {
		if ip, _, _ := unstructured.NestedString(o.Object, "spec", "clusterIP"); ip == "" {
			return fmt.Errorf("no clusterIP yet")
		}
		return nil
	})
	// Let in-flight syncs settle, then measure over several resyncs.
	time.Sleep(2 * time.Second)
	writes, gets, calls := eng.writes(t), eng.gets(t), hook.calls.Load()
	kubetest.Eventually(t, 30*time.Second, "three more resyncs call the hook", func(context.Context) (bool, error) {
		return hook.calls.Load() >= calls+3, nil
	})
	if w := eng.writes(t) - writes; w != 0 {
		t.Errorf("steady state cost %v writes over %d syncs, want 0", w, hook.calls.Load()-calls)
	}
	if g := eng.gets(t) - gets; g != 0 {
		t.Errorf("steady state cost %v uncached GETs, want 0", g)
	}
	if now := env.MustGet(t, servicesGVR, ns, "p"); now.GetResourceVersion() != svc.GetResourceVersion() {
		t.Errorf("the Service was rewritten in steady state (resourceVersion %s -> %s)", svc.GetResourceVersion(), now.GetResourceVersion())
	}
}

// TestFailingHookTouchesNothing converges, then makes the hook fail in every way;
// no child may be created, updated or deleted.
func TestFailingHookTouchesNothing(t *testing.T) {
	setup(t)
	ns := env.Namespace(t)
	eng := startEngine(t, ns)
	hook := newHookServer(t, echoChildren("kept"))
	create(t, ccGVR, "", compositeManifest, ns, hook.URL, 1, "Recreate")
	create(t, parentsGVR, ns, parentManifest, "p", 2)
	before := env.WaitFor(t, "children exist", configMapsGVR, ns, "p-1", nil)
	env.WaitFor(t, "status is written", parentsGVR, ns, "p", func(o *unstructured.Unstructured) error {
		if n, _, _ := unstructured.NestedInt64(o.Object, "status", "configMaps"); n != 2 {
			return fmt.Errorf("status = %v", o.Object["status"])
		}
		return nil
	})
	time.Sleep(time.Second)
	writes := eng.writes(t)

	failures := []struct {
		name    string
		respond func(map[string]any) (int, any)
		event   string
	}{
		{"500", func(map[string]any) (int, any) { return 500, "boom" }, "500"},
		{"timeout", func(map[string]any) (int, any) { time.Sleep(3 * time.Second); return 200, map[string]any{} }, "timed out"},
		{"garbage", func(map[string]any) (int, any) { return 200, "{not json" }, "response"},
		{"empty children by error", func(map[string]any) (int, any) {
			return 200, map[string]any{"children": []any{map[string]any{"kind": "ConfigMap"}}}
		}, "invalid hook response"},
	}
	for _, f := range failures {
		t.Run(f.name, func(t *testing.T) {
			calls := hook.calls.Load()
			hook.set(f.respond)
			kubetest.Eventually(t, 30*time.Second, "a SyncError event mentioning "+f.event, func(context.Context) (bool, error) {
				for _, e := range env.Events(t, ns, "", "p") {
					if e.Reason == "SyncError" && containsFold(e.Message, f.event) && hook.calls.Load() > calls {
						return true, nil
					}
				}
				return false, nil
			})
		})
	}
	hook.set(echoChildren("kept"))
	if w := eng.writes(t) - writes; w != 0 {
		t.Errorf("failing hooks caused %v writes", w)
	}
	after := env.MustGet(t, configMapsGVR, ns, "p-1")
	if after.GetUID() != before.GetUID() || after.GetResourceVersion() != before.GetResourceVersion() {
		t.Errorf("a child changed while the hook failed")
	}
}

func TestUpdateMethods(t *testing.T) {
	setup(t)
	for _, method := range []string{"OnDelete", "Recreate", "InPlace"} {
		t.Run(method, func(t *testing.T) {
			ns := env.Namespace(t)
			startEngine(t, ns)
			hook := newHookServer(t, echoChildren("v1"))
			create(t, ccGVR, "", compositeManifest, ns, hook.URL, 1, method)
			create(t, parentsGVR, ns, parentManifest, "p", 1)
			first := env.WaitFor(t, "the child is created", configMapsGVR, ns, "p-0", nil)
			hook.set(echoChildren("v2"))
			switch method {
			case "OnDelete":
				calls := hook.calls.Load()
				kubetest.Eventually(t, 30*time.Second, "two resyncs", func(context.Context) (bool, error) { return hook.calls.Load() >= calls+2, nil })
				if got := env.MustGet(t, configMapsGVR, ns, "p-0"); field(got.Object, "data", "value") != "v1" {
					t.Fatalf("OnDelete updated the child: data %v", got.Object["data"])
				}
				if err := env.Kube.CoreV1().ConfigMaps(ns).Delete(kubetest.Context(t), "p-0", metav1.DeleteOptions{}); err != nil {
					t.Fatal(err)
				}
				env.WaitFor(t, "the deleted child comes back with v2", configMapsGVR, ns, "p-0", hasValue("v2"))
			case "Recreate":
				got := env.WaitFor(t, "the child is recreated with v2", configMapsGVR, ns, "p-0", hasValue("v2"))
				if got.GetUID() == first.GetUID() {
					t.Error("Recreate kept the UID: the child was updated in place")
				}
			case "InPlace":
				got := env.WaitFor(t, "the child is updated to v2", configMapsGVR, ns, "p-0", hasValue("v2"))
				if got.GetUID() != first.GetUID() {
					t.Error("InPlace changed the UID: the child was recreated")
				}
			}
		})
	}
}

func hasValue(v string) func(*unstructured.Unstructured) error {
	return func(o *unstructured.Unstructured) error {
		if got := field(o.Object, "data", "value"); got != v {
			return fmt.Errorf("data.value = %v", got)
		}
		return nil
	}
}

func patchSpec(t *testing.T, ns, name string, spec map[string]any) {
	t.Helper()
	obj := env.MustGet(t, parentsGVR, ns, name)
	obj.Object["spec"] = spec
	if _, err := env.Dynamic.Resource(parentsGVR).Namespace(ns).Update(kubetest.Context(t), obj, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
}

func keys(m any) []string {
	mm, _ := m.(map[string]any)
	var out []string
	for k := range mm {
		out = append(out, k)
	}
	slices.Sort(out)
	return out
}

func containsFold(s, sub string) bool {
	return strings.Contains(strings.ToLower(s), strings.ToLower(sub))
}
