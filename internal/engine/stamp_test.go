package engine

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"testing"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	"github.com/metalambda/metalambda/internal/apis/metacontroller/v1alpha1"
	"github.com/metalambda/metalambda/internal/engine/apply"
	"github.com/metalambda/metalambda/internal/engine/discovery"
)

// TestDesiredHashIsOfMarshal: the desired hash is of json.Marshal's encoding of what
// an apply would send, as engines before this one computed it, so that their children
// are not seen as out of sync (and rewritten) after an upgrade.
func TestDesiredHashIsOfMarshal(t *testing.T) {
	c := &controller{env: &environment{opts: Options{ApplyStrategy: ServerSideApply}}}
	desired := &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": "v1", "kind": "ConfigMap",
		"metadata": map[string]any{"name": "p-0", "namespace": "ns", "labels": map[string]any{"a": "<b&c>"}},
		"data":     map[string]any{"index": "0", "text": "é\n\"quoted\""}, "binaryData": nil,
		"spec": map[string]any{"replicas": int64(3), "ratio": 0.25, "list": []any{true, nil, "x"}},
	}}
	body, err := json.Marshal(apply.ForApply(desired.DeepCopy().Object))
	if err != nil {
		t.Fatal(err)
	}
	sum := sha256.Sum256(body)
	if err := c.stamp(desired); err != nil {
		t.Fatal(err)
	}
	if got, want := desired.GetAnnotations()[DesiredHashAnnotation], hex.EncodeToString(sum[:12]); got != want {
		t.Errorf("desired hash %q, want %q (the hash of json.Marshal's encoding)", got, want)
	}
}

// BenchmarkStampChild: completing one desired ConfigMap of a hook's answer as the
// engine writes it (controller-uid label, owner reference, desired hash), which each
// sync does for each child; bare, as the benchmark's hook answers, and with labels
// and annotations of its own.
func BenchmarkStampChild(b *testing.B) {
	c := &controller{env: &environment{opts: Options{ApplyStrategy: ServerSideApply}}, flavor: &composite{generateSelector: true}}
	parent := testParent(nil)
	for name, metadata := range map[string]func() map[string]any{
		"bare": func() map[string]any { return map[string]any{"name": "p-0", "namespace": "ns"} },
		"labelled": func() map[string]any {
			return map[string]any{"name": "p-0", "namespace": "ns", "labels": map[string]any{"app": "bench"}, "annotations": map[string]any{"note": "x"}}
		},
	} {
		b.Run(name, func(b *testing.B) {
			b.ReportAllocs()
			for b.Loop() {
				desired := &unstructured.Unstructured{Object: map[string]any{
					"apiVersion": "v1", "kind": "ConfigMap", "metadata": metadata(),
					"data": map[string]any{"index": "0", "parent": "p"},
				}}
				if err := c.stampChild(parent, desired); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}

// BenchmarkApplyConvergedChildren: the children step of a sync of a converged parent
// with three ConfigMaps, the hook asking for what each holds already: the second and
// third sync of every parent of hack/bench-engine.
func BenchmarkApplyConvergedChildren(b *testing.B) {
	env := &environment{opts: Options{ApplyStrategy: ServerSideApply}, own: newOwnWrites()}
	c := &controller{env: env, flavor: &composite{env: env, generateSelector: true}, children: []*childType{{
		rule:   v1alpha1.ResourceRule{APIVersion: "v1", Resource: "configmaps"},
		res:    &discovery.Resource{GroupVersionResource: testConfigMaps, Kind: "ConfigMap", Namespaced: true},
		method: v1alpha1.ChildUpdateInPlace,
	}}}
	parent := testParent(nil)
	desired := func() []*unstructured.Unstructured {
		var out []*unstructured.Unstructured
		for i := range 3 {
			out = append(out, &unstructured.Unstructured{Object: configMapObject(fmt.Sprintf("p-%d", i))})
		}
		return out
	}
	var observed []*unstructured.Unstructured
	for _, d := range desired() {
		if err := c.stampChild(parent, d); err != nil {
			b.Fatal(err)
		}
		d.SetResourceVersion("1")
		observed = append(observed, d)
	}
	ctx := context.Background()
	b.ReportAllocs()
	for b.Loop() {
		if err := c.applyChildren(ctx, parent, [][]*unstructured.Unstructured{observed}, desired()); err != nil {
			b.Fatal(err)
		}
	}
}
