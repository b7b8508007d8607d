package kubetest

import (
	"context"
	"os"
	"testing"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	"github.com/metalambda/metalambda/internal/manifest"
)

// ApplyFile server-side applies every object of a YAML file, as `kubectl apply`
// would, and returns them. Tests use it to load the manifests the project ships.
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
func (e *Env) Apply(ctx context.Context, data []byte) ([]*unstructured.Unstructured, error) {
	a, err := manifest.NewApplier(e.Config, "kubetest")
	if err != nil {
		return nil, err
	}
	return a.Apply(ctx, data)
}
