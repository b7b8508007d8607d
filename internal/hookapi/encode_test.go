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
