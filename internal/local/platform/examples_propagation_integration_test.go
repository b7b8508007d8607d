//go:build integration

package platform

import (
	"fmt"
	"testing"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"

	"github.com/metalambda/metalambda/internal/kubetest"
)

var (
	configMapsGVR   = schema.GroupVersionResource{Version: "v1", Resource: "configmaps"}
	secretsGVR      = schema.GroupVersionResource{Version: "v1", Resource: "secrets"}
	roleBindingsGVR = schema.GroupVersionResource{Group: "rbac.authorization.k8s.io", Version: "v1", Resource: "rolebindings"}
	clusterRolesGVR = schema.GroupVersionResource{Group: "rbac.authorization.k8s.io", Version: "v1", Resource: "clusterroles"}
)

// copyHook copies one source object (a related object, named by the parent's spec)
// into target namespaces: each target namespace is a related object too when the
// parent selects them by label (customize returns the selector), or listed in the
// parent's spec. With the source gone it asks for no copies.
const copyHook = `
KIND = '%[1]s'


def customize(request):
    spec = request['parent']['spec']
    related = [{'apiVersion': 'v1', 'resource': KIND.lower() + 's', 'namespace': spec['sourceNamespace'], 'names': [spec['sourceName']]}]
    if 'targetNamespaces' not in spec:
        related.append({'apiVersion': 'v1', 'resource': 'namespaces', 'labelSelector': spec.get('targetNamespaceLabelSelector', {})})
    return {'relatedResources': related}


def sync(request):
    spec = request['parent']['spec']
    source = request['related'][KIND + '.v1'].get(spec['sourceNamespace'] + '/' + spec['sourceName'])
    targets = spec.get('targetNamespaces')
    if targets is None:
        targets = [ns['metadata']['name'] for ns in request['related']['Namespace.v1'].values()]
    copies = []
    if source is not None:
        copies = [{'apiVersion': 'v1', 'kind': KIND, 'metadata': {'name': spec['sourceName'], 'namespace': ns}, 'data': source.get('data', {})}
                  for ns in targets if ns != spec['sourceNamespace']]
    return {'status': %[2]s, 'children': copies}
`

// copyController is a CompositeController whose parents copy one child kind, with
// the copy hook's two handlers as its sync and customize hooks.
func copyController(e *examples, t *testing.T, ns, name, plural, parentSelector, child string) {
	t.Helper()
	e.applyf(t, `apiVersion: metacontroller.k8s.io/v1alpha1
kind: CompositeController
metadata: {name: %s}
spec:
  generateSelector: true
  parentResource: {apiVersion: %s/v1, resource: %s%s}
  childResources:
  - {apiVersion: v1, resource: %s, updateStrategy: {method: InPlace}}
  hooks:
    sync:
      webhook: %s
    customize:
      webhook: %s
`, name, examplesGroup, plural, parentSelector, child, hookRef(ns, "sync"), hookRef(ns, "customize"))
}

func (e *examples) copyFunctions(t *testing.T, ns, kind, status string) {
	t.Helper()
	source := fmt.Sprintf(copyHook, kind, status)
	e.function(t, ns, "sync", "python", "sync", source)
	e.function(t, ns, "customize", "python", "customize", source)
}

// testGlobalConfigMap mirrors examples/globalconfigmap: a cluster-scoped parent
// copies a ConfigMap into every namespace, and its status is written.
func testGlobalConfigMap(t *testing.T, e *examples) {
	const ns = "globalconfigmap"
	e.copyFunctions(t, ns, "ConfigMap", "{'working': 'fine'}")
	e.apply(t, exampleCRD(examplesGroup, "GlobalConfigMap", "globalconfigmaps", "Cluster"))
	copyController(e, t, ns, "globalconfigmap-controller", "globalconfigmaps", "", "configmaps")
	e.apply(t, `apiVersion: v1
kind: Namespace
metadata: {name: global}
---
apiVersion: v1
kind: ConfigMap
metadata: {name: globalsettings, namespace: global}
data: {some: value, other: value}
---
apiVersion: v1
kind: Namespace
metadata: {name: first}
---
apiVersion: v1
kind: Namespace
metadata: {name: second}
---
apiVersion: v1
kind: Namespace
metadata: {name: third}
`)
	e.applyf(t, `apiVersion: %s/v1
kind: GlobalConfigMap
metadata: {name: globalsettings}
spec: {sourceName: globalsettings, sourceNamespace: global}
`, examplesGroup)
	for _, target := range []string{"first", "second", "third"} {
		e.waitField(t, configMapsGVR, target, "globalsettings", "globalsettings", "metadata", "name")
	}
	e.waitField(t, schema.GroupVersionResource{Group: examplesGroup, Version: "v1", Resource: "globalconfigmaps"}, "", "globalsettings", "fine", "status", "working")
}

// testConfigMapPropagation mirrors examples/configmappropagation: a ConfigMap is
// copied into the namespaces its parent lists, the status counts the copies, and a
// parent outside the controller's label selector is left alone.
func testConfigMapPropagation(t *testing.T, e *examples) {
	const ns = "configmappropagation"
	e.copyFunctions(t, ns, "ConfigMap", "{'expected_copies': len(spec['targetNamespaces']), 'actual_copies': len(request['children']['ConfigMap.v1'])}")
	e.apply(t, exampleCRD(examplesGroup, "ConfigMapPropagation", "configmappropagations", "Cluster"))
	copyController(e, t, ns, "configmap-propagation-controller", "configmappropagations", ", labelSelector: {matchLabels: {version: v1}}", "configmaps")
	e.apply(t, `apiVersion: v1
kind: Namespace
metadata: {name: original}
---
apiVersion: v1
kind: ConfigMap
metadata: {name: settings, namespace: original}
data: {some: value, other: value}
---
apiVersion: v1
kind: Namespace
metadata: {name: one}
---
apiVersion: v1
kind: Namespace
metadata: {name: two}
---
apiVersion: v1
kind: Namespace
metadata: {name: three}
---
apiVersion: v1
kind: Namespace
metadata: {name: four}
---
apiVersion: v1
kind: Namespace
metadata: {name: five}
`)
	e.applyf(t, `apiVersion: %[1]s/v1
kind: ConfigMapPropagation
metadata: {name: settings-propagation, labels: {version: v1}}
spec: {sourceName: settings, sourceNamespace: original, targetNamespaces: [one, two, three]}
---
apiVersion: %[1]s/v1
kind: ConfigMapPropagation
metadata: {name: settings-propagation-unmanaged, labels: {version: v2}}
spec: {sourceName: settings, sourceNamespace: original, targetNamespaces: [four, five]}
`, examplesGroup)
	for _, target := range []string{"one", "two", "three"} {
		e.waitField(t, configMapsGVR, target, "settings", "settings", "metadata", "name")
	}
	propagations := schema.GroupVersionResource{Group: examplesGroup, Version: "v1", Resource: "configmappropagations"}
	e.waitField(t, propagations, "", "settings-propagation", "3", "status", "actual_copies")
	// test.sh waits five seconds more; here the engine has synced both parents by
	// now (one work queue, created together), so the unselected one had its chance.
	ctx := kubetest.Context(t)
	if _, err := e.Kube.CoreV1().ConfigMaps("four").Get(ctx, "settings", metav1.GetOptions{}); !apierrors.IsNotFound(err) {
		t.Errorf("a parent outside the label selector had its ConfigMap copied into namespace four (get: %v)", err)
	}
	if u, err := e.Get(ctx, propagations, "", "settings-propagation-unmanaged"); err != nil || u.Object["status"] != nil {
		t.Errorf("a parent outside the label selector was synced: %v %v", u, err)
	}
}

// testSecretPropagation mirrors examples/secretpropagation: a Secret is copied into
// the namespaces the parent selects by label, and the status is written.
func testSecretPropagation(t *testing.T, e *examples) {
	const ns = "secretpropagation"
	e.copyFunctions(t, ns, "Secret", "{'working': 'fine'}")
	e.apply(t, exampleCRD(examplesGroup, "SecretPropagation", "secretpropagations", "Cluster"))
	copyController(e, t, ns, "secret-propagation-controller", "secretpropagations", "", "secrets")
	e.apply(t, propagationNamespaces("", "omega", "shareable"))
	e.applyf(t, `apiVersion: %s/v1
kind: SecretPropagation
metadata: {name: secret-propagation}
spec:
  sourceName: shareable
  sourceNamespace: omega
  targetNamespaceLabelSelector: {matchLabels: {propagate: "true"}}
`, examplesGroup)
	for _, target := range []string{"alpha", "beta"} {
		e.waitField(t, secretsGVR, target, "shareable", "shareable", "metadata", "name")
	}
	e.waitField(t, schema.GroupVersionResource{Group: examplesGroup, Version: "v1", Resource: "secretpropagations"}, "", "secret-propagation", "fine", "status", "working")
}

// propagationNamespaces are the source namespace with its Secret, two namespaces
// labelled <prefix>propagate=true and one that is not (prefix keeps examples apart).
func propagationNamespaces(prefix, source, secret string) string {
	return fmt.Sprintf(`apiVersion: v1
kind: Namespace
metadata: {name: %[2]s}
---
apiVersion: v1
kind: Secret
metadata: {name: %[3]s, namespace: %[2]s}
data: {some: dmFsdWUK, other: dmFsdWUK}
---
apiVersion: v1
kind: Namespace
metadata: {name: %[1]salpha, labels: {%[1]spropagate: "true"}}
---
apiVersion: v1
kind: Namespace
metadata: {name: %[1]sbeta, labels: {%[1]spropagate: "true"}}
---
apiVersion: v1
kind: Namespace
metadata: {name: %[1]sgamma}
`, prefix, source, secret)
}

// roleBindingHook binds the default ServiceAccount of namespace default to the
// ClusterRole it decorates, with a RoleBinding of the same name.
const roleBindingHook = `
def sync(request):
    name = request['object']['metadata']['name']
    binding = {
        'apiVersion': 'rbac.authorization.k8s.io/v1', 'kind': 'RoleBinding',
        'metadata': {'name': name, 'namespace': 'default'},
        'subjects': [{'kind': 'ServiceAccount', 'name': 'default', 'namespace': 'default'}],
        'roleRef': {'apiGroup': 'rbac.authorization.k8s.io', 'kind': 'ClusterRole', 'name': name},
    }
    return {'attachments': [binding]}
`

// testClusteredParent mirrors examples/clusteredparent: a DecoratorController on
// ClusterRoles attaches a namespaced RoleBinding, puts it back when it is deleted,
// and the ClusterRole can be deleted.
func testClusteredParent(t *testing.T, e *examples) {
	const ns = "clusteredparent"
	e.function(t, ns, "sync", "python", "", roleBindingHook)
	e.applyf(t, `apiVersion: metacontroller.k8s.io/v1alpha1
kind: DecoratorController
metadata: {name: cluster-parent}
spec:
  resources:
  - apiVersion: rbac.authorization.k8s.io/v1
    resource: clusterroles
    annotationSelector:
      matchExpressions: [{key: default-service-account-binding, operator: Exists}]
  attachments:
  - {apiVersion: rbac.authorization.k8s.io/v1, resource: rolebindings}
  hooks:
    sync:
      webhook: %s
`, hookRef(ns, "sync"))
	e.apply(t, `apiVersion: rbac.authorization.k8s.io/v1
kind: ClusterRole
metadata:
  name: my-clusterrole
  annotations: {default-service-account-binding: default}
rules:
- {apiGroups: [""], resources: [nodes], verbs: [get, watch, list]}
`)
	e.waitField(t, roleBindingsGVR, "default", "my-clusterrole", "my-clusterrole", "metadata", "name")
	ctx := kubetest.Context(t)
	bindings := e.Kube.RbacV1().RoleBindings("default")
	old, err := bindings.Get(ctx, "my-clusterrole", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if err := bindings.Delete(ctx, "my-clusterrole", metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	e.waitFor(t, "the deleted RoleBinding is created again", roleBindingsGVR, "default", "my-clusterrole", func(o *unstructured.Unstructured) error {
		if o.GetUID() == old.UID {
			return fmt.Errorf("uid %s is still the deleted one", o.GetUID())
		}
		return nil
	})
	if err := e.Kube.RbacV1().ClusterRoles().Delete(ctx, "my-clusterrole", metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	e.waitGone(t, "the ClusterRole is deleted", clusterRolesGVR, "", "my-clusterrole")
	e.waitGone(t, "the RoleBinding it owned is collected", roleBindingsGVR, "default", "my-clusterrole")
}

// clusterRoleHook gives a CustomResourceDefinition a ClusterRole <crd>-reader.
const clusterRoleHook = `
def sync(request):
    name = request['object']['metadata']['name'] + '-reader'
    return {'attachments': [{'apiVersion': 'rbac.authorization.k8s.io/v1', 'kind': 'ClusterRole', 'metadata': {'name': name}, 'rules': []}]}
`

// testCRDRoles mirrors examples/crd-roles: a DecoratorController on annotated
// CustomResourceDefinitions attaches a cluster-scoped ClusterRole.
func testCRDRoles(t *testing.T, e *examples) {
	const ns = "crd-roles"
	e.function(t, ns, "sync", "python", "", clusterRoleHook)
	e.applyf(t, `apiVersion: metacontroller.k8s.io/v1alpha1
kind: DecoratorController
metadata: {name: crd-role-controller}
spec:
  resources:
  - apiVersion: apiextensions.k8s.io/v1
    resource: customresourcedefinitions
    annotationSelector:
      matchExpressions: [{key: enable-default-roles, operator: Exists}]
  attachments:
  - {apiVersion: rbac.authorization.k8s.io/v1, resource: clusterroles}
  hooks:
    sync:
      webhook: %s
`, hookRef(ns, "sync"))
	e.apply(t, `apiVersion: apiextensions.k8s.io/v1
kind: CustomResourceDefinition
metadata:
  name: my-tests.ctl.rlg.example
  annotations: {enable-default-roles: "yes"}
spec:
  group: ctl.rlg.example
  scope: Cluster
  names: {plural: my-tests, singular: my-test, kind: MyTest}
  versions:
  - name: v1
    served: true
    storage: true
    schema:
      openAPIV3Schema: {type: object, x-kubernetes-preserve-unknown-fields: true}
    subresources: {status: {}}
`)
	e.waitField(t, clusterRolesGVR, "", "my-tests.ctl.rlg.example-reader", "my-tests.ctl.rlg.example-reader", "metadata", "name")
}
