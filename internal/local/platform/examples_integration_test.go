//go:build integration

package platform

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"

	fnv1 "github.com/metalambda/metalambda/internal/apis/metalambda/v1alpha1"
	"github.com/metalambda/metalambda/internal/kubetest"
)

// Metacontroller's examples (examples/ in its repository), each rewritten here with
// our own manifests and hooks and run on one local platform: its engine, its gateway
// serving the hooks as Functions in the language the example's hooks are written in,
// and its local node running the pods. Each test asserts what the example's test.sh
// asserts. The examples use their own API groups, names and namespaces, so they run
// side by side.

var functionsGVR = schema.GroupVersionResource{Group: fnv1.Group, Version: fnv1.Version, Resource: fnv1.Resource}

// examples is the platform every example runs on, with the kit's clients for it.
type examples struct {
	*kubetest.Env
}

func TestUpstreamExamples(t *testing.T) {
	p, _ := startWithNode(t, nodeOptions("mlex0", "10.244.222.0/24"))
	defer p.Stop()
	e := &examples{connect(t, p.Kubeconfig)}
	t.Run("Group", func(t *testing.T) {
		for _, ex := range []struct {
			name string
			run  func(*testing.T, *examples)
		}{
			{"DaemonJob", testDaemonJob},
			{"IndexedJob", testIndexedJob},
			{"GlobalConfigMap", testGlobalConfigMap},
			{"ConfigMapPropagation", testConfigMapPropagation},
			{"SecretPropagation", testSecretPropagation},
			{"ClusteredParent", testClusteredParent},
			{"CRDRoles", testCRDRoles},
			{"ServicePerPod", testServicePerPod},
			{"BlueGreen", testBlueGreen},
			{"CatSet", testCatSet},
			{"WebhookAuth", testWebhookAuth},
		} {
			t.Run(ex.name, func(t *testing.T) { t.Parallel(); ex.run(t, e) })
		}
	})
}

// applyf applies the manifest fmt.Sprintf(format, args...).
func (e *examples) applyf(t *testing.T, format string, args ...any) {
	t.Helper()
	e.apply(t, fmt.Sprintf(format, args...))
}

// apply server-side applies a manifest, retrying while the API server does not serve
// a kind yet (a CRD applied a moment ago).
func (e *examples) apply(t *testing.T, doc string) {
	t.Helper()
	data := []byte(doc)
	kubetest.Eventually(t, 60*time.Second, "the manifest applies", func(ctx context.Context) (bool, error) {
		_, err := e.Apply(ctx, data)
		return err == nil, err
	})
}

// function registers a Function in the namespace (which it creates) and waits until
// the gateway serves it. Its hook is at /hooks/<namespace>/<name> on the gateway,
// which controllers name as the metalambda-gateway Service (see hookRef).
func (e *examples) function(t *testing.T, ns, name, runtime, handler, source string) {
	t.Helper()
	e.applyf(t, "apiVersion: v1\nkind: Namespace\nmetadata: {name: %s}\n", ns)
	t.Cleanup(func() { e.dumpOnFailure(t, ns) })
	spec := map[string]any{"runtime": runtime, "source": source}
	if handler != "" {
		spec["handler"] = handler
	}
	fn := &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": fnv1.Group + "/" + fnv1.Version, "kind": "Function",
		"metadata": map[string]any{"name": name, "namespace": ns}, "spec": spec,
	}}
	ctx := kubetest.Context(t)
	if _, err := e.Dynamic.Resource(functionsGVR).Namespace(ns).Create(ctx, fn, metav1.CreateOptions{}); err != nil {
		t.Fatalf("create Function %s/%s: %v", ns, name, err)
	}
	e.waitFor(t, "Function "+name+" is served", functionsGVR, ns, name, func(o *unstructured.Unstructured) error {
		conds, _, _ := unstructured.NestedSlice(o.Object, "status", "conditions")
		for _, c := range conds {
			if m := c.(map[string]any); m["type"] == "Ready" && m["status"] == "True" {
				return nil
			}
		}
		return fmt.Errorf("status %v", o.Object["status"])
	})
}

// dumpOnFailure logs the namespace's events, pods and claims if the test failed.
func (e *examples) dumpOnFailure(t *testing.T, ns string) {
	if !t.Failed() {
		return
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if events, err := e.Kube.CoreV1().Events(ns).List(ctx, metav1.ListOptions{}); err == nil {
		for _, ev := range events.Items {
			t.Logf("event %s %s: %s %s", ev.InvolvedObject.Kind, ev.InvolvedObject.Name, ev.Reason, ev.Message)
		}
	}
	if pods, err := e.Kube.CoreV1().Pods(ns).List(ctx, metav1.ListOptions{}); err == nil {
		for _, p := range pods.Items {
			t.Logf("pod %s node=%q phase=%s deleting=%t conditions=%v containers=%+v", p.Name, p.Spec.NodeName, p.Status.Phase, p.DeletionTimestamp != nil, p.Status.Conditions, p.Status.ContainerStatuses)
		}
	}
	if claims, err := e.Kube.CoreV1().PersistentVolumeClaims(ns).List(ctx, metav1.ListOptions{}); err == nil {
		for _, c := range claims.Items {
			t.Logf("claim %s phase=%s", c.Name, c.Status.Phase)
		}
	}
}

// hookRef is a controller's webhook for the Function ns/name, through the gateway's
// Service as the bundled operators reach theirs.
func hookRef(ns, name string) string {
	return fmt.Sprintf("{service: {name: %s, namespace: %s, port: 80}, path: /hooks/%s/%s}", GatewayService, GatewayNamespace, ns, name)
}

// waitFor waits until the object exists and check (if any) accepts it.
func (e *examples) waitFor(t *testing.T, what string, gvr schema.GroupVersionResource, ns, name string, check func(*unstructured.Unstructured) error) *unstructured.Unstructured {
	t.Helper()
	return kubetest.WaitObject(t, 2*time.Minute, what, e.Resource(gvr, ns), name, check)
}

// waitField waits until the field at path of the object reads want, as test.sh's
// `until [[ "$(kubectl get ... -o jsonpath=...)" == want ]]` loops do.
func (e *examples) waitField(t *testing.T, gvr schema.GroupVersionResource, ns, name, want string, path ...string) {
	t.Helper()
	what := fmt.Sprintf("%s %s has .%s = %s", gvr.Resource, name, strings.Join(path, "."), want)
	e.waitFor(t, what, gvr, ns, name, func(o *unstructured.Unstructured) error {
		if got := fieldString(o.Object, path...); got != want {
			return fmt.Errorf(".%s = %q", strings.Join(path, "."), got)
		}
		return nil
	})
}

// waitGone waits until the object is not found.
func (e *examples) waitGone(t *testing.T, what string, gvr schema.GroupVersionResource, ns, name string) {
	t.Helper()
	kubetest.WaitObjectGone(t, 2*time.Minute, what, e.Resource(gvr, ns), name)
}

// fieldString reads a field as kubectl's jsonpath prints it ("" when absent). A path
// element that is a number indexes a list.
func fieldString(obj map[string]any, path ...string) string {
	var v any = obj
	for _, p := range path {
		switch c := v.(type) {
		case map[string]any:
			v = c[p]
		case []any:
			var i int
			if _, err := fmt.Sscan(p, &i); err != nil || i < 0 || i >= len(c) {
				return ""
			}
			v = c[i]
		default:
			return ""
		}
	}
	if v == nil {
		return ""
	}
	return fmt.Sprint(v)
}

// exampleCRD is a CustomResourceDefinition with a status subresource whose spec and
// status hold anything, as the examples' CRDs are.
func exampleCRD(group, kind, plural, scope string) string {
	return fmt.Sprintf(`apiVersion: apiextensions.k8s.io/v1
kind: CustomResourceDefinition
metadata: {name: %[3]s.%[1]s}
spec:
  group: %[1]s
  scope: %[4]s
  names: {kind: %[2]s, plural: %[3]s, singular: %[5]s, listKind: %[2]sList}
  versions:
  - name: v1
    served: true
    storage: true
    subresources: {status: {}}
    schema:
      openAPIV3Schema:
        type: object
        properties:
          spec: {type: object, x-kubernetes-preserve-unknown-fields: true}
          status: {type: object, x-kubernetes-preserve-unknown-fields: true}
`, group, kind, plural, scope, strings.ToLower(kind))
}
