package hookapi

import (
	"bytes"
	"encoding/json"
	"testing"
)

func TestRequestsAppendAsMarshal(t *testing.T) {
	parent := Object{"apiVersion": "x.dev/v1", "kind": "P", "metadata": map[string]any{"name": "p", "labels": map[string]any{"a<b": "c&d"}}, "spec": map[string]any{"n": int64(3), "f": 1.5}}
	children := Objects{
		"ConfigMap.v1":              ObjectMap{"p-1": {"kind": "ConfigMap", "data": map[string]any{"k": "v"}}, "p-0": {"kind": "ConfigMap"}},
		"Ingress.networking.k8s.io": ObjectMap{},
		"Empty.v1":                  nil,
	}
	for _, req := range []any{
		&CompositeRequest{},
		&CompositeRequest{Controller: Object{"kind": "CompositeController"}, Parent: parent, Children: children, Related: Objects{}, Finalizing: true},
		&DecoratorRequest{},
		&DecoratorRequest{Controller: Object{"kind": "DecoratorController"}, Object: parent, Attachments: children, Related: children},
	} {
		want, err := json.Marshal(req)
		if err != nil {
			t.Fatal(err)
		}
		got, err := req.(interface{ AppendJSON([]byte) ([]byte, error) }).AppendJSON(nil)
		if err != nil || !bytes.Equal(got, want) {
			t.Errorf("AppendJSON of %T = %s, %v\nwant %s", req, got, err, want)
		}
	}
}

// BenchmarkEncodeCompositeRequest encodes a request with a parent and three
// ConfigMaps, as the engine's benchmark sends, by json.Marshal and by AppendJSON.
func BenchmarkEncodeCompositeRequest(b *testing.B) {
	children := ObjectMap{}
	for _, name := range []string{"p-0", "p-1", "p-2"} {
		children[name] = Object{"apiVersion": "v1", "kind": "ConfigMap", "metadata": map[string]any{
			"name": name, "namespace": "bench", "uid": "5f0c8a8e-8a2b-4a51-a7e8-3b1c1a9d2e11", "resourceVersion": "12345",
			"creationTimestamp": "2026-11-26T12:00:00Z", "labels": map[string]any{"controller-uid": "0b6a0f5e-1d1c-4b7e-9d1a-6f5e4c3b2a10"},
			"annotations":     map[string]any{"metalambda.dev/desired-hash": "3c5f9a1b2d4e6f708192a3b4"},
			"ownerReferences": []any{map[string]any{"apiVersion": "bench.metalambda.dev/v1", "kind": "BenchParent", "name": "p", "uid": "0b6a0f5e-1d1c-4b7e-9d1a-6f5e4c3b2a10", "controller": true, "blockOwnerDeletion": true}},
		}, "data": map[string]any{"index": "0"}}
	}
	req := &CompositeRequest{
		Controller: Object{"apiVersion": "metacontroller.k8s.io/v1alpha1", "kind": "CompositeController", "metadata": map[string]any{"name": "bench"}, "spec": map[string]any{"generateSelector": true}},
		Parent:     Object{"apiVersion": "bench.metalambda.dev/v1", "kind": "BenchParent", "metadata": map[string]any{"name": "p", "namespace": "bench", "uid": "0b6a0f5e-1d1c-4b7e-9d1a-6f5e4c3b2a10", "generation": int64(1)}, "spec": map[string]any{"i": int64(1)}},
		Children:   Objects{"ConfigMap.v1": children},
		Related:    Objects{},
	}
	b.Run("json.Marshal", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			_, _ = json.Marshal(req)
		}
	})
	b.Run("AppendJSON", func(b *testing.B) {
		b.ReportAllocs()
		var buf []byte
		for b.Loop() {
			buf, _ = req.AppendJSON(buf[:0])
		}
	})
}
