package kubetest

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"testing"

	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	utilyaml "k8s.io/apimachinery/pkg/util/yaml"
	"k8s.io/client-go/discovery"
	"k8s.io/client-go/discovery/cached/memory"
	"k8s.io/client-go/restmapper"
)

// ApplyFile creates or updates every object of a multi-document YAML file, as
// `kubectl apply` would (server-side apply), and returns them. Tests use it to load
// the manifests the project ships.
func (e *Env) ApplyFile(t testing.TB, path string) []*unstructured.Unstructured {
	t.Helper()
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	objs, err := e.Apply(Context(t), data)
	if err != nil {
		t.Fatalf("apply %s: %v", path, err)
	}
	return objs
}

// Apply server-side applies every object in a multi-document YAML stream.
func (e *Env) Apply(ctx context.Context, manifest []byte) ([]*unstructured.Unstructured, error) {
	dc, err := discovery.NewDiscoveryClientForConfig(e.Config)
	if err != nil {
		return nil, err
	}
	mapper := restmapper.NewDeferredDiscoveryRESTMapper(memory.NewMemCacheClient(dc))
	decoder := utilyaml.NewYAMLOrJSONDecoder(bytes.NewReader(manifest), 4096)
	var out []*unstructured.Unstructured
	for {
		obj := &unstructured.Unstructured{}
		if err := decoder.Decode(&obj.Object); err != nil {
			if errors.Is(err, io.EOF) {
				return out, nil
			}
			return out, err
		}
		if len(obj.Object) == 0 {
			continue
		}
		applied, err := e.applyOne(ctx, mapper, obj)
		if err != nil {
			return out, err
		}
		out = append(out, applied)
	}
}

func (e *Env) applyOne(ctx context.Context, mapper meta.RESTMapper, obj *unstructured.Unstructured) (*unstructured.Unstructured, error) {
	gvk := obj.GroupVersionKind()
	mapping, err := mapper.RESTMapping(gvk.GroupKind(), gvk.Version)
	if err != nil {
		return nil, fmt.Errorf("%s %s: %w", gvk.Kind, obj.GetName(), err)
	}
	data, err := obj.MarshalJSON()
	if err != nil {
		return nil, err
	}
	client := e.Dynamic.Resource(mapping.Resource)
	force := true
	opts := metav1.PatchOptions{FieldManager: "kubetest", Force: &force}
	if mapping.Scope.Name() == meta.RESTScopeNameNamespace {
		ns := obj.GetNamespace()
		if ns == "" {
			ns = "default"
		}
		return client.Namespace(ns).Patch(ctx, obj.GetName(), "application/apply-patch+yaml", data, opts)
	}
	return client.Patch(ctx, obj.GetName(), "application/apply-patch+yaml", data, opts)
}
