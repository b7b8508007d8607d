//go:build integration

package platform

import (
	"context"
	"fmt"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"

	"github.com/metalambda/metalambda/internal/engineapi"
	"github.com/metalambda/metalambda/internal/gatewayapi"
	"github.com/metalambda/metalambda/internal/kubetest"
)

// TestInClusterChart installs the Helm chart on the local platform and runs the
// engine and the gateway as its pods (the node runs this checkout's binaries for
// their images): two engine replicas elect a leader with their ServiceAccount's
// rights, the engine reaches the gateway's hooks by the Service's DNS name, and the
// PythonLambda sample answers through the ingress.
func TestInClusterChart(t *testing.T) {
	binDir, err := BuildComponents(context.Background(), "incluster-test-")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(binDir) })
	nodeOpts := nodeOptions("mlchart0", "10.244.225.0/24")
	nodeOpts.Images = ComponentImages(binDir)
	opts := testOptions(t, filepath.Join(t.TempDir(), "data"))
	opts.InCluster = &InCluster{ChartDir: filepath.Join("..", "..", "..", "deploy", "helm", "metalambda"), BinDir: binDir}
	opts.Node = LocalNode(nodeOpts)
	ctx, cancel := context.WithTimeout(context.Background(), 8*time.Minute)
	defer cancel()
	var out strings.Builder
	p, err := Start(ctx, opts, &out)
	if err != nil {
		t.Fatalf("up: %v\n%s", err, out.String())
	}
	defer p.Stop()
	env := connect(t, p.Kubeconfig)
	kube := env.Kube
	defer func() {
		if t.Failed() {
			logPods(t, ctx, kube, GatewayNamespace)
		}
	}()

	var status strings.Builder
	p.Status(&status)
	if !strings.Contains(status.String(), "engine       pods of the chart in "+GatewayNamespace) {
		t.Errorf("status does not say the engine runs as pods:\n%s", status.String())
	}

	// The components run as pods on the local node, from the chart's images.
	pods, err := kube.CoreV1().Pods(GatewayNamespace).List(ctx, metav1.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	images := map[string]int{}
	for _, pod := range pods.Items {
		if pod.Spec.NodeName == "" || !podReady(&pod) {
			t.Errorf("pod %s: node %q, ready %t", pod.Name, pod.Spec.NodeName, podReady(&pod))
		}
		for _, c := range pod.Spec.Containers {
			images[strings.SplitN(c.Image, ":", 2)[0]]++
		}
	}
	if images[EngineImage] != 2 || images[GatewayImage] != 2 {
		t.Errorf("images of the running pods: %v, want 2 engines and 2 gateways", images)
	}

	// One engine pod leads, through the Lease its ServiceAccount may update. (The
	// identity is the hostname, which pods share with the host here, and a UUID: the
	// leader is found by its log.)
	var holder string
	kubetest.Eventually(t, time.Minute, "an engine pod holds the leader Lease", func(ctx context.Context) (bool, error) {
		lease, err := kube.CoordinationV1().Leases(GatewayNamespace).Get(ctx, "metacontroller", metav1.GetOptions{})
		if err != nil {
			return false, err
		}
		if lease.Spec.HolderIdentity != nil {
			holder = *lease.Spec.HolderIdentity
		}
		return holder != "", fmt.Errorf("no holder")
	})
	leaders := 0
	for _, pod := range pods.Items {
		if !strings.HasPrefix(pod.Name, "metalambda-engine-") {
			continue
		}
		logs, err := kube.CoreV1().Pods(GatewayNamespace).GetLogs(pod.Name, &corev1.PodLogOptions{Container: "engine"}).Do(ctx).Raw()
		if err != nil {
			t.Fatal(err)
		}
		if strings.Contains(string(logs), `"Leading: starting controllers" identity=`+holder) {
			leaders++
		}
	}
	if leaders != 1 {
		t.Errorf("%d engine pods say they lead as %s, want 1", leaders, holder)
	}

	// The gateway's API answers at its Service's ClusterIP, which `metalambda fn` reads.
	url, err := os.ReadFile(GatewayURLFile(opts.DataDir))
	if err != nil {
		t.Fatal(err)
	}
	if code, body := get(t, strings.TrimSpace(string(url))+"/readyz", ""); code != http.StatusOK {
		t.Errorf("gateway /readyz through its ClusterIP: %d %s", code, body)
	}

	// The engine's API answers through its Service, which sends every request to the
	// leader (the standby would answer 503): each request on a new connection.
	apiSvc, err := kube.CoreV1().Services(GatewayNamespace).Get(ctx, "metalambda-engine-api", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	token := env.Token(t, GatewayNamespace, DashboardAdmin)
	api := engineapi.Client{BaseURL: "http://" + net.JoinHostPort(apiSvc.Spec.ClusterIP, "9095"),
		HTTP: &http.Client{Timeout: 10 * time.Second, Transport: &http.Transport{DisableKeepAlives: true}}}
	kubetest.Eventually(t, time.Minute, "the engine API's Service reaches the leader", func(ctx context.Context) (bool, error) {
		_, err := api.Controllers(ctx, token)
		return err == nil, err
	})
	for i := range 6 {
		list, err := api.Controllers(ctx, token)
		if err != nil {
			t.Fatalf("request %d to the engine API: %v", i, err)
		}
		if len(list.Items) < 2 {
			t.Fatalf("request %d: controllers %+v, want the two bundled operators", i, list.Items)
		}
	}

	// The sample, verbatim: the engine pods call the gateway pod's builtin hook.
	data, err := os.ReadFile(filepath.Join("..", "..", "..", "operators", "pythonlambda", "sample.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := env.Apply(ctx, data); err != nil {
		t.Fatal(err)
	}
	kubetest.Eventually(t, 3*time.Minute, "the lambda answers through the ingress", func(context.Context) (bool, error) {
		code, body := get(t, "http://"+opts.IngressAddress+"/?name=Martin", "example.com")
		return code == http.StatusOK && body == wantAnswer, fmt.Errorf("%d %q", code, body)
	})

	// The engine sends every call of the operator's Function to the same gateway
	// replica (--gateway-service; a kept-alive connection through the Service would
	// too, so hook.Sharded's own test is the proof of the routing), and either
	// replica lists them all, naming it: the two replicas find each other.
	gw := gatewayapi.Client{BaseURL: strings.TrimSpace(string(url)), Token: token, HTTP: &http.Client{Timeout: 10 * time.Second, Transport: &http.Transport{DisableKeepAlives: true}}}
	var calls *gatewayapi.InvocationList
	// A replica that does not answer its peer within the peer timeout is listed as
	// unreachable, and the list is partial; on a loaded machine its first answer
	// (which reviews the token with the API server) can take that long, so the
	// test waits for a whole list, as a person would press reload.
	kubetest.Eventually(t, time.Minute, "the operator's hook calls are recorded, and every replica answers", func(ctx context.Context) (bool, error) {
		calls, err = gw.Invocations(ctx, GatewayNamespace, "pythonlambda")
		return err == nil && len(calls.Items) >= 2 && len(calls.Unreachable) == 0, fmt.Errorf("%v %+v", err, calls)
	})
	replicas := map[string]int{}
	for _, c := range calls.Items {
		replicas[c.Replica]++
	}
	if len(replicas) != 1 || len(calls.Unreachable) != 0 {
		t.Errorf("the pythonlambda hook's %d calls were served by %v (unreachable %v), want one replica", len(calls.Items), replicas, calls.Unreachable)
	}
	for i := range 4 { // each request on a new connection: the Service picks any replica
		again, err := gw.Invocations(ctx, GatewayNamespace, "pythonlambda")
		if err != nil || len(again.Items) < len(calls.Items) {
			t.Errorf("list %d through the Service: %v, %d calls, want the %d listed before", i, err, len(again.Items), len(calls.Items))
		}
	}
}

// logPods logs the pods of a namespace and their containers' last lines.
func logPods(t *testing.T, ctx context.Context, kube kubernetes.Interface, ns string) {
	pods, err := kube.CoreV1().Pods(ns).List(ctx, metav1.ListOptions{})
	if err != nil {
		t.Logf("list pods: %v", err)
		return
	}
	for _, pod := range pods.Items {
		t.Logf("pod %s phase=%s ready=%t statuses=%+v", pod.Name, pod.Status.Phase, podReady(&pod), pod.Status.ContainerStatuses)
		for _, c := range pod.Spec.Containers {
			tail := int64(20)
			logs, err := kube.CoreV1().Pods(ns).GetLogs(pod.Name, &corev1.PodLogOptions{Container: c.Name, TailLines: &tail}).Do(ctx).Raw()
			t.Logf("logs of %s/%s (%v):\n%s", pod.Name, c.Name, err, logs)
		}
	}
}
