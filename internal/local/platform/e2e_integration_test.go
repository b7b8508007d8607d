//go:build integration

package platform

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/kubernetes"

	"github.com/metalambda/metalambda/internal/kubetest"
	"github.com/metalambda/metalambda/internal/local/node"
)

const wantAnswer = "Hello Martin! Your name in reverse is nitraM"

// TestEndToEnd is the local platform's acceptance test: from a clean data directory,
// up; the PythonLambda sample answers through the ingress from both replicas, survives
// a pod deletion and follows a code change; deleting it removes every child; the
// ImmortalContainer sample runs; a function registered through the gateway API drives
// a new CompositeController; after Stop nothing is left.
func TestEndToEnd(t *testing.T) {
	dataDir := filepath.Join(t.TempDir(), "data")
	nodeOpts := nodeOptions("mle2e0", "10.244.214.0/24")
	opts := testOptions(t, dataDir)
	opts.Node = func(kube kubernetes.Interface, dir string) (NodeRunner, error) {
		o := nodeOpts
		o.StateDir = filepath.Join(dir, "node")
		return node.New(kube, o)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
	defer cancel()
	var out bytes.Buffer
	p, err := Start(ctx, opts, &out)
	if err != nil {
		t.Fatalf("up: %v\n%s", err, out.String())
	}
	stopped := false
	defer func() {
		if !stopped {
			p.Stop()
		}
	}()
	env := connect(t, p.Kubeconfig)
	kube := env.Kube
	apply := func(path string) {
		data, err := os.ReadFile(filepath.Join("..", "..", "..", path))
		if err != nil {
			t.Fatal(err)
		}
		if _, err := env.Apply(ctx, data); err != nil {
			t.Fatalf("apply %s: %v", path, err)
		}
	}
	ask := func() (int, string) {
		return get(t, "http://"+opts.IngressAddress+"/?name=Martin", "example.com")
	}

	// The sample, verbatim: the answer comes from both replicas.
	apply("operators/pythonlambda/sample.yaml")
	kubetest.Eventually(t, 3*time.Minute, "the lambda answers through the ingress", func(context.Context) (bool, error) {
		code, body := ask()
		return code == 200 && body == wantAnswer, fmt.Errorf("%d %q", code, body)
	})
	pods, err := kube.CoreV1().Pods("python-lambda-operator").List(ctx, metav1.ListOptions{})
	if err != nil || len(pods.Items) != 2 {
		t.Fatalf("pods: %v, %d", err, len(pods.Items))
	}
	// The first answer may come while the second replica is still starting; once both
	// are Ready, the ingress spreads requests over both.
	served := func(pod corev1.Pod) (string, bool) {
		logFile := filepath.Join(dataDir, "node", "pods", string(pod.UID), "logs", "lambda.log")
		log, _ := os.ReadFile(logFile)
		return logFile + ":\n" + string(log), strings.Contains(string(log), "GET /?name=Martin")
	}
	kubetest.Eventually(t, time.Minute, "both replicas serve requests", func(context.Context) (bool, error) {
		for range 10 {
			if code, body := ask(); code != 200 || body != wantAnswer {
				t.Fatalf("answer = %d %q", code, body)
			}
		}
		for _, pod := range pods.Items {
			if log, ok := served(pod); !ok {
				return false, fmt.Errorf("pod %s served no request yet (log %s)", pod.Name, log)
			}
		}
		return true, nil
	})

	// A deleted pod comes back, and the endpoint keeps answering.
	victim := pods.Items[0]
	if err := kube.CoreV1().Pods(victim.Namespace).Delete(ctx, victim.Name, metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	kubetest.Eventually(t, 2*time.Minute, "the deleted pod is back and Ready", func(ctx context.Context) (bool, error) {
		pod, err := kube.CoreV1().Pods(victim.Namespace).Get(ctx, victim.Name, metav1.GetOptions{})
		if err != nil || pod.UID == victim.UID {
			return false, fmt.Errorf("not recreated yet (%v)", err)
		}
		for _, c := range pod.Status.Conditions {
			if c.Type == "Ready" && c.Status == "True" {
				return true, nil
			}
		}
		return false, fmt.Errorf("phase %s", pod.Status.Phase)
	})
	if code, body := ask(); code != 200 || body != wantAnswer {
		t.Fatalf("after the pod came back: %d %q", code, body)
	}

	// New code changes the answer.
	lambdas := schema.GroupVersionResource{Group: "example.com", Version: "v1", Resource: "pythonlambdas"}
	lambdaClient := env.Dynamic.Resource(lambdas).Namespace("python-lambda-operator")
	patch := []byte(`{"spec":{"code":"output = 'Bye ' + query_params['name'][0]\n"}}`)
	if _, err := lambdaClient.Patch(ctx, "demo-python-lambda", types.MergePatchType, patch, metav1.PatchOptions{}); err != nil {
		t.Fatal(err)
	}
	kubetest.Eventually(t, 2*time.Minute, "the answer follows the new code", func(context.Context) (bool, error) {
		code, body := ask()
		return code == 200 && body == "Bye Martin", fmt.Errorf("%d %q", code, body)
	})

	// Deleting the PythonLambda removes every child.
	if err := lambdaClient.Delete(ctx, "demo-python-lambda", metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	kubetest.Eventually(t, 2*time.Minute, "every child is removed", func(ctx context.Context) (bool, error) {
		pods, _ := kube.CoreV1().Pods("python-lambda-operator").List(ctx, metav1.ListOptions{})
		svcs, _ := kube.CoreV1().Services("python-lambda-operator").List(ctx, metav1.ListOptions{})
		ings, _ := kube.NetworkingV1().Ingresses("python-lambda-operator").List(ctx, metav1.ListOptions{})
		n := len(pods.Items) + len(svcs.Items) + len(ings.Items)
		return n == 0, fmt.Errorf("%d children left", n)
	})

	// The ImmortalContainer sample runs, names its pod, and a deleted pod comes back.
	apply("operators/immortalcontainer/sample.yaml")
	immortals := schema.GroupVersionResource{Group: "example.com", Version: "v1alpha1", Resource: "immortalcontainers"}
	var first string
	kubetest.Eventually(t, 2*time.Minute, "the immortal pod runs and the status names it", func(ctx context.Context) (bool, error) {
		pod, err := kube.CoreV1().Pods("default").Get(ctx, "example-immortal-container-immortalpod", metav1.GetOptions{})
		if err != nil || pod.Status.Phase != "Running" {
			return false, fmt.Errorf("pod: %v", err)
		}
		first = string(pod.UID)
		ic, err := env.Dynamic.Resource(immortals).Namespace("default").Get(ctx, "example-immortal-container", metav1.GetOptions{})
		if err != nil {
			return false, err
		}
		cur, _, _ := unstructured.NestedString(ic.Object, "status", "currentPod")
		return cur == pod.Name, fmt.Errorf("currentPod %q", cur)
	})
	if err := kube.CoreV1().Pods("default").Delete(ctx, "example-immortal-container-immortalpod", metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	kubetest.Eventually(t, 2*time.Minute, "the immortal pod comes back", func(ctx context.Context) (bool, error) {
		pod, err := kube.CoreV1().Pods("default").Get(ctx, "example-immortal-container-immortalpod", metav1.GetOptions{})
		return err == nil && string(pod.UID) != first && pod.Status.Phase == "Running", err
	})

	// A function registered through the gateway API is the sync hook of a new controller.
	registerAndUse(t, ctx, p, opts, env)

	p.Stop()
	stopped = true
	if out, _ := runCmd("ip", "link", "show", "mle2e0"); !strings.Contains(out, "does not exist") {
		t.Errorf("the bridge survived Stop: %s", out)
	}
}

func registerAndUse(t *testing.T, ctx context.Context, p *Platform, opts Options, env *kubetest.Env) {
	t.Helper()
	token, kube := env.Config.BearerToken, env.Kube
	fn := map[string]any{"name": "greeter", "runtime": "javascript", "source": `function sync(request) {
  return {children: [{apiVersion: "v1", kind: "ConfigMap", metadata: {name: request.parent.metadata.name + "-greeting"}, data: {hello: "world"}}]};
}`}
	body, _ := json.Marshal(fn)
	req, _ := http.NewRequest(http.MethodPost, "http://"+opts.GatewayAddress+"/v1/namespaces/default/functions", bytes.NewReader(body))
	req.Header.Set("Authorization", "Bearer "+token)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	data, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != http.StatusCreated {
		t.Fatalf("register = %d %s", resp.StatusCode, data)
	}
	manifestYAML := fmt.Sprintf(`
apiVersion: apiextensions.k8s.io/v1
kind: CustomResourceDefinition
metadata: {name: greetings.e2e.metalambda.dev}
spec:
  group: e2e.metalambda.dev
  scope: Namespaced
  names: {plural: greetings, singular: greeting, kind: Greeting, listKind: GreetingList}
  versions:
  - name: v1
    served: true
    storage: true
    subresources: {status: {}}
    schema: {openAPIV3Schema: {type: object, x-kubernetes-preserve-unknown-fields: true}}
---
apiVersion: metacontroller.k8s.io/v1alpha1
kind: CompositeController
metadata: {name: greeter}
spec:
  generateSelector: true
  parentResource: {apiVersion: e2e.metalambda.dev/v1, resource: greetings}
  childResources: [{apiVersion: v1, resource: configmaps}]
  hooks: {sync: {webhook: {url: "http://%s/hooks/default/greeter"}}}
`, opts.GatewayAddress)
	if _, err := env.Apply(ctx, []byte(manifestYAML)); err != nil {
		t.Fatal(err)
	}
	kubetest.Eventually(t, time.Minute, "a Greeting can be created", func(ctx context.Context) (bool, error) {
		_, err := env.Apply(ctx, []byte("{apiVersion: e2e.metalambda.dev/v1, kind: Greeting, metadata: {name: hi, namespace: default}, spec: {}}"))
		return err == nil, err
	})
	kubetest.Eventually(t, time.Minute, "the registered function's child exists", func(ctx context.Context) (bool, error) {
		_, err := kube.CoreV1().ConfigMaps("default").Get(ctx, "hi-greeting", metav1.GetOptions{})
		return err == nil, err
	})
}
