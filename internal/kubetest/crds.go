package kubetest

import (
	"context"
	"testing"
	"time"

	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"

	"github.com/metalambda/metalambda/crds"
)

// crdInstallTimeout bounds one installation: the API server must establish the
// CRDs, which takes a few seconds on a loaded machine.
const crdInstallTimeout = time.Minute

// InstallCRDs installs the project's CRDs (package crds) on the control plane, or
// the CRDs given instead, and waits until they are established and their
// resources are served (a CRD may be established a moment before); a test fails
// when they are not. The Env remembers what it installed: a CRD it has installed
// already with the same spec is not installed again, so every test that needs
// CRDs calls InstallCRDs first, without a sync.Once of its own.
func (e *Env) InstallCRDs(t testing.TB, only ...*apiextensionsv1.CustomResourceDefinition) {
	t.Helper()
	if len(only) == 0 {
		all, err := crds.All()
		if err != nil {
			t.Fatal(err)
		}
		only = all
	}
	e.crdMu.Lock()
	defer e.crdMu.Unlock()
	var missing []*apiextensionsv1.CustomResourceDefinition
	for _, crd := range only {
		if have, ok := e.installed[crd.Name]; !ok || !equality.Semantic.DeepEqual(have, &crd.Spec) {
			missing = append(missing, crd)
		}
	}
	if len(missing) == 0 {
		return
	}
	ctx, cancel := context.WithTimeout(Context(t), crdInstallTimeout)
	defer cancel()
	if err := crds.Install(ctx, e.Extensions, missing...); err != nil {
		t.Fatalf("install CRDs: %v", err)
	}
	for _, crd := range missing {
		for _, v := range crd.Spec.Versions {
			if !v.Served {
				continue
			}
			gvr := schema.GroupVersionResource{Group: crd.Spec.Group, Version: v.Name, Resource: crd.Spec.Names.Plural}
			err := Wait(ctx, crdInstallTimeout, func(ctx context.Context) (bool, error) {
				_, err := e.Dynamic.Resource(gvr).List(ctx, metav1.ListOptions{Limit: 1})
				return err == nil, err
			})
			if err != nil {
				t.Fatalf("CRD %s is established, but %s is not served: %v", crd.Name, gvr, err)
			}
		}
	}
	if e.installed == nil {
		e.installed = map[string]*apiextensionsv1.CustomResourceDefinitionSpec{}
	}
	for _, crd := range missing {
		e.installed[crd.Name] = crd.Spec.DeepCopy()
	}
}

// SchemalessCRD is a namespaced CRD of group, version v1, whose spec and status
// keep whatever they are given and whose status is a subresource: the parents and
// children the tests invent.
func SchemalessCRD(group, kind, plural, singular string) *apiextensionsv1.CustomResourceDefinition {
	preserve := true
	anything := apiextensionsv1.JSONSchemaProps{Type: "object", XPreserveUnknownFields: &preserve}
	return &apiextensionsv1.CustomResourceDefinition{
		ObjectMeta: metav1.ObjectMeta{Name: plural + "." + group},
		Spec: apiextensionsv1.CustomResourceDefinitionSpec{
			Group: group, Scope: apiextensionsv1.NamespaceScoped,
			Names: apiextensionsv1.CustomResourceDefinitionNames{Plural: plural, Singular: singular, Kind: kind, ListKind: kind + "List"},
			Versions: []apiextensionsv1.CustomResourceDefinitionVersion{{
				Name: "v1", Served: true, Storage: true,
				Subresources: &apiextensionsv1.CustomResourceSubresources{Status: &apiextensionsv1.CustomResourceSubresourceStatus{}},
				Schema: &apiextensionsv1.CustomResourceValidation{OpenAPIV3Schema: &apiextensionsv1.JSONSchemaProps{
					Type: "object", Properties: map[string]apiextensionsv1.JSONSchemaProps{"spec": anything, "status": anything},
				}},
			}},
		},
	}
}
