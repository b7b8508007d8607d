package hookapi

import (
	"testing"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	"github.com/metalambda/metalambda/internal/apis/metacontroller/v1alpha1"
)

func object(namespace, name string) *unstructured.Unstructured {
	u := &unstructured.Unstructured{Object: map[string]any{}}
	u.SetNamespace(namespace)
	u.SetName(name)
	return u
}

func TestKey(t *testing.T) {
	const v1, v2 = v1alpha1.HookVersionV1, v1alpha1.HookVersionV2
	tests := []struct {
		name             string
		version          v1alpha1.HookVersion
		parentNamespaced bool
		obj              *unstructured.Unstructured
		want             string
	}{
		{"v1 namespaced parent", v1, true, object("ns", "a"), "a"},
		{"v1 cluster parent, namespaced child", v1, false, object("ns", "a"), "ns/a"},
		{"v1 cluster parent, cluster child", v1, false, object("", "a"), "a"},
		{"v1 namespaced parent, cluster object", v1, true, object("", "a"), "a"},
		{"v2 namespaced parent", v2, true, object("ns", "a"), "ns/a"},
		{"v2 cluster parent", v2, false, object("ns", "a"), "ns/a"},
		{"v2 cluster object", v2, true, object("", "a"), "a"},
		{"empty version is v1", "", true, object("ns", "a"), "a"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := Key(tt.version, tt.parentNamespaced, tt.obj); got != tt.want {
				t.Errorf("Key = %q, want %q", got, tt.want)
			}
		})
	}
}

func TestTypeKey(t *testing.T) {
	if got := TypeKey("Ingress", "networking.k8s.io/v1"); got != "Ingress.networking.k8s.io/v1" {
		t.Errorf("TypeKey = %q", got)
	}
}
