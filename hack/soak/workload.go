package main

import (
	"context"
	"fmt"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/util/wait"

	fnv1 "github.com/metalambda/metalambda/internal/apis/metalambda/v1alpha1"
	"github.com/metalambda/metalambda/internal/local/platform"
)

// The soak's workload: parents of a CompositeController whose sync hook is a
// JavaScript Function on the gateway, and PythonLambdas behind the ingress.
const (
	parentNS     = "soak"
	lambdaNS     = "soak-lambdas"
	parentLabel  = "soak.metalambda.dev/parent"
	controller   = "soak-controller"
	lambdaDomain = "soak.test"
)

var (
	parentsGVR   = schema.GroupVersionResource{Group: "soak.metalambda.dev", Version: "v1", Resource: "soakparents"}
	functionsGVR = schema.GroupVersionResource{Group: fnv1.Group, Version: fnv1.Version, Resource: fnv1.Resource}
	lambdasGVR   = schema.GroupVersionResource{Group: "example.com", Version: "v1", Resource: "pythonlambdas"}
)

// syncHook makes two ConfigMaps per parent, <name>-a and <name>-b, carrying the
// parent's spec.value, and reports the value in the parent's status.
const syncHook = `
module.exports = async function(context) {
  const parent = context.request.body.parent;
  const value = String((parent.spec || {}).value || '0');
  const children = ['a', 'b'].map(suffix => ({
    apiVersion: 'v1', kind: 'ConfigMap',
    metadata: {name: parent.metadata.name + '-' + suffix, labels: {'` + parentLabel + `': parent.metadata.name}},
    data: {value: value},
  }));
  return {status: 200, body: {status: {value: value}, children: children}};
};
`

const lambdaCode = `output = "ok " + query_params.get("from", [""])[0]`

func (s *soak) install(ctx context.Context) error {
	s.log("installing %d parents and %d PythonLambdas", s.cfg.Parents, s.cfg.Lambdas)
	docs := []string{
		fmt.Sprintf("apiVersion: v1\nkind: Namespace\nmetadata: {name: %s}\n", parentNS),
		fmt.Sprintf("apiVersion: v1\nkind: Namespace\nmetadata: {name: %s}\n", lambdaNS),
		parentCRD,
		// The chart's engine has no wildcard rights: resources of its controllers come
		// from ClusterRoles aggregated to it by this label.
		`apiVersion: rbac.authorization.k8s.io/v1
kind: ClusterRole
metadata: {name: soak-engine, labels: {metalambda.dev/aggregate-to-engine: "true"}}
rules:
- {apiGroups: [soak.metalambda.dev], resources: [soakparents, soakparents/status], verbs: [get, list, watch, update, patch]}
- {apiGroups: [""], resources: [configmaps], verbs: [get, list, watch, create, update, patch, delete]}
`,
	}
	for _, doc := range docs {
		if err := s.applyRetry(ctx, doc); err != nil {
			return err
		}
	}
	fn := &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": fnv1.Group + "/" + fnv1.Version, "kind": "Function",
		"metadata": map[string]any{"name": "sync", "namespace": parentNS},
		"spec":     map[string]any{"runtime": "javascript", "source": syncHook},
	}}
	if _, err := s.dyn.Resource(functionsGVR).Namespace(parentNS).Create(ctx, fn, metav1.CreateOptions{}); err != nil {
		return fmt.Errorf("create the sync Function: %w", err)
	}
	if err := s.applyRetry(ctx, fmt.Sprintf(`apiVersion: metacontroller.k8s.io/v1alpha1
kind: CompositeController
metadata: {name: %s}
spec:
  parentResource: {apiVersion: soak.metalambda.dev/v1, resource: soakparents}
  childResources:
  - {apiVersion: v1, resource: configmaps, updateStrategy: {method: InPlace}}
  generateSelector: true
  resyncPeriodSeconds: %d
  hooks:
    sync:
      webhook: {service: {name: %s, namespace: %s, port: 80}, path: /hooks/%s/sync}
`, controller, int(s.cfg.ResyncPeriod.Seconds()), platform.GatewayService, platform.GatewayNamespace, parentNS)); err != nil {
		return err
	}
	for i := range s.cfg.Parents {
		parent := &unstructured.Unstructured{Object: map[string]any{
			"apiVersion": "soak.metalambda.dev/v1", "kind": "SoakParent",
			"metadata": map[string]any{"name": parentName(i), "namespace": parentNS},
			"spec":     map[string]any{"value": "0"},
		}}
		if _, err := s.dyn.Resource(parentsGVR).Namespace(parentNS).Create(ctx, parent, metav1.CreateOptions{}); err != nil {
			return fmt.Errorf("create parent %s: %w", parentName(i), err)
		}
	}
	for i := range s.cfg.Lambdas {
		l := &unstructured.Unstructured{Object: map[string]any{
			"apiVersion": "example.com/v1", "kind": "PythonLambda",
			"metadata": map[string]any{"name": lambdaName(i), "namespace": lambdaNS},
			"spec":     map[string]any{"code": lambdaCode, "replicas": int64(1), "host": lambdaName(i) + "." + lambdaDomain},
		}}
		if _, err := s.dyn.Resource(lambdasGVR).Namespace(lambdaNS).Create(ctx, l, metav1.CreateOptions{}); err != nil {
			return fmt.Errorf("create PythonLambda %s: %w", lambdaName(i), err)
		}
	}
	return nil
}

// applyRetry applies a manifest, retrying for a minute while the API server does not
// serve its kind yet (a CRD applied a moment ago).
func (s *soak) applyRetry(ctx context.Context, doc string) error {
	var last error
	err := wait.PollUntilContextTimeout(ctx, 250*time.Millisecond, time.Minute, true, func(ctx context.Context) (bool, error) {
		_, last = s.apply.Apply(ctx, []byte(doc))
		return last == nil, nil
	})
	if err != nil {
		return fmt.Errorf("apply %.60q: %v (%w)", doc, last, err)
	}
	return nil
}

func parentName(i int) string { return fmt.Sprintf("p%03d", i) }
func lambdaName(i int) string { return fmt.Sprintf("pl-%02d", i) }

const parentCRD = `apiVersion: apiextensions.k8s.io/v1
kind: CustomResourceDefinition
metadata: {name: soakparents.soak.metalambda.dev}
spec:
  group: soak.metalambda.dev
  scope: Namespaced
  names: {kind: SoakParent, plural: soakparents, singular: soakparent, listKind: SoakParentList}
  versions:
  - name: v1
    served: true
    storage: true
    subresources: {status: {}}
    schema:
      openAPIV3Schema:
        type: object
        properties:
          spec: {type: object, properties: {value: {type: string}}}
          status: {type: object, x-kubernetes-preserve-unknown-fields: true}
`
