package discovery

import (
	"errors"
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	fakediscovery "k8s.io/client-go/discovery/fake"
	clienttesting "k8s.io/client-go/testing"
)

func TestMapResolvesResourcesKindsAndStatus(t *testing.T) {
	fake := &fakediscovery.FakeDiscovery{Fake: &clienttesting.Fake{}}
	fake.Resources = []*metav1.APIResourceList{
		{GroupVersion: "v1", APIResources: []metav1.APIResource{
			{Name: "configmaps", Kind: "ConfigMap", Namespaced: true},
			{Name: "namespaces", Kind: "Namespace"},
			{Name: "namespaces/status", Kind: "Namespace"},
		}},
		{GroupVersion: "example.com/v1", APIResources: []metav1.APIResource{
			{Name: "things", Kind: "Thing", Namespaced: true},
			{Name: "things/status", Kind: "Thing", Namespaced: true},
		}},
	}
	m := NewMap(fake)
	if err := m.Refresh(); err != nil {
		t.Fatal(err)
	}
	things, err := m.Get("example.com/v1", "things")
	if err != nil || !things.HasStatus || !things.Namespaced || things.Kind != "Thing" || things.APIVersion() != "example.com/v1" {
		t.Fatalf("things = %+v, %v", things, err)
	}
	cm, err := m.GetKind("v1", "ConfigMap")
	if err != nil || cm.Resource != "configmaps" || cm.HasStatus {
		t.Fatalf("ConfigMap = %+v, %v", cm, err)
	}
	if ns, _ := m.Get("v1", "namespaces"); ns == nil || ns.Namespaced || !ns.HasStatus {
		t.Fatalf("namespaces = %+v", ns)
	}
	_, err = m.Get("example.com/v1", "missing")
	var nf *NotFoundError
	if !errors.As(err, &nf) {
		t.Fatalf("missing resource: err = %v, want NotFoundError", err)
	}
}
