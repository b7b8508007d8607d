//go:build integration

package deploy

import (
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"

	"github.com/metalambda/metalambda/internal/kubetest"
)

// TestGatewayPodSecurity: the API server's Pod Security admission admits the
// gateway's pod at the level of its variant, and no stricter: by default
// (gateway.workerUsers own, root with SETUID, SETGID and KILL) a baseline
// namespace admits it and a restricted one refuses it, naming why; with
// workerUsers shared a restricted namespace admits it.
func TestGatewayPodSecurity(t *testing.T) {
	ctx := kubetest.Context(t)
	for _, c := range []struct {
		users, level string
		refusal      []string // what the refusal names; nil: admitted
	}{
		{users: "own", level: "baseline"},
		{users: "own", level: "restricted", refusal: []string{"runAsNonRoot", "SETUID"}},
		{users: "shared", level: "restricted"},
	} {
		t.Run(c.users+"-"+c.level, func(t *testing.T) {
			ns := env.Namespace(t)
			nsObj, err := env.Kube.CoreV1().Namespaces().Get(ctx, ns, metav1.GetOptions{})
			if err != nil {
				t.Fatal(err)
			}
			nsObj.Labels["pod-security.kubernetes.io/enforce"] = c.level
			if _, err := env.Kube.CoreV1().Namespaces().Update(ctx, nsObj, metav1.UpdateOptions{}); err != nil {
				t.Fatal(err)
			}
			v := Variants[1]
			v.Namespace = ns
			v.Values = map[string]any{"gateway": map[string]any{"workerUsers": c.users, "hookToken": map[string]any{"existingSecret": HookTokenSecret}}}
			pod := gatewayPod(t, v)
			_, err = env.Kube.CoreV1().Pods(ns).Create(ctx, pod, metav1.CreateOptions{DryRun: []string{metav1.DryRunAll}})
			if c.refusal == nil {
				if err != nil {
					t.Fatalf("a %s namespace refuses the gateway's pod of workerUsers %s: %v", c.level, c.users, err)
				}
				return
			}
			if err == nil {
				t.Fatalf("a %s namespace admits the gateway's pod of workerUsers %s", c.level, c.users)
			}
			for _, want := range c.refusal {
				if !strings.Contains(err.Error(), want) {
					t.Errorf("the refusal %q does not name %s", err, want)
				}
			}
		})
	}
}

// gatewayPod is a pod of the gateway Deployment's template, as v renders it.
func gatewayPod(t *testing.T, v Variant) *corev1.Pod {
	t.Helper()
	rendered, err := RenderChart(v)
	if err != nil {
		t.Fatal(err)
	}
	for _, o := range rendered["gateway.yaml"] {
		if o.GetKind() != "Deployment" {
			continue
		}
		tmpl, _, _ := unstructured.NestedMap(o.Object, "spec", "template")
		pod := &corev1.Pod{}
		if err := runtime.DefaultUnstructuredConverter.FromUnstructured(tmpl, pod); err != nil {
			t.Fatal(err)
		}
		pod.Name = "gateway"
		return pod
	}
	t.Fatal("no gateway Deployment")
	return nil
}
