//go:build integration

package operators_test

import (
	"os"
	"testing"

	"k8s.io/apimachinery/pkg/runtime"
)

func runtimeConvert(in map[string]any, out any) error {
	return runtime.DefaultUnstructuredConverter.FromUnstructured(in, out)
}

func mustRead(t *testing.T, path string) string {
	t.Helper()
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	return string(data)
}
