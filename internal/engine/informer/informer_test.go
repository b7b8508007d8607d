package informer

import (
	"context"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	dynamicfake "k8s.io/client-go/dynamic/fake"
	"k8s.io/client-go/tools/cache"
)

var configMaps = schema.GroupVersionResource{Version: "v1", Resource: "configmaps"}

func configMap(ns, name string, ownerUID string) *unstructured.Unstructured {
	u := &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": "v1", "kind": "ConfigMap",
		"metadata": map[string]any{"name": name, "namespace": ns},
	}}
	if ownerUID != "" {
		u.Object["metadata"].(map[string]any)["ownerReferences"] = []any{map[string]any{
			"apiVersion": "v1", "kind": "Secret", "name": "owner", "uid": ownerUID, "controller": true,
		}}
	}
	return u
}

// TestSubscriptionsShareOneInformer uses client-go's fake dynamic client: small unit
// coverage of the reference counting and indexes; the engine's integration tests cover
// the informers against a real API server.
func TestSubscriptionsShareOneInformer(t *testing.T) {
	scheme := runtime.NewScheme()
	client := dynamicfake.NewSimpleDynamicClientWithCustomListKinds(scheme,
		map[schema.GroupVersionResource]string{configMaps: "ConfigMapList"},
		configMap("a", "owned", "uid-1"), configMap("a", "orphan", ""), configMap("b", "other", ""))
	f := NewFactory(client, Options{})
	first, second := f.Subscribe(configMaps), f.Subscribe(configMaps)
	if f.Active() != 1 {
		t.Fatalf("two subscriptions to one resource run %d informers, want 1", f.Active())
	}
	added := make(chan string, 10)
	if err := second.AddHandler(cache.ResourceEventHandlerFuncs{AddFunc: func(obj any) { added <- obj.(*unstructured.Unstructured).GetName() }}); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if !first.WaitForSync(ctx) || !second.WaitForSync(ctx) {
		t.Fatal("caches did not sync")
	}
	if got := len(added); got != 3 {
		t.Errorf("handler saw %d adds, want 3", got)
	}
	if got := names(first.Controlled("uid-1")); got != "owned" {
		t.Errorf("Controlled(uid-1) = %s", got)
	}
	if got := names(first.ByIndex(Orphans, "a")); got != "orphan" {
		t.Errorf("orphans in a = %s", got)
	}
	if got := len(first.List("")); got != 3 {
		t.Errorf("List all = %d objects", got)
	}
	if _, ok := first.Get("b", "other"); !ok {
		t.Error("Get b/other found nothing")
	}
	first.Close()
	first.Close() // idempotent
	if f.Active() != 1 {
		t.Fatalf("closing one of two subscriptions stopped the informer")
	}
	second.Close()
	if f.Active() != 0 {
		t.Fatalf("closing every subscription left %d informers", f.Active())
	}
}

func names(objs []*unstructured.Unstructured) string {
	out := ""
	for i, o := range objs {
		if i > 0 {
			out += ","
		}
		out += o.GetName()
	}
	return out
}

func TestSelectedAndNamesInformersAreDistinct(t *testing.T) {
	client := dynamicfake.NewSimpleDynamicClientWithCustomListKinds(runtime.NewScheme(),
		map[schema.GroupVersionResource]string{configMaps: "ConfigMapList"})
	f := NewFactory(client, Options{})
	all := f.Subscribe(configMaps)
	selected := f.SubscribeSelected(configMaps, labels.SelectorFromSet(labels.Set{"a": "b"}))
	again := f.SubscribeSelected(configMaps, labels.SelectorFromSet(labels.Set{"a": "b"}))
	if f.Active() != 2 {
		t.Errorf("all objects and one selector run %d informers, want 2", f.Active())
	}
	for _, s := range []*Subscription{all, selected, again} {
		s.Close()
	}
	if f.Active() != 0 {
		t.Errorf("closing every subscription left %d informers", f.Active())
	}
}

func TestDropManagedFields(t *testing.T) {
	u := configMap("a", "cm", "uid-1")
	u.SetManagedFields([]metav1.ManagedFieldsEntry{{Manager: "kubectl", Operation: metav1.ManagedFieldsOperationApply}})
	u.SetLabels(map[string]string{"app": "x"})
	out, err := dropManagedFields(u)
	if err != nil {
		t.Fatal(err)
	}
	got := out.(*unstructured.Unstructured)
	if got.GetManagedFields() != nil || got.GetLabels()["app"] != "x" || len(got.GetOwnerReferences()) != 1 {
		t.Errorf("dropManagedFields kept managedFields or lost something else: %v", got.Object["metadata"])
	}
}
