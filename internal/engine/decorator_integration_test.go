//go:build integration

package engine

import (
	"fmt"
	"net/http"
	"slices"
	"sync"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/types"

	"github.com/metalambda/metalambda/internal/kubetest"
)

const decoratorManifest = `
apiVersion: metacontroller.k8s.io/v1alpha1
kind: DecoratorController
metadata:
  name: %[1]s
  labels: {metalambda.dev/test-engine: %[1]s}
spec:
  resources:
  - apiVersion: test.metalambda.dev/v1
    resource: parents
    labelSelector: {matchLabels: {decorate: "yes", metalambda.dev/test-engine: %[1]s}}
    annotationSelector: {matchExpressions: [{key: example.com/team, operator: Exists}]}
  attachments:
  - {apiVersion: v1, resource: configmaps, updateStrategy: {method: InPlace}}
  hooks:
    sync: {version: v2, webhook: {url: "%[2]s/sync"}}
`

func TestDecoratorLabelsAnnotationsStatusAndAttachments(t *testing.T) {
	setup(t)
	ns := env.Namespace(t)
	startEngine(t, ns)
	hook := newHookServer(t, func(req map[string]any) (int, any) {
		obj := req["object"].(map[string]any)
		name := field(obj, "metadata", "name").(string)
		return 200, map[string]any{
			"labels":      map[string]any{"decorated": "true", "remove-me": nil},
			"annotations": map[string]any{"example.com/note": "hello"},
			"status":      map[string]any{"attachments": len(req["attachments"].(map[string]any)["ConfigMap.v1"].(map[string]any))},
			"attachments": []any{configMap(name+"-extra", map[string]any{"k": "v"}, nil)},
		}
	})
	create(t, dcGVR, "", decoratorManifest, ns, hook.URL)
	const target = `
apiVersion: test.metalambda.dev/v1
kind: Parent
metadata:
  name: %s
  labels: {decorate: "yes", remove-me: "x"}
  annotations: %s
spec: {}
`
	selected := create(t, parentsGVR, ns, target, "selected", `{example.com/team: a}`)
	create(t, parentsGVR, ns, target, "no-annotation", `{}`)

	env.WaitFor(t, "the target is decorated", parentsGVR, ns, "selected", func(o *unstructured.Unstructured) error {
		l, a := o.GetLabels(), o.GetAnnotations()
		switch {
		case l["decorated"] != "true":
			return fmt.Errorf("labels = %v", l)
		case l["remove-me"] != "":
			return fmt.Errorf("label remove-me was not removed: %v", l)
		case a["example.com/note"] != "hello":
			return fmt.Errorf("annotations = %v", a)
		case field(o.Object, "status", "attachments") != int64(1):
			return fmt.Errorf("status = %v", o.Object["status"])
		}
		return nil
	})
	cm := env.WaitFor(t, "the attachment exists", configMapsGVR, ns, "selected-extra", nil)
	if ref := metav1.GetControllerOf(cm); ref == nil || ref.UID != selected.GetUID() {
		t.Errorf("attachment controller = %v, want the target", ref)
	}
	if got := cm.GetAnnotations()[DecoratorAnnotation]; got != ns {
		t.Errorf("attachment annotation %s = %q, want %q", DecoratorAnnotation, got, ns)
	}
	// v2 keys attachments by namespace/name.
	att := hook.last()["attachments"].(map[string]any)["ConfigMap.v1"].(map[string]any)
	if _, ok := att[ns+"/selected-extra"]; !ok {
		t.Errorf("v2 attachments keys = %v, want namespace/name", keys(att))
	}
	// The target without the annotation is left alone.
	time.Sleep(500 * time.Millisecond)
	if l := env.MustGet(t, parentsGVR, ns, "no-annotation").GetLabels(); l["decorated"] != "" {
		t.Errorf("a target outside the annotation selector was decorated: %v", l)
	}
	if _, err := env.Get(kubetest.Context(t), configMapsGVR, ns, "no-annotation-extra"); err == nil {
		t.Error("a target outside the selector got an attachment")
	}
}

const relatedManifest = `
apiVersion: metacontroller.k8s.io/v1alpha1
kind: CompositeController
metadata:
  name: %[1]s
  labels: {metalambda.dev/test-engine: %[1]s}
spec:
  generateSelector: true
  parentResource: {apiVersion: test.metalambda.dev/v1, resource: parents, labelSelector: {matchLabels: {metalambda.dev/test-engine: %[1]s}}}
  hooks:
    sync: {webhook: {url: "%[2]s/sync"}}
    customize: {webhook: {url: "%[2]s/customize"}}
`

func TestCustomizeHookRelatedResources(t *testing.T) {
	setup(t)
	ns := env.Namespace(t)
	startEngine(t, ns)
	hook := newHookServer(t, func(req map[string]any) (int, any) {
		if _, isSync := req["children"]; !isSync {
			return 200, map[string]any{"relatedResources": []any{map[string]any{
				"apiVersion": "v1", "resource": "configmaps",
				"labelSelector": map[string]any{"matchLabels": map[string]any{"feeds": "p"}},
			}}}
		}
		related := req["related"].(map[string]any)["ConfigMap.v1"].(map[string]any)
		return 200, map[string]any{"status": map[string]any{"related": keys(related)}}
	})
	create(t, ccGVR, "", relatedManifest, ns, hook.URL)
	create(t, configMapsGVR, ns, "{apiVersion: v1, kind: ConfigMap, metadata: {name: a, labels: {feeds: p}}}")
	create(t, configMapsGVR, ns, "{apiVersion: v1, kind: ConfigMap, metadata: {name: unrelated}}")
	create(t, parentsGVR, ns, parentManifest, "p", 0)
	env.WaitFor(t, "the sync hook sees the related ConfigMap", parentsGVR, ns, "p", relatedStatus("a"))
	create(t, configMapsGVR, ns, "{apiVersion: v1, kind: ConfigMap, metadata: {name: b, labels: {feeds: p}}}")
	env.WaitFor(t, "a new related ConfigMap triggers a sync", parentsGVR, ns, "p", relatedStatus("a", "b"))
}

func relatedStatus(names ...string) func(*unstructured.Unstructured) error {
	return func(o *unstructured.Unstructured) error {
		if got := fmt.Sprint(field(o.Object, "status", "related")); got != fmt.Sprint(names) {
			return fmt.Errorf("status.related = %s, want %v", got, names)
		}
		return nil
	}
}

func TestThrottledHookIsRetriedAfterRetryAfter(t *testing.T) {
	setup(t)
	ns := env.Namespace(t)
	startEngine(t, ns)
	var mu sync.Mutex
	var throttledAt, retriedAt time.Time
	hook := newHookServer(t, func(req map[string]any) (int, any) {
		mu.Lock()
		defer mu.Unlock()
		switch {
		case throttledAt.IsZero():
			throttledAt = time.Now()
			return http.StatusTooManyRequests, retryAfterHeader("2")
		case retriedAt.IsZero():
			retriedAt = time.Now()
		}
		if _, isSync := req["children"]; !isSync {
			return 200, map[string]any{}
		}
		return 200, map[string]any{"status": map[string]any{"ok": true}}
	})
	create(t, ccGVR, "", relatedManifest, ns, hook.URL)
	create(t, parentsGVR, ns, parentManifest, "p", 0)
	env.WaitFor(t, "the sync succeeds after the throttle", parentsGVR, ns, "p", func(o *unstructured.Unstructured) error {
		if field(o.Object, "status", "ok") != true {
			return fmt.Errorf("status = %v", o.Object["status"])
		}
		return nil
	})
	mu.Lock()
	defer mu.Unlock()
	// A lower bound only: the retry must not come before the 2 s the hook asked for.
	if waited := retriedAt.Sub(throttledAt); waited < 1900*time.Millisecond {
		t.Fatalf("retried after %s, before the Retry-After of 2s", waited)
	}
}

// TestDecoratorFinalizesTargetsThatStopMatching: a target that leaves the selector is
// finalized (the hook can clean up) and its finalizer removed; the target stays.
func TestDecoratorFinalizesTargetsThatStopMatching(t *testing.T) {
	setup(t)
	ns := env.Namespace(t)
	startEngine(t, ns)
	var finalizing atomicBool
	hook := newHookServer(t, func(req map[string]any) (int, any) {
		if req["finalizing"] == true {
			finalizing.set()
			return 200, map[string]any{"finalized": true}
		}
		return 200, map[string]any{"labels": map[string]any{"seen": "yes"}}
	})
	create(t, dcGVR, "", `
apiVersion: metacontroller.k8s.io/v1alpha1
kind: DecoratorController
metadata: {name: %[1]s, labels: {metalambda.dev/test-engine: %[1]s}}
spec:
  resources:
  - {apiVersion: test.metalambda.dev/v1, resource: parents, labelSelector: {matchLabels: {decorate: "yes", metalambda.dev/test-engine: %[1]s}}}
  hooks:
    sync: {webhook: {url: "%[2]s/sync"}}
    finalize: {webhook: {url: "%[2]s/finalize"}}
`, ns, hook.URL)
	create(t, parentsGVR, ns, "{apiVersion: test.metalambda.dev/v1, kind: Parent, metadata: {name: t, labels: {decorate: \"yes\"}}, spec: {}}")
	finalizer := finalizerName(decoratorFinalizerPrefix, ns)
	env.WaitFor(t, "the target is decorated and carries the finalizer", parentsGVR, ns, "t", func(o *unstructured.Unstructured) error {
		if o.GetLabels()["seen"] != "yes" || !slices.Contains(o.GetFinalizers(), finalizer) {
			return fmt.Errorf("labels %v, finalizers %v", o.GetLabels(), o.GetFinalizers())
		}
		return nil
	})
	patch := []byte(`{"metadata":{"labels":{"decorate":"no"}}}`)
	if _, err := env.Dynamic.Resource(parentsGVR).Namespace(ns).Patch(kubetest.Context(t), "t", types.MergePatchType, patch, metav1.PatchOptions{}); err != nil {
		t.Fatal(err)
	}
	env.WaitFor(t, "the finalizer is removed once the target stops matching", parentsGVR, ns, "t", func(o *unstructured.Unstructured) error {
		if slices.Contains(o.GetFinalizers(), finalizer) {
			return fmt.Errorf("finalizers %v", o.GetFinalizers())
		}
		return nil
	})
	if !finalizing.get() {
		t.Error("the finalize hook was not called for a target that stopped matching")
	}
}

type atomicBool struct {
	mu sync.Mutex
	v  bool
}

func (b *atomicBool) set() { b.mu.Lock(); b.v = true; b.mu.Unlock() }
func (b *atomicBool) get() bool {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.v
}

// TestCustomizeNamespaceSelector: a v2 customize hook selects related objects in every
// namespace whose labels match, and a namespace that gains the label adds its objects.
func TestCustomizeNamespaceSelector(t *testing.T) {
	setup(t)
	ns := env.Namespace(t)
	startEngine(t, ns)
	team := "team-" + ns[len(ns)-6:]
	hook := newHookServer(t, func(req map[string]any) (int, any) {
		if _, isSync := req["children"]; !isSync {
			return 200, map[string]any{"relatedResources": []any{map[string]any{
				"apiVersion": "v1", "resource": "configmaps",
				"namespaceSelector": map[string]any{"matchLabels": map[string]any{"team": team}},
				"labelSelector":     map[string]any{"matchLabels": map[string]any{"shared": "yes"}},
			}}}
		}
		related := req["related"].(map[string]any)["ConfigMap.v1"].(map[string]any)
		return 200, map[string]any{"status": map[string]any{"related": keys(related)}}
	})
	create(t, ccGVR, "", `
apiVersion: metacontroller.k8s.io/v1alpha1
kind: CompositeController
metadata: {name: %[1]s, labels: {metalambda.dev/test-engine: %[1]s}}
spec:
  generateSelector: true
  parentResource: {apiVersion: test.metalambda.dev/v1, resource: parents, labelSelector: {matchLabels: {metalambda.dev/test-engine: %[1]s}}}
  hooks:
    sync: {version: v2, webhook: {url: "%[2]s/sync"}}
    customize: {version: v2, webhook: {url: "%[2]s/customize"}}
`, ns, hook.URL)
	other1, other2 := env.Namespace(t), env.Namespace(t)
	ctx := kubetest.Context(t)
	labelNamespace := func(name string) {
		patch := []byte(fmt.Sprintf(`{"metadata":{"labels":{"team":%q}}}`, team))
		if _, err := env.Kube.CoreV1().Namespaces().Patch(ctx, name, types.MergePatchType, patch, metav1.PatchOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	labelNamespace(other1)
	for _, n := range []string{other1, other2} {
		create(t, configMapsGVR, n, "{apiVersion: v1, kind: ConfigMap, metadata: {name: shared, labels: {shared: 'yes'}}}")
	}
	create(t, parentsGVR, ns, parentManifest, "p", 0)
	env.WaitFor(t, "only the labelled namespace's ConfigMap is related", parentsGVR, ns, "p", relatedStatus(other1+"/shared"))
	labelNamespace(other2)
	want := []string{other1 + "/shared", other2 + "/shared"}
	slices.Sort(want)
	env.WaitFor(t, "labelling a namespace adds its ConfigMap", parentsGVR, ns, "p", relatedStatus(want...))
}
