//go:build integration

package engine

import (
	"fmt"
	"testing"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/labels"
)

// Metacontroller's target-label-selector example: two engines share a cluster, each
// serving only the controller objects its --target-label-selector matches. The
// controller labelled for the first converges its parent; the second engine, whose
// selector matches another group, makes no write at all.
func TestTargetLabelSelectorSplitsControllersBetweenEngines(t *testing.T) {
	setup(t)
	ns := env.Namespace(t)
	selecting := func(group string) func(*Options) {
		return func(o *Options) { o.TargetSelector = labels.SelectorFromSet(labels.Set{"controller-group": group}) }
	}
	cicd := startEngine(t, ns, selecting("cicd-"+ns))
	other := startEngine(t, ns, selecting("other-"+ns))
	hook := newHookServer(t, func(req map[string]any) (int, any) {
		name := field(req["parent"].(map[string]any), "metadata", "name")
		return 200, map[string]any{
			"status":   map[string]any{"working": "fine"},
			"children": []any{configMap(fmt.Sprintf("%s-1", name), map[string]any{"k": "v"}, nil)},
		}
	})
	create(t, ccGVR, "", `
apiVersion: metacontroller.k8s.io/v1alpha1
kind: CompositeController
metadata: {name: %[1]s, labels: {controller-group: cicd-%[1]s}}
spec:
  generateSelector: true
  parentResource: {apiVersion: test.metalambda.dev/v1, resource: parents, labelSelector: {matchLabels: {metalambda.dev/test-engine: %[1]s}}}
  childResources:
  - {apiVersion: v1, resource: configmaps, updateStrategy: {method: InPlace}}
  hooks:
    sync:
      webhook: {url: "%[2]s/sync"}
`, ns, hook.URL)
	create(t, parentsGVR, ns, parentManifest, "p", 2)
	env.WaitFor(t, "the child is created", configMapsGVR, ns, "p-1", nil)
	env.WaitFor(t, "the status is written", parentsGVR, ns, "p", func(o *unstructured.Unstructured) error {
		if got := field(o.Object, "status", "working"); got != "fine" {
			return fmt.Errorf("status.working = %v", got)
		}
		return nil
	})
	if w := cicd.writes(t); w == 0 {
		t.Errorf("the engine whose selector matches the controller made no write")
	}
	if w := other.writes(t); w != 0 {
		t.Errorf("the engine whose selector does not match the controller made %v writes", w)
	}
}
