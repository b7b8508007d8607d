//go:build integration

package operators_test

import (
	"context"
	"fmt"
	"os"
	"strings"
	"sync"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"

	"github.com/metalambda/metalambda/functions"
	"github.com/metalambda/metalambda/internal/apis/metacontroller/v1alpha1"
	"github.com/metalambda/metalambda/internal/engine"
	"github.com/metalambda/metalambda/internal/gateway"
	"github.com/metalambda/metalambda/internal/gateway/lambda"
	"github.com/metalambda/metalambda/internal/kubetest"
	"github.com/metalambda/metalambda/internal/kubetest/start"
	"github.com/metalambda/metalambda/internal/local/cluster"
)

var env *kubetest.Env

func TestMain(m *testing.M) {
	lambda.ServeWorker() // the gateway's sandbox starts this binary as its launcher and workers
	kubetest.Main(m, &env, cluster.Defaults())
}

var platformOnce sync.Once

// startPlatform installs the CRDs and runs a gateway with the builtin functions and an
// engine that reaches the gateway's Service through its URL, once for the package.
func startPlatform(t *testing.T) {
	t.Helper()
	platformOnce.Do(func() {
		env.InstallCRDs(t)
		// Both run for the whole package, not stopped with the first test.
		gwOpts := gateway.Defaults()
		gwOpts.Runtime.Builtins = functions.Builtins()
		// METALAMBDA_TEST_PYTHON_ZYGOTE=auto|off: Python workers forked by a
		// zygote where the sandbox starts one, or not.
		if z := os.Getenv("METALAMBDA_TEST_PYTHON_ZYGOTE"); z != "" {
			gwOpts.Runtime.PythonZygote = z
		}
		gw, err := start.ServeGateway(env.Config, gwOpts)
		if err != nil {
			t.Fatal(err)
		}
		env.AtExit(gw.Stop) // its sandbox closed, with its zygotes and cgroups
		opts := engine.Defaults()
		opts.ResolveService = func(ref v1alpha1.ServiceReference) (string, bool) {
			return gw.URL, ref.Name == "metalambda-gateway" && ref.Namespace == "metalambda-system"
		}
		eng, err := start.RunEngine(env.Config, opts)
		if err != nil {
			t.Fatal(err)
		}
		env.AtExit(func() { _ = eng.Stop() }) // first: it calls the gateway
	})
}

var (
	pods           = schema.GroupVersionResource{Version: "v1", Resource: "pods"}
	configMaps     = schema.GroupVersionResource{Version: "v1", Resource: "configmaps"}
	services       = schema.GroupVersionResource{Version: "v1", Resource: "services"}
	ingresses      = schema.GroupVersionResource{Group: "networking.k8s.io", Version: "v1", Resource: "ingresses"}
	pythonLambdas  = schema.GroupVersionResource{Group: "example.com", Version: "v1", Resource: "pythonlambdas"}
	immortals      = schema.GroupVersionResource{Group: "example.com", Version: "v1alpha1", Resource: "immortalcontainers"}
	lambdaNS       = "python-lambda-operator"
	lambdaName     = "demo-python-lambda"
	immortalName   = "example-immortal-container"
	immortalPod    = immortalName + "-immortalpod"
	defaultTimeout = 60 * time.Second
)

// children lists the objects of gvr in ns controlled by the parent with uid.
func children(ctx context.Context, gvr schema.GroupVersionResource, ns string, uid string) ([]unstructured.Unstructured, error) {
	list, err := env.Dynamic.Resource(gvr).Namespace(ns).List(ctx, metav1.ListOptions{LabelSelector: engine.ControllerUIDLabel + "=" + uid})
	if err != nil {
		return nil, err
	}
	var out []unstructured.Unstructured
	for _, item := range list.Items {
		if item.GetDeletionTimestamp() == nil {
			out = append(out, item)
		}
	}
	return out, nil
}

func TestPythonLambda(t *testing.T) {
	startPlatform(t)
	ctx := kubetest.Context(t)
	env.ApplyFile(t, "pythonlambda/operator.yaml")
	env.ApplyFile(t, "pythonlambda/sample.yaml")
	parent, err := env.Dynamic.Resource(pythonLambdas).Namespace(lambdaNS).Get(ctx, lambdaName, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	uid := string(parent.GetUID())

	var podNames []string
	kubetest.Eventually(t, defaultTimeout, "the ConfigMap, Service, Ingress and two Pods exist", func(ctx context.Context) (bool, error) {
		counts := map[string]int{}
		for name, gvr := range map[string]schema.GroupVersionResource{"configmaps": configMaps, "services": services, "ingresses": ingresses, "pods": pods} {
			items, err := children(ctx, gvr, lambdaNS, uid)
			if err != nil {
				return false, err
			}
			counts[name] = len(items)
			if name == "pods" {
				podNames = podNames[:0]
				for _, p := range items {
					podNames = append(podNames, p.GetName())
				}
			}
		}
		return counts["configmaps"] == 1 && counts["services"] == 1 && counts["ingresses"] == 1 && counts["pods"] == 2, fmt.Errorf("children %v", counts)
	})
	checkLambdaShape(t, ctx, uid)

	// Steady state: nothing is recreated while nothing changes.
	stable := podUIDs(t, ctx, uid)
	time.Sleep(3 * time.Second)
	for u := range podUIDs(t, ctx, uid) {
		if !stable[u] {
			t.Fatalf("pods were recreated in steady state")
		}
	}

	kubetest.Eventually(t, defaultTimeout, "the status counts the children", func(ctx context.Context) (bool, error) {
		p, err := env.Dynamic.Resource(pythonLambdas).Namespace(lambdaNS).Get(ctx, lambdaName, metav1.GetOptions{})
		if err != nil {
			return false, err
		}
		status, _ := p.Object["status"].(map[string]any)
		return fmt.Sprint(status["pods"]) == "2" && status["url"] == "http://example.com/", fmt.Errorf("status %v", status)
	})

	// A deleted pod comes back.
	victim := podNames[0]
	before, err := env.Kube.CoreV1().Pods(lambdaNS).Get(ctx, victim, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if err := env.Kube.CoreV1().Pods(lambdaNS).Delete(ctx, victim, metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	kubetest.Eventually(t, defaultTimeout, "the deleted pod is recreated", func(ctx context.Context) (bool, error) {
		p, err := env.Kube.CoreV1().Pods(lambdaNS).Get(ctx, victim, metav1.GetOptions{})
		return err == nil && p.UID != before.UID, err
	})

	// Editing the code replaces every pod, one at a time, each once the pod replaced
	// before it is Ready: with no node here, the test marks pods Ready.
	uids := podUIDs(t, ctx, uid)
	patch := []byte(`{"spec":{"code":"output = 'changed'\n"}}`)
	if _, err := env.Dynamic.Resource(pythonLambdas).Namespace(lambdaNS).Patch(ctx, lambdaName, types.MergePatchType, patch, metav1.PatchOptions{}); err != nil {
		t.Fatal(err)
	}
	kubetest.Eventually(t, 2*defaultTimeout, "new code replaces both pods", func(ctx context.Context) (bool, error) {
		if err := markPodsReady(ctx, uid); err != nil {
			return false, err
		}
		now := podUIDs(t, ctx, uid)
		if len(now) != 2 {
			return false, fmt.Errorf("%d pods", len(now))
		}
		for u := range now {
			if uids[u] {
				return false, fmt.Errorf("pod %s not replaced yet", u)
			}
		}
		return true, nil
	})

	// Deleting the parent removes every child.
	if err := env.Dynamic.Resource(pythonLambdas).Namespace(lambdaNS).Delete(ctx, lambdaName, metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	kubetest.Eventually(t, defaultTimeout, "garbage collection removes every child", func(ctx context.Context) (bool, error) {
		left := 0
		for _, gvr := range []schema.GroupVersionResource{configMaps, services, ingresses, pods} {
			items, err := children(ctx, gvr, lambdaNS, uid)
			if err != nil {
				return false, err
			}
			left += len(items)
		}
		return left == 0, fmt.Errorf("%d children left", left)
	})
}

// markPodsReady plays the kubelet for the lambda's pods: each becomes Running and
// Ready.
func markPodsReady(ctx context.Context, parentUID string) error {
	list, err := env.Kube.CoreV1().Pods(lambdaNS).List(ctx, metav1.ListOptions{LabelSelector: engine.ControllerUIDLabel + "=" + parentUID})
	if err != nil {
		return err
	}
	for _, p := range list.Items {
		if p.DeletionTimestamp != nil || p.Status.Phase == corev1.PodRunning {
			continue
		}
		p.Status.Phase = corev1.PodRunning
		p.Status.Conditions = []corev1.PodCondition{{Type: corev1.PodReady, Status: corev1.ConditionTrue, LastTransitionTime: metav1.Now()}}
		if _, err := env.Kube.CoreV1().Pods(lambdaNS).UpdateStatus(ctx, &p, metav1.UpdateOptions{}); err != nil {
			return err
		}
	}
	return nil
}

func podUIDs(t *testing.T, ctx context.Context, parentUID string) map[string]bool {
	t.Helper()
	items, err := children(ctx, pods, lambdaNS, parentUID)
	if err != nil {
		t.Fatal(err)
	}
	out := map[string]bool{}
	for _, p := range items {
		out[string(p.GetUID())] = true
	}
	return out
}

// checkLambdaShape checks what the children look like on the API server.
func checkLambdaShape(t *testing.T, ctx context.Context, uid string) {
	t.Helper()
	svcs, _ := children(ctx, services, lambdaNS, uid)
	var svc corev1.Service
	mustConvert(t, svcs[0].Object, &svc)
	if p := svc.Spec.Ports; len(p) != 1 || p[0].Port != 80 || p[0].TargetPort.IntValue() != 8080 {
		t.Errorf("service ports = %+v, want 80 -> 8080", p)
	}
	ings, _ := children(ctx, ingresses, lambdaNS, uid)
	rules, _, _ := unstructured.NestedSlice(ings[0].Object, "spec", "rules")
	if len(rules) != 1 || rules[0].(map[string]any)["host"] != "example.com" {
		t.Errorf("ingress rules = %v, want host example.com", rules)
	}
	if !strings.Contains(fmt.Sprint(rules), "Prefix") {
		t.Errorf("ingress rules = %v, want a Prefix path", rules)
	}
	podList, _ := children(ctx, pods, lambdaNS, uid)
	var pod corev1.Pod
	mustConvert(t, podList[0].Object, &pod)
	c := pod.Spec.Containers[0]
	if c.ReadinessProbe == nil || c.ReadinessProbe.HTTPGet == nil {
		t.Errorf("container has no HTTP readiness probe: %+v", c.ReadinessProbe)
	}
	foundIP := false
	for _, e := range c.Env {
		if e.ValueFrom != nil && e.ValueFrom.FieldRef != nil && e.ValueFrom.FieldRef.FieldPath == "status.podIP" {
			foundIP = true
		}
	}
	if !foundIP {
		t.Errorf("the pod IP is not passed through the downward API: %+v", c.Env)
	}
	mountsConfigMap := false
	for _, v := range pod.Spec.Volumes {
		if v.ConfigMap != nil {
			mountsConfigMap = true
		}
	}
	if !mountsConfigMap || len(c.VolumeMounts) == 0 {
		t.Errorf("the pod does not mount the ConfigMap: volumes %+v", pod.Spec.Volumes)
	}
}

func TestImmortalContainer(t *testing.T) {
	startPlatform(t)
	ctx := kubetest.Context(t)
	ns := env.Namespace(t)
	env.ApplyFile(t, "immortalcontainer/operator.yaml")
	objs, err := env.Apply(ctx, []byte(strings.Replace(mustRead(t, "immortalcontainer/sample.yaml"), "metadata:\n", "metadata:\n  namespace: "+ns+"\n", 1)))
	if err != nil {
		t.Fatal(err)
	}
	if objs[0].GetNamespace() != ns {
		t.Fatalf("sample applied to %q", objs[0].GetNamespace())
	}
	var first *corev1.Pod
	kubetest.Eventually(t, defaultTimeout, "the immortal pod exists and the status names it", func(ctx context.Context) (bool, error) {
		p, err := env.Kube.CoreV1().Pods(ns).Get(ctx, immortalPod, metav1.GetOptions{})
		if err != nil {
			return false, err
		}
		first = p
		parent, err := env.Dynamic.Resource(immortals).Namespace(ns).Get(ctx, immortalName, metav1.GetOptions{})
		if err != nil {
			return false, err
		}
		cur, _, _ := unstructured.NestedString(parent.Object, "status", "currentPod")
		return cur == immortalPod, fmt.Errorf("status %v", parent.Object["status"])
	})
	if first.Spec.RestartPolicy != corev1.RestartPolicyOnFailure || first.Spec.Containers[0].Image != "nginx:latest" {
		t.Errorf("pod restartPolicy %s image %s", first.Spec.RestartPolicy, first.Spec.Containers[0].Image)
	}
	if err := env.Kube.CoreV1().Pods(ns).Delete(ctx, immortalPod, metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	kubetest.Eventually(t, defaultTimeout, "the deleted pod comes back", func(ctx context.Context) (bool, error) {
		p, err := env.Kube.CoreV1().Pods(ns).Get(ctx, immortalPod, metav1.GetOptions{})
		return err == nil && p.UID != first.UID, err
	})
}

// TestInvalidSpecsAreRefused: the CRDs refuse what the hooks could not work with.
func TestInvalidSpecsAreRefused(t *testing.T) {
	startPlatform(t)
	ns := env.Namespace(t)
	for _, tt := range []struct {
		name, manifest, want string
	}{
		{"missing code", "{apiVersion: example.com/v1, kind: PythonLambda, metadata: {name: a}, spec: {replicas: 1}}", "spec.code: Required value"},
		{"negative replicas", "{apiVersion: example.com/v1, kind: PythonLambda, metadata: {name: b}, spec: {code: 'output = 1', replicas: -1}}", "spec.replicas"},
		{"bad host", "{apiVersion: example.com/v1, kind: PythonLambda, metadata: {name: c}, spec: {code: 'output = 1', host: 'Not A Host'}}", "spec.host"},
		{"empty image", "{apiVersion: example.com/v1alpha1, kind: ImmortalContainer, metadata: {name: d}, spec: {image: ''}}", "spec.image"},
		{"missing image", "{apiVersion: example.com/v1alpha1, kind: ImmortalContainer, metadata: {name: e}, spec: {}}", "spec.image: Required value"},
	} {
		manifest := strings.Replace(tt.manifest, "metadata: {", "metadata: {namespace: "+ns+", ", 1)
		_, err := env.Apply(kubetest.Context(t), []byte(manifest))
		if err == nil || !strings.Contains(err.Error(), tt.want) {
			t.Errorf("%s: err = %v, want a message about %q", tt.name, err, tt.want)
		}
	}
}

func mustConvert(t *testing.T, in map[string]any, out any) {
	t.Helper()
	if err := runtimeConvert(in, out); err != nil {
		t.Fatal(err)
	}
}
