//go:build integration

package node

import (
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"errors"
	"fmt"
	"io"
	"math/big"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"

	"github.com/metalambda/metalambda/internal/gateway/sandbox"
	"github.com/metalambda/metalambda/internal/kubetest"
	"github.com/metalambda/metalambda/internal/local/cluster"
)

var env *kubetest.Env

// testBridge and testCIDR keep the tests off the default bridge and subnet.
const (
	testBridge = "mltest0"
	testCIDR   = "10.244.213.0/24"
)

func TestMain(m *testing.M) {
	sandbox.ServeLauncher() // the node's sandboxes start this binary as their launcher
	if err := machineReady(); err != nil {
		fmt.Fprintf(os.Stderr, "node integration tests cannot run: %v\n", err)
		os.Exit(1)
	}
	opts := cluster.Defaults()
	opts.ServiceClusterIPRange = testServiceRange
	kubetest.Main(m, &env, opts)
}

// nodeConfig gives the node its own client with a kubelet-like rate limit, so the
// tests' client does not share its budget.
func nodeConfig() *rest.Config {
	cfg := rest.CopyConfig(env.Config)
	cfg.QPS, cfg.Burst = 50, 100
	return cfg
}

func machineReady() error {
	if os.Geteuid() != 0 {
		return errors.New("they need root (network namespaces, bridge, mounts)")
	}
	for _, p := range requiredPlugins {
		if _, err := os.Stat(filepath.Join("/usr/lib/cni", p)); err != nil {
			return fmt.Errorf("CNI plugin /usr/lib/cni/%s is missing: run `%s`", p, CNIInstallHint)
		}
	}
	return nil
}

// TestLocalNode starts one node for all its subtests; its cleanup stops the node and
// checks that no process, network namespace, bridge or veth remains.
func TestLocalNode(t *testing.T) {
	kube, err := kubernetes.NewForConfig(nodeConfig())
	if err != nil {
		t.Fatal(err)
	}
	opts := Defaults()
	opts.Name, opts.PodCIDR, opts.Bridge, opts.StateDir = "local-test", testCIDR, testBridge, t.TempDir()
	opts.Images = []ImageRule{inClusterImage(t)}
	n := runNode(t, kube, opts, nil)

	t.Run("NodeReadyAndSchedules", func(t *testing.T) { testNodeReady(t, n) })
	t.Run("Group", func(t *testing.T) {
		t.Run("PythonServer", func(t *testing.T) { t.Parallel(); testPythonServer(t, n) })
		t.Run("Placeholder", func(t *testing.T) { t.Parallel(); testPlaceholder(t, n) })
		t.Run("CrashLoop", func(t *testing.T) { t.Parallel(); testCrashLoop(t, n) })
		t.Run("Delete", func(t *testing.T) { t.Parallel(); testDelete(t, n) })
		t.Run("Probes", func(t *testing.T) { t.Parallel(); testProbes(t, n) })
		t.Run("BusyboxJob", func(t *testing.T) { t.Parallel(); testBusyboxJob(t, n) })
		t.Run("OnFailure", func(t *testing.T) { t.Parallel(); testOnFailure(t, n) })
		t.Run("Never", func(t *testing.T) { t.Parallel(); testNever(t, n) })
		t.Run("InitContainers", func(t *testing.T) { t.Parallel(); testInitContainers(t, n) })
		t.Run("NodeImage", func(t *testing.T) { t.Parallel(); testNodeImage(t, n) })
		t.Run("RelativeMountPath", func(t *testing.T) { t.Parallel(); testRelativeMountPath(t, n) })
		t.Run("LogEndpointAuth", func(t *testing.T) { t.Parallel(); testLogEndpointAuth(t, n) })
		t.Run("InCluster", func(t *testing.T) { t.Parallel(); testInCluster(t, n) })
		t.Run("ServiceClusterIP", func(t *testing.T) { t.Parallel(); testServiceClusterIP(t, n) })
		t.Run("ServiceDNS", func(t *testing.T) { t.Parallel(); testServiceDNS(t, n) })
		t.Run("Claims", func(t *testing.T) { t.Parallel(); testClaims(t, n) })
		t.Run("SubPathLinkedAfterStart", func(t *testing.T) { t.Parallel(); testSubPathLinkedAfterStart(t, n) })
	})
}

func testNodeReady(t *testing.T, n *Node) {
	kubetest.Eventually(t, 30*time.Second, "the node is Ready", func(ctx context.Context) (bool, error) {
		node, err := env.Kube.CoreV1().Nodes().Get(ctx, "local-test", metav1.GetOptions{})
		if err != nil {
			return false, err
		}
		if node.Labels["kubernetes.io/hostname"] != "local-test" || node.Status.Allocatable.Cpu().IsZero() {
			return false, fmt.Errorf("labels %v, allocatable %v", node.Labels, node.Status.Allocatable)
		}
		for _, c := range node.Status.Conditions {
			if c.Type == corev1.NodeReady && c.Status == corev1.ConditionTrue && n.Ready() {
				return true, nil
			}
		}
		return false, fmt.Errorf("conditions %v", node.Status.Conditions)
	})
	lease, err := env.Kube.CoordinationV1().Leases("kube-node-lease").Get(kubetest.Context(t), "local-test", metav1.GetOptions{})
	if err != nil || lease.Spec.RenewTime == nil {
		t.Fatalf("lease: %v %v", lease, err)
	}
	first := lease.Spec.RenewTime.Time
	kubetest.Eventually(t, 10*time.Second, "the lease is renewed", func(ctx context.Context) (bool, error) {
		l, err := env.Kube.CoordinationV1().Leases("kube-node-lease").Get(ctx, "local-test", metav1.GetOptions{})
		return err == nil && l.Spec.RenewTime.After(first), err
	})
	ns := env.Namespace(t)
	createPod(t, ns, &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: "scheduled"},
		Spec:       corev1.PodSpec{Containers: []corev1.Container{{Name: "c", Image: "busybox", Command: []string{"sleep", "3600"}}}},
	})
	waitPod(t, ns, "scheduled", "the scheduler binds the pod to the node and it runs", func(p *corev1.Pod) error {
		if p.Spec.NodeName != "local-test" || p.Status.Phase != corev1.PodRunning {
			return fmt.Errorf("node %q phase %s", p.Spec.NodeName, p.Status.Phase)
		}
		return nil
	})
}

const serverScript = `
import http.server, os
class H(http.server.BaseHTTPRequestHandler):
    def do_GET(self):
        body = ("hello from %s at %s greeting=%s\n" % (os.environ["POD_NAME"], os.environ["POD_IP"], os.environ["GREETING"])).encode()
        self.send_response(200)
        self.end_headers()
        self.wfile.write(body)
http.server.HTTPServer(("", 8080), H).serve_forever()
`

func testPythonServer(t *testing.T, n *Node) {
	ns := env.Namespace(t)
	ctx := kubetest.Context(t)
	cm := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "app"}, Data: map[string]string{"main.py": serverScript, "greeting": "hi"}}
	if _, err := env.Kube.CoreV1().ConfigMaps(ns).Create(ctx, cm, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	svc := &corev1.Service{
		ObjectMeta: metav1.ObjectMeta{Name: "web"},
		Spec: corev1.ServiceSpec{Selector: map[string]string{"app": "web"},
			Ports: []corev1.ServicePort{{Port: 80, TargetPort: intstr.FromInt32(8080)}}},
	}
	if _, err := env.Kube.CoreV1().Services(ns).Create(ctx, svc, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	createPod(t, ns, &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: "web", Labels: map[string]string{"app": "web"}},
		Spec: corev1.PodSpec{
			Containers: []corev1.Container{{
				Name: "server", Image: "python:3.11",
				Command: []string{"python3", "/srv/app/main.py"},
				Env: []corev1.EnvVar{
					{Name: "POD_NAME", ValueFrom: &corev1.EnvVarSource{FieldRef: &corev1.ObjectFieldSelector{FieldPath: "metadata.name"}}},
					{Name: "POD_IP", ValueFrom: &corev1.EnvVarSource{FieldRef: &corev1.ObjectFieldSelector{FieldPath: "status.podIP"}}},
					{Name: "GREETING", ValueFrom: &corev1.EnvVarSource{ConfigMapKeyRef: &corev1.ConfigMapKeySelector{
						LocalObjectReference: corev1.LocalObjectReference{Name: "app"}, Key: "greeting"}}},
				},
				VolumeMounts: []corev1.VolumeMount{{Name: "app", MountPath: "/srv/app"}},
				ReadinessProbe: &corev1.Probe{
					ProbeHandler:  corev1.ProbeHandler{HTTPGet: &corev1.HTTPGetAction{Path: "/", Port: intstr.FromInt32(8080)}},
					PeriodSeconds: 1,
				},
			}},
			Volumes: []corev1.Volume{{Name: "app", VolumeSource: corev1.VolumeSource{ConfigMap: &corev1.ConfigMapVolumeSource{
				LocalObjectReference: corev1.LocalObjectReference{Name: "app"}}}}},
		},
	})
	pod := waitPod(t, ns, "web", "the python pod is Ready with a pod IP", func(p *corev1.Pod) error {
		if p.Status.PodIP == "" || !podReady(p) {
			return fmt.Errorf("podIP %q ready %v conditions %v statuses %v", p.Status.PodIP, podReady(p), p.Status.Conditions, p.Status.ContainerStatuses)
		}
		return nil
	})
	if !strings.HasPrefix(pod.Status.PodIP, "10.244.213.") || pod.Status.HostIP != "10.244.213.1" {
		t.Fatalf("pod IP %s, host IP %s: want addresses in %s", pod.Status.PodIP, pod.Status.HostIP, testCIDR)
	}
	resp, err := http.Get("http://" + pod.Status.PodIP + ":8080/")
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	want := fmt.Sprintf("hello from web at %s greeting=hi\n", pod.Status.PodIP)
	if string(body) != want {
		t.Fatalf("GET / = %q, want %q", body, want)
	}
	if _, err := os.Stat("/srv/app/main.py"); err == nil {
		t.Error("the configMap volume leaked into the host's mount namespace at /srv/app")
	}
	kubetest.Eventually(t, 30*time.Second, "the Service's EndpointSlice has the pod IP, ready", func(ctx context.Context) (bool, error) {
		slices, err := env.Kube.DiscoveryV1().EndpointSlices(ns).List(ctx, metav1.ListOptions{LabelSelector: "kubernetes.io/service-name=web"})
		if err != nil {
			return false, err
		}
		for _, s := range slices.Items {
			for _, e := range s.Endpoints {
				if len(e.Addresses) > 0 && e.Addresses[0] == pod.Status.PodIP && e.Conditions.Ready != nil && *e.Conditions.Ready {
					return true, nil
				}
			}
		}
		return false, fmt.Errorf("slices: %v", endpointsOf(slices.Items))
	})
}

func endpointsOf(slices []discoveryv1.EndpointSlice) [][]string {
	var out [][]string
	for _, s := range slices {
		for _, e := range s.Endpoints {
			out = append(out, e.Addresses)
		}
	}
	return out
}

func testPlaceholder(t *testing.T, n *Node) {
	ns := env.Namespace(t)
	createPod(t, ns, &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: "nginx"},
		Spec:       corev1.PodSpec{Containers: []corev1.Container{{Name: "nginx", Image: "nginx:latest"}}},
	})
	want := "image nginx:latest is not run by the local node; a placeholder process stands in"
	waitPod(t, ns, "nginx", "the nginx pod runs a placeholder and says so", func(p *corev1.Pod) error {
		if p.Status.Phase != corev1.PodRunning || !podReady(p) || !strings.Contains(p.Status.Message, want) {
			return fmt.Errorf("phase %s message %q", p.Status.Phase, p.Status.Message)
		}
		return nil
	})
	kubetest.Eventually(t, 10*time.Second, "an event says the image is not run", func(ctx context.Context) (bool, error) {
		evs, err := env.Kube.CoreV1().Events(ns).List(ctx, metav1.ListOptions{})
		if err != nil {
			return false, err
		}
		for _, e := range evs.Items {
			if e.Reason == "PlaceholderImage" && e.Message == want && e.InvolvedObject.Name == "nginx" {
				return true, nil
			}
		}
		return false, fmt.Errorf("%d events, none about the placeholder", len(evs.Items))
	})
}

func testCrashLoop(t *testing.T, n *Node) {
	ns := env.Namespace(t)
	createPod(t, ns, &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: "crash"},
		Spec: corev1.PodSpec{Containers: []corev1.Container{{
			Name: "crash", Image: "python:3.11",
			Command: []string{"python3", "-c", "import sys; print('going down'); sys.exit(3)"},
		}}},
	})
	waitPod(t, ns, "crash", "the crashing container restarts and backs off", func(p *corev1.Pod) error {
		if len(p.Status.ContainerStatuses) != 1 {
			return errors.New("no container status")
		}
		cs := p.Status.ContainerStatuses[0]
		last := cs.LastTerminationState.Terminated
		if cs.RestartCount < 2 || cs.State.Waiting == nil || cs.State.Waiting.Reason != "CrashLoopBackOff" ||
			last == nil || last.ExitCode != 3 || !strings.Contains(last.Message, "going down") {
			return fmt.Errorf("status %+v", cs)
		}
		return nil
	})
	// kubectl logs: the API server proxies to the node's container-log endpoint.
	logs, err := env.Kube.CoreV1().Pods(ns).GetLogs("crash", &corev1.PodLogOptions{Container: "crash"}).Do(kubetest.Context(t)).Raw()
	if err != nil || !strings.Contains(string(logs), "going down") {
		t.Errorf("pod logs = %q, %v; want the container's output", logs, err)
	}
	tail := int64(1)
	logs, err = env.Kube.CoreV1().Pods(ns).GetLogs("crash", &corev1.PodLogOptions{Container: "crash", TailLines: &tail}).Do(kubetest.Context(t)).Raw()
	if err != nil || strings.Count(string(logs), "\n") != 1 {
		t.Errorf("tailLines=1 logs = %q, %v; want one line", logs, err)
	}
}

// statusServer answers GET /live with 500 and anything else with 200, on argv[1].
const statusServer = `
import http.server, sys
class H(http.server.BaseHTTPRequestHandler):
    def do_GET(self):
        self.send_response(500 if self.path == "/live" else 200)
        self.end_headers()
    def log_message(self, *args):
        pass
http.server.HTTPServer(("", int(sys.argv[1])), H).serve_forever()
`

// testProbes covers the probe kinds besides httpGet readiness: a tcpSocket readiness
// probe on a named port, an exec readiness probe run in the pod's network namespace,
// and an httpGet liveness probe whose failure restarts its container.
func testProbes(t *testing.T, n *Node) {
	ns := env.Namespace(t)
	createPod(t, ns, &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: "ready"},
		Spec: corev1.PodSpec{Containers: []corev1.Container{
			{
				Name: "tcp", Image: "python:3.11", Command: []string{"python3", "-c", statusServer, "8080"},
				Ports: []corev1.ContainerPort{{Name: "http", ContainerPort: 8080}},
				ReadinessProbe: &corev1.Probe{
					ProbeHandler:  corev1.ProbeHandler{TCPSocket: &corev1.TCPSocketAction{Port: intstr.FromString("http")}},
					PeriodSeconds: 1,
				},
			},
			{
				Name: "exec", Image: "python:3.11", Command: []string{"python3", "-c", "import time; time.sleep(3600)"},
				ReadinessProbe: &corev1.Probe{
					ProbeHandler: corev1.ProbeHandler{Exec: &corev1.ExecAction{Command: []string{
						"python3", "-c", "import socket; socket.create_connection(('127.0.0.1', 8080), timeout=1).close()"}}},
					PeriodSeconds: 1,
				},
			},
		}},
	})
	waitPod(t, ns, "ready", "both readiness probes pass and the pod is Ready", func(p *corev1.Pod) error {
		ready := 0
		for _, cs := range p.Status.ContainerStatuses {
			if cs.Ready {
				ready++
			}
		}
		if ready != 2 || !podReady(p) {
			return fmt.Errorf("statuses %+v", p.Status.ContainerStatuses)
		}
		return nil
	})

	createPod(t, ns, &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: "unlive"},
		Spec: corev1.PodSpec{Containers: []corev1.Container{{
			Name: "server", Image: "python:3.11", Command: []string{"python3", "-c", statusServer, "8081"},
			LivenessProbe: &corev1.Probe{
				ProbeHandler:     corev1.ProbeHandler{HTTPGet: &corev1.HTTPGetAction{Path: "/live", Port: intstr.FromInt32(8081)}},
				PeriodSeconds:    1,
				FailureThreshold: 2,
			},
		}}},
	})
	waitPod(t, ns, "unlive", "the failing liveness probe restarts the container", func(p *corev1.Pod) error {
		if len(p.Status.ContainerStatuses) != 1 || p.Status.ContainerStatuses[0].RestartCount < 1 {
			return fmt.Errorf("statuses %+v", p.Status.ContainerStatuses)
		}
		return nil
	})
}

// testDelete deletes a running pod whose container started a grandchild in a
// session of its own: every process of the pod, the grandchild too, dies, and
// its address, network namespace and directory go.
func testDelete(t *testing.T, n *Node) {
	ns := env.Namespace(t)
	ctx := kubetest.Context(t)
	marker := "ml-grandchild-" + strconv.Itoa(os.Getpid())
	script := `import os, time
if os.fork() == 0:
    os.setsid()
    if os.fork() == 0:
        os.execv("/usr/bin/sleep", [` + strconv.Quote(marker) + `, "3600"])
    os._exit(0)
time.sleep(3600)
`
	createPod(t, ns, &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: "doomed"},
		Spec: corev1.PodSpec{Containers: []corev1.Container{{
			Name: "sleeper", Image: "python:3.11",
			Command: []string{"python3", "-c", script},
		}}},
	})
	pod := waitPod(t, ns, "doomed", "the pod runs", func(p *corev1.Pod) error {
		if p.Status.Phase != corev1.PodRunning || p.Status.PodIP == "" {
			return fmt.Errorf("phase %s", p.Status.Phase)
		}
		return nil
	})
	kubetest.Eventually(t, 10*time.Second, "the grandchild runs", func(context.Context) (bool, error) {
		return len(pidsWith(marker)) == 1, nil
	})
	w := workerOf(n, pod)
	if w == nil {
		t.Fatal("no worker for the pod")
	}
	pids := containerPIDs(w)
	ipFile := filepath.Join(n.opts.StateDir, "cni", "networks", cniNetwork, pod.Status.PodIP)
	if _, err := os.Stat(ipFile); err != nil {
		t.Fatalf("the pod's address is not allocated: %v", err)
	}
	if err := env.Kube.CoreV1().Pods(ns).Delete(ctx, "doomed", metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	kubetest.Eventually(t, 30*time.Second, "the Pod object goes away", func(ctx context.Context) (bool, error) {
		_, err := env.Kube.CoreV1().Pods(ns).Get(ctx, "doomed", metav1.GetOptions{})
		return apierrors.IsNotFound(err), err
	})
	for _, pid := range pids {
		if alive(pid) {
			t.Errorf("process %d survived the pod", pid)
		}
	}
	if left := pidsWith(marker); len(left) > 0 {
		t.Errorf("the container's grandchild survived the pod: %v", left)
	}
	if _, err := os.Stat(netnsPath(w.netns)); err == nil {
		t.Errorf("network namespace %s survived the pod", w.netns)
	}
	if _, err := os.Stat(ipFile); err == nil {
		t.Errorf("address %s is still allocated", pod.Status.PodIP)
	}
	if _, err := os.Stat(w.dir); err == nil {
		t.Errorf("pod directory %s survived the pod", w.dir)
	}
}

// claimScript reads and writes the claim mounted read-write at /srv/claim/rw and
// tries to write where the same claim is mounted readOnly, at /srv/claim/ro.
const claimScript = `
import time
print("read: " + open("/srv/claim/rw/in").read(), flush=True)
open("/srv/claim/rw/out", "w").write("written by the pod")
try:
    open("/srv/claim/ro/refused", "w").write("x")
    print("the readOnly mount took a write", flush=True)
except OSError as e:
    print("the readOnly mount refused a write: errno %d" % e.errno, flush=True)
time.sleep(3600)
`

// testClaims: a pod whose claim is not bound waits with an event; once a volume is
// bound to the claim the pod runs with the volume's directory at its mountPath, the
// claim's readOnly honoured; after the pod, the claim and the volume go away, with
// no finalizer left holding them.
func testClaims(t *testing.T, n *Node) {
	ns := env.Namespace(t)
	ctx := kubetest.Context(t)
	noClass := ""
	claim := &corev1.PersistentVolumeClaim{
		ObjectMeta: metav1.ObjectMeta{Name: "data"},
		Spec: corev1.PersistentVolumeClaimSpec{
			StorageClassName: &noClass,
			AccessModes:      []corev1.PersistentVolumeAccessMode{corev1.ReadWriteOnce},
			Resources:        corev1.VolumeResourceRequirements{Requests: corev1.ResourceList{corev1.ResourceStorage: resource.MustParse("1Mi")}},
		},
	}
	if _, err := env.Kube.CoreV1().PersistentVolumeClaims(ns).Create(ctx, claim, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	claimVolume := func(name string, readOnly bool) corev1.Volume {
		return corev1.Volume{Name: name, VolumeSource: corev1.VolumeSource{PersistentVolumeClaim: &corev1.PersistentVolumeClaimVolumeSource{
			ClaimName: "data", ReadOnly: readOnly}}}
	}
	// Bound to the node directly: the scheduler would not place a pod whose claim is
	// unbound.
	createPod(t, ns, &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: "claimer"},
		Spec: corev1.PodSpec{
			NodeName: "local-test",
			Containers: []corev1.Container{{
				Name: "c", Image: "python:3.11", Command: []string{"python3", "-c", claimScript},
				VolumeMounts: []corev1.VolumeMount{{Name: "rw", MountPath: "/srv/claim/rw"}, {Name: "ro", MountPath: "/srv/claim/ro"}},
			}},
			Volumes: []corev1.Volume{claimVolume("rw", false), claimVolume("ro", true)},
		},
	})
	waiting := `persistentVolumeClaim "data" is not bound yet (phase Pending); the pod waits for it`
	kubetest.Eventually(t, 30*time.Second, "the pod waits for its claim, with an event saying so", func(ctx context.Context) (bool, error) {
		p, err := env.Kube.CoreV1().Pods(ns).Get(ctx, "claimer", metav1.GetOptions{})
		if err != nil {
			return false, err
		}
		if p.Status.Phase != corev1.PodPending || !strings.Contains(p.Status.Message, waiting) {
			return false, fmt.Errorf("phase %s message %q", p.Status.Phase, p.Status.Message)
		}
		evs, err := env.Kube.CoreV1().Events(ns).List(ctx, metav1.ListOptions{})
		if err != nil {
			return false, err
		}
		for _, e := range evs.Items {
			if e.Reason == "FailedMount" && e.Type == corev1.EventTypeWarning && strings.Contains(e.Message, waiting) && e.InvolvedObject.Name == "claimer" {
				return true, nil
			}
		}
		return false, fmt.Errorf("%d events, none FailedMount saying %q", len(evs.Items), waiting)
	})

	// Writable by every user, as the local provisioner makes its volumes: the
	// pod runs as a user of its own.
	dir := t.TempDir()
	if err := os.Chmod(dir, 0o777); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "in"), []byte("prepared data"), 0o644); err != nil {
		t.Fatal(err)
	}
	pv := &corev1.PersistentVolume{
		ObjectMeta: metav1.ObjectMeta{Name: "claims-" + ns},
		Spec: corev1.PersistentVolumeSpec{
			Capacity:               corev1.ResourceList{corev1.ResourceStorage: resource.MustParse("1Mi")},
			AccessModes:            []corev1.PersistentVolumeAccessMode{corev1.ReadWriteOnce},
			ClaimRef:               &corev1.ObjectReference{Namespace: ns, Name: "data"},
			PersistentVolumeSource: corev1.PersistentVolumeSource{Local: &corev1.LocalVolumeSource{Path: dir}},
			NodeAffinity: &corev1.VolumeNodeAffinity{Required: &corev1.NodeSelector{NodeSelectorTerms: []corev1.NodeSelectorTerm{{
				MatchExpressions: []corev1.NodeSelectorRequirement{{Key: "kubernetes.io/hostname", Operator: corev1.NodeSelectorOpIn, Values: []string{"local-test"}}},
			}}}},
		},
	}
	if _, err := env.Kube.CoreV1().PersistentVolumes().Create(ctx, pv, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	waitPod(t, ns, "claimer", "the pod runs once the binder binds its claim", func(p *corev1.Pod) error {
		if p.Status.Phase != corev1.PodRunning {
			return fmt.Errorf("phase %s message %q", p.Status.Phase, p.Status.Message)
		}
		return nil
	})
	kubetest.Eventually(t, 30*time.Second, "the pod read the volume and wrote to it, not through the readOnly mount", func(ctx context.Context) (bool, error) {
		logs, err := env.Kube.CoreV1().Pods(ns).GetLogs("claimer", &corev1.PodLogOptions{Container: "c"}).Do(ctx).Raw()
		if err != nil {
			return false, err
		}
		out, _ := os.ReadFile(filepath.Join(dir, "out"))
		ok := strings.Contains(string(logs), "read: prepared data") && strings.Contains(string(logs), "the readOnly mount refused a write") &&
			string(out) == "written by the pod"
		return ok, fmt.Errorf("logs %q, out %q", logs, out)
	})
	if _, err := os.Stat(filepath.Join(dir, "refused")); err == nil {
		t.Error("a file was written through the readOnly mount")
	}

	// The claim protection finalizer holds the claim until its pod is gone, then
	// lets it go; the released volume is deleted here (its reclaim policy is Retain).
	if err := env.Kube.CoreV1().PersistentVolumeClaims(ns).Delete(ctx, "data", metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	if err := env.Kube.CoreV1().Pods(ns).Delete(ctx, "claimer", metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	kubetest.Eventually(t, time.Minute, "the pod and the claim go away", func(ctx context.Context) (bool, error) {
		_, perr := env.Kube.CoreV1().Pods(ns).Get(ctx, "claimer", metav1.GetOptions{})
		c, cerr := env.Kube.CoreV1().PersistentVolumeClaims(ns).Get(ctx, "data", metav1.GetOptions{})
		if cerr == nil {
			return false, fmt.Errorf("the claim remains, finalizers %v (pod: %v)", c.Finalizers, perr)
		}
		return apierrors.IsNotFound(perr) && apierrors.IsNotFound(cerr), fmt.Errorf("pod: %v, claim: %v", perr, cerr)
	})
	if err := env.Kube.CoreV1().PersistentVolumes().Delete(ctx, pv.Name, metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	kubetest.Eventually(t, 30*time.Second, "the volume goes away", func(ctx context.Context) (bool, error) {
		v, err := env.Kube.CoreV1().PersistentVolumes().Get(ctx, pv.Name, metav1.GetOptions{})
		if err == nil {
			return false, fmt.Errorf("the volume remains, phase %s, finalizers %v", v.Status.Phase, v.Finalizers)
		}
		return apierrors.IsNotFound(err), err
	})
	if _, err := os.Stat(filepath.Join(dir, "out")); err != nil {
		t.Errorf("the data of a Retain volume went with it: %v", err)
	}
}

// podLogs reads a container's log through the API server, as `kubectl logs` does.
func podLogs(t *testing.T, ns, pod, container string) string {
	t.Helper()
	logs, err := env.Kube.CoreV1().Pods(ns).GetLogs(pod, &corev1.PodLogOptions{Container: container}).Do(kubetest.Context(t)).Raw()
	if err != nil {
		t.Fatalf("logs of %s/%s: %v", pod, container, err)
	}
	return string(logs)
}

// terminated returns the container's state if it terminated.
func terminated(p *corev1.Pod) (*corev1.ContainerStateTerminated, int32) {
	if len(p.Status.ContainerStatuses) != 1 {
		return nil, 0
	}
	cs := p.Status.ContainerStatuses[0]
	return cs.State.Terminated, cs.RestartCount
}

// testBusyboxJob runs a busybox pod's shell command with the host's sh, with its env
// and workingDir, to Succeeded.
func testBusyboxJob(t *testing.T, n *Node) {
	ns := env.Namespace(t)
	cm := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "job"}, Data: map[string]string{"input.txt": "x"}}
	if _, err := env.Kube.CoreV1().ConfigMaps(ns).Create(kubetest.Context(t), cm, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	createPod(t, ns, &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: "job-3"},
		Spec: corev1.PodSpec{
			RestartPolicy: corev1.RestartPolicyNever,
			Containers: []corev1.Container{{
				Name: "job", Image: "busybox:1.36",
				Command:      []string{"sh", "-c", "echo ${JOB_INDEX}; pwd; ls"},
				Env:          []corev1.EnvVar{{Name: "JOB_INDEX", Value: "3"}},
				WorkingDir:   "/srv/job",
				VolumeMounts: []corev1.VolumeMount{{Name: "work", MountPath: "/srv/job"}},
			}},
			Volumes: []corev1.Volume{{Name: "work", VolumeSource: corev1.VolumeSource{ConfigMap: &corev1.ConfigMapVolumeSource{
				LocalObjectReference: corev1.LocalObjectReference{Name: "job"}}}}},
		},
	})
	waitPod(t, ns, "job-3", "the busybox job succeeds", func(p *corev1.Pod) error {
		term, _ := terminated(p)
		if p.Status.Phase != corev1.PodSucceeded || term == nil || term.ExitCode != 0 || term.Reason != "Completed" {
			return fmt.Errorf("phase %s statuses %+v", p.Status.Phase, p.Status.ContainerStatuses)
		}
		if strings.Contains(p.Status.Message, "placeholder") {
			return fmt.Errorf("message %q", p.Status.Message)
		}
		return nil
	})
	if got, want := podLogs(t, ns, "job-3", "job"), "3\n/srv/job\ninput.txt\n"; got != want {
		t.Errorf("kubectl logs = %q, want %q", got, want)
	}
}

// testOnFailure: a container that fails once is restarted, then succeeds; its state
// lives in an emptyDir, which outlives the restart.
func testOnFailure(t *testing.T, n *Node) {
	ns := env.Namespace(t)
	createPod(t, ns, &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: "flaky"},
		Spec: corev1.PodSpec{
			RestartPolicy: corev1.RestartPolicyOnFailure,
			Containers: []corev1.Container{{
				Name: "flaky", Image: "alpine:3.20",
				Command:      []string{"sh", "-c", "if [ -e /srv/flaky/ran ]; then echo second run; exit 0; fi; touch /srv/flaky/ran; echo first run; exit 1"},
				VolumeMounts: []corev1.VolumeMount{{Name: "state", MountPath: "/srv/flaky"}},
			}},
			Volumes: []corev1.Volume{{Name: "state", VolumeSource: corev1.VolumeSource{EmptyDir: &corev1.EmptyDirVolumeSource{}}}},
		},
	})
	p := waitPod(t, ns, "flaky", "the failed container is restarted once and the pod succeeds", func(p *corev1.Pod) error {
		term, restarts := terminated(p)
		if p.Status.Phase != corev1.PodSucceeded || term == nil || term.ExitCode != 0 || restarts != 1 {
			return fmt.Errorf("phase %s statuses %+v", p.Status.Phase, p.Status.ContainerStatuses)
		}
		return nil
	})
	if last := p.Status.ContainerStatuses[0].LastTerminationState.Terminated; last == nil || last.ExitCode != 1 {
		t.Errorf("last termination %+v, want exit code 1", p.Status.ContainerStatuses[0].LastTerminationState)
	}
	if got := podLogs(t, ns, "flaky", "flaky"); got != "first run\nsecond run\n" {
		t.Errorf("logs %q, want both runs", got)
	}
}

// testNever: a container that fails is not restarted and fails the pod.
func testNever(t *testing.T, n *Node) {
	ns := env.Namespace(t)
	createPod(t, ns, &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: "once"},
		Spec: corev1.PodSpec{
			RestartPolicy: corev1.RestartPolicyNever,
			Containers: []corev1.Container{{
				Name: "once", Image: "debian:12", Command: []string{"sh", "-c", "echo failing; exit 2"},
			}},
		},
	})
	waitPod(t, ns, "once", "the pod fails with exit code 2", func(p *corev1.Pod) error {
		term, restarts := terminated(p)
		if p.Status.Phase != corev1.PodFailed || term == nil || term.ExitCode != 2 || term.Reason != "Error" || restarts != 0 {
			return fmt.Errorf("phase %s statuses %+v", p.Status.Phase, p.Status.ContainerStatuses)
		}
		return nil
	})
	// Failed is final: the container is not started again.
	time.Sleep(3 * time.Second)
	p, err := env.Kube.CoreV1().Pods(ns).Get(kubetest.Context(t), "once", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if term, restarts := terminated(p); p.Status.Phase != corev1.PodFailed || term == nil || restarts != 0 {
		t.Errorf("after a while: phase %s statuses %+v", p.Status.Phase, p.Status.ContainerStatuses)
	}
}

// testInitContainers runs init containers in order before the container, sharing an
// emptyDir with it; a failing one under restartPolicy Never fails the pod, its log
// in the termination message, and the container never starts.
func testInitContainers(t *testing.T, n *Node) {
	ns := env.Namespace(t)
	mount := []corev1.VolumeMount{{Name: "work", MountPath: "/ml-init-test-work"}}
	volumes := []corev1.Volume{{Name: "work", VolumeSource: corev1.VolumeSource{EmptyDir: &corev1.EmptyDirVolumeSource{}}}}
	createPod(t, ns, &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: "inits"},
		Spec: corev1.PodSpec{
			Volumes: volumes,
			InitContainers: []corev1.Container{
				{Name: "first", Image: "busybox", Command: []string{"sh", "-c", "sleep 1; echo one > /ml-init-test-work/log"}, VolumeMounts: mount},
				{Name: "second", Image: "busybox", Command: []string{"sh", "-c", "echo two >> /ml-init-test-work/log"}, VolumeMounts: mount},
			},
			Containers: []corev1.Container{{
				Name: "main", Image: "busybox", VolumeMounts: mount,
				Command: []string{"sh", "-c", "cat /ml-init-test-work/log; exec sleep 3600"},
			}},
		},
	})
	waitPod(t, ns, "inits", "the init containers succeed in order and the container runs", func(p *corev1.Pod) error {
		inits := p.Status.InitContainerStatuses
		if p.Status.Phase != corev1.PodRunning || len(inits) != 2 || !podCondition(p, corev1.PodInitialized) {
			return fmt.Errorf("phase %s init statuses %+v", p.Status.Phase, inits)
		}
		for _, s := range inits {
			if s.State.Terminated == nil || s.State.Terminated.ExitCode != 0 {
				return fmt.Errorf("init container %s: %+v", s.Name, s.State)
			}
		}
		return nil
	})
	kubetest.Eventually(t, 30*time.Second, "the container saw both init containers' output", func(ctx context.Context) (bool, error) {
		log, err := env.Kube.CoreV1().Pods(ns).GetLogs("inits", &corev1.PodLogOptions{Container: "main"}).DoRaw(ctx)
		return string(log) == "one\ntwo\n", fmt.Errorf("log %q %v", log, err)
	})

	createPod(t, ns, &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: "init-fails"},
		Spec: corev1.PodSpec{
			RestartPolicy: corev1.RestartPolicyNever,
			InitContainers: []corev1.Container{{
				Name: "install", Image: "busybox", Command: []string{"sh", "-c", "echo 'ERROR: No matching distribution found for nosuchpkg' >&2; exit 3"},
				TerminationMessagePolicy: corev1.TerminationMessageFallbackToLogsOnError,
			}},
			Containers: []corev1.Container{{Name: "main", Image: "busybox", Command: []string{"sleep", "3600"}}},
		},
	})
	waitPod(t, ns, "init-fails", "the pod fails with the init container's message", func(p *corev1.Pod) error {
		inits := p.Status.InitContainerStatuses
		if p.Status.Phase != corev1.PodFailed || len(inits) != 1 || inits[0].State.Terminated == nil {
			return fmt.Errorf("phase %s init statuses %+v", p.Status.Phase, inits)
		}
		term := inits[0].State.Terminated
		if term.ExitCode != 3 || !strings.Contains(term.Message, "No matching distribution found for nosuchpkg") {
			return fmt.Errorf("terminated %+v", term)
		}
		if cs := p.Status.ContainerStatuses; len(cs) != 1 || cs[0].State.Waiting == nil || cs[0].State.Waiting.Reason != "PodInitializing" {
			return fmt.Errorf("container statuses %+v", cs)
		}
		return nil
	})
}

func podCondition(p *corev1.Pod, t corev1.PodConditionType) bool {
	for _, c := range p.Status.Conditions {
		if c.Type == t {
			return c.Status == corev1.ConditionTrue
		}
	}
	return false
}

const nodeScript = `const os = require("os");
console.log("hello from node " + process.versions.node.split(".")[0] + " as " + process.env.WHO + " in " + process.cwd());
`

// testNodeImage runs a script in a node image with the host's Node.js, through the
// image's entrypoint rules (args naming a script file run under node).
func testNodeImage(t *testing.T, n *Node) {
	if n.opts.NodeJS == "" {
		t.Skip("no Node.js on this host")
	}
	ns := env.Namespace(t)
	cm := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "js"}, Data: map[string]string{"app.js": nodeScript}}
	if _, err := env.Kube.CoreV1().ConfigMaps(ns).Create(kubetest.Context(t), cm, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	createPod(t, ns, &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: "js"},
		Spec: corev1.PodSpec{
			RestartPolicy: corev1.RestartPolicyNever,
			Containers: []corev1.Container{{
				Name: "js", Image: "node:20", Args: []string{"app.js"}, WorkingDir: "/srv/js",
				Env:          []corev1.EnvVar{{Name: "WHO", Value: "a pod"}},
				VolumeMounts: []corev1.VolumeMount{{Name: "js", MountPath: "/srv/js"}},
			}},
			Volumes: []corev1.Volume{{Name: "js", VolumeSource: corev1.VolumeSource{ConfigMap: &corev1.ConfigMapVolumeSource{
				LocalObjectReference: corev1.LocalObjectReference{Name: "js"}}}}},
		},
	})
	waitPod(t, ns, "js", "the node script succeeds", func(p *corev1.Pod) error {
		if term, _ := terminated(p); p.Status.Phase != corev1.PodSucceeded || term == nil {
			return fmt.Errorf("phase %s statuses %+v", p.Status.Phase, p.Status.ContainerStatuses)
		}
		return nil
	})
	out, err := exec.Command(n.opts.NodeJS, "-p", `process.versions.node.split(".")[0]`).Output()
	if err != nil {
		t.Fatal(err)
	}
	want := fmt.Sprintf("hello from node %s as a pod in /srv/js\n", strings.TrimSpace(string(out)))
	if got := podLogs(t, ns, "js", "js"); got != want {
		t.Errorf("logs %q, want %q", got, want)
	}
}

// testRelativeMountPath: a relative mountPath is refused with an event and a status
// that say why; the pod does not start and the node keeps running other pods.
func testRelativeMountPath(t *testing.T, n *Node) {
	ns := env.Namespace(t)
	createPod(t, ns, &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: "relative"},
		Spec: corev1.PodSpec{
			Containers: []corev1.Container{{
				Name: "c", Image: "busybox", Command: []string{"sleep", "3600"},
				VolumeMounts: []corev1.VolumeMount{{Name: "data", MountPath: "data"}},
			}},
			Volumes: []corev1.Volume{{Name: "data", VolumeSource: corev1.VolumeSource{EmptyDir: &corev1.EmptyDirVolumeSource{}}}},
		},
	})
	want := `container c: volumeMount data: mountPath "data" is not an absolute path`
	waitPod(t, ns, "relative", "the pod waits with CreateContainerConfigError", func(p *corev1.Pod) error {
		if p.Status.Phase != corev1.PodPending || len(p.Status.ContainerStatuses) != 1 || p.Status.Message != want {
			return fmt.Errorf("phase %s message %q statuses %+v", p.Status.Phase, p.Status.Message, p.Status.ContainerStatuses)
		}
		w := p.Status.ContainerStatuses[0].State.Waiting
		if w == nil || w.Reason != "CreateContainerConfigError" || w.Message != want {
			return fmt.Errorf("state %+v", p.Status.ContainerStatuses[0].State)
		}
		return nil
	})
	kubetest.Eventually(t, 10*time.Second, "an event says why the pod cannot start", func(ctx context.Context) (bool, error) {
		evs, err := env.Kube.CoreV1().Events(ns).List(ctx, metav1.ListOptions{})
		if err != nil {
			return false, err
		}
		for _, e := range evs.Items {
			if e.Reason == "Failed" && e.Type == corev1.EventTypeWarning && e.Message == "Error: "+want {
				return true, nil
			}
		}
		return false, fmt.Errorf("%d events, none about the mount path", len(evs.Items))
	})
	createPod(t, ns, &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: "after"},
		Spec: corev1.PodSpec{RestartPolicy: corev1.RestartPolicyNever,
			Containers: []corev1.Container{{Name: "c", Image: "busybox", Command: []string{"true"}}}},
	})
	waitPod(t, ns, "after", "the node still runs pods", func(p *corev1.Pod) error {
		if p.Status.Phase != corev1.PodSucceeded {
			return fmt.Errorf("phase %s", p.Status.Phase)
		}
		return nil
	})
	if err := env.Kube.CoreV1().Pods(ns).Delete(kubetest.Context(t), "relative", metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	kubetest.Eventually(t, 30*time.Second, "the refused pod can be deleted", func(ctx context.Context) (bool, error) {
		_, err := env.Kube.CoreV1().Pods(ns).Get(ctx, "relative", metav1.GetOptions{})
		return apierrors.IsNotFound(err), err
	})
}

// testSubPathLinkedAfterStart is the attack of a container on its own subPath:
// it replaces the subPath's directory in its volume with a link to a host
// directory and exits, so that the node's next start of it would bind what
// the link points to. The node opens a subPath at every start without
// following links: the restart is refused, naming the link, and the host
// directory never shows.
func testSubPathLinkedAfterStart(t *testing.T, n *Node) {
	ns := env.Namespace(t)
	host := t.TempDir()
	if err := os.WriteFile(filepath.Join(host, "escaped"), []byte("host"), 0o644); err != nil {
		t.Fatal(err)
	}
	script := `if [ -e /s/escaped ]; then echo ESCAPED; fi
if [ -L /v/sub ]; then echo "run again"; sleep 3600; fi
while [ ! -e /v/target ]; do sleep 0.1; done
rm -rf /v/sub && ln -s "$(cat /v/target)" /v/sub && echo "link made" && exit 1`
	createPod(t, ns, &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: "subpath-link"},
		Spec: corev1.PodSpec{
			Containers: []corev1.Container{{
				Name: "c", Image: "busybox", Command: []string{"sh", "-c", script},
				VolumeMounts: []corev1.VolumeMount{{Name: "data", MountPath: "/v"}, {Name: "data", MountPath: "/s", SubPath: "sub"}},
			}},
			Volumes: []corev1.Volume{{Name: "data", VolumeSource: corev1.VolumeSource{EmptyDir: &corev1.EmptyDirVolumeSource{}}}},
		},
	})
	pod := waitPod(t, ns, "subpath-link", "the pod runs", func(p *corev1.Pod) error {
		if p.Status.Phase != corev1.PodRunning {
			return fmt.Errorf("phase %s", p.Status.Phase)
		}
		return nil
	})
	// The link is relative: bubblewrap resolves a bind's source below its old
	// root, where an absolute link would lead nowhere.
	w := workerOf(n, pod)
	w.mu.Lock()
	volume := w.volumeDirs["data"]
	w.mu.Unlock()
	rel, err := filepath.Rel(volume, host)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(volume, "target"), []byte(rel), 0o644); err != nil {
		t.Fatal(err)
	}
	p := waitPod(t, ns, "subpath-link", "the container exits and its restart is decided", func(p *corev1.Pod) error {
		if strings.Contains(podLogs(t, ns, "subpath-link", "c"), "run again") {
			return nil // it started again: the checks below say how
		}
		if len(p.Status.ContainerStatuses) != 1 {
			return errors.New("no container status")
		}
		if wt := p.Status.ContainerStatuses[0].State.Waiting; wt == nil || wt.Reason != "CreateContainerConfigError" {
			return fmt.Errorf("status %+v", p.Status.ContainerStatuses[0])
		}
		return nil
	})
	logs := podLogs(t, ns, "subpath-link", "c")
	if !strings.Contains(logs, "link made") || strings.Contains(logs, "ESCAPED") || strings.Contains(logs, "run again") {
		t.Errorf("logs %q: want the link made, and no start after it", logs)
	}
	if wt := p.Status.ContainerStatuses[0].State.Waiting; wt == nil || !strings.Contains(wt.Message, "symbolic link sub ") {
		t.Errorf("state %+v, want a refusal naming the link sub", p.Status.ContainerStatuses[0].State)
	}
}

// testLogEndpointAuth: the node's log endpoint refuses clients without the API
// server's client certificate and names that are not the pod's containers.
func testLogEndpointAuth(t *testing.T, n *Node) {
	ns := env.Namespace(t)
	createPod(t, ns, &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: "talker"},
		Spec: corev1.PodSpec{RestartPolicy: corev1.RestartPolicyNever,
			Containers: []corev1.Container{{Name: "talk", Image: "busybox", Command: []string{"echo", "said it"}}}},
	})
	waitPod(t, ns, "talker", "the pod succeeds", func(p *corev1.Pod) error {
		if p.Status.Phase != corev1.PodSucceeded {
			return fmt.Errorf("phase %s", p.Status.Phase)
		}
		return nil
	})
	// A .log file outside the pod's log directory, which a traversal would reach.
	secret := filepath.Join(n.opts.StateDir, "secret.log")
	if err := os.WriteFile(secret, []byte("host secret\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.Remove(secret) })
	base := fmt.Sprintf("https://%s:%d/containerLogs/%s/talker/", n.net.gw, n.opts.KubeletPort, ns)

	anonymous := &http.Client{Transport: &http.Transport{TLSClientConfig: &tls.Config{InsecureSkipVerify: true}}}
	if resp, err := anonymous.Get(base + "talk"); err == nil {
		resp.Body.Close()
		t.Errorf("a client without a certificate got %s", resp.Status)
	}
	other, err := selfSignedClientCert()
	if err != nil {
		t.Fatal(err)
	}
	stranger := &http.Client{Transport: &http.Transport{TLSClientConfig: &tls.Config{InsecureSkipVerify: true, Certificates: []tls.Certificate{other}}}}
	if resp, err := stranger.Get(base + "talk"); err == nil {
		resp.Body.Close()
		t.Errorf("a client with a certificate of another CA got %s", resp.Status)
	}

	cert, err := tls.LoadX509KeyPair(env.Cluster.KubeletClientCert, env.Cluster.KubeletClientKey)
	if err != nil {
		t.Fatal(err)
	}
	apiserver := &http.Client{Transport: &http.Transport{TLSClientConfig: &tls.Config{InsecureSkipVerify: true, Certificates: []tls.Certificate{cert}}}}
	get := func(name string) (int, string) {
		resp, err := apiserver.Get(base + name)
		if err != nil {
			t.Fatalf("GET %s: %v", name, err)
		}
		defer resp.Body.Close()
		body, _ := io.ReadAll(resp.Body)
		return resp.StatusCode, string(body)
	}
	if code, body := get("talk"); code != http.StatusOK || body != "said it\n" {
		t.Errorf("the API server's certificate: %d %q", code, body)
	}
	for _, name := range []string{"..%2F..%2F..%2Fsecret", "..%2F..%2F..%2F..%2Fnode%2Fsecret", "nope"} {
		if code, body := get(name); code != http.StatusNotFound || strings.Contains(body, "host secret") {
			t.Errorf("container %s: %d %q, want 404", name, code, body)
		}
	}
}

// selfSignedClientCert is a client certificate no CA the node trusts has signed.
func selfSignedClientCert() (tls.Certificate, error) {
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return tls.Certificate{}, err
	}
	tmpl := &x509.Certificate{
		SerialNumber: big.NewInt(7), Subject: pkix.Name{CommonName: cluster.KubeletClientUser},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(time.Hour),
		KeyUsage: x509.KeyUsageDigitalSignature, ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageClientAuth},
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		return tls.Certificate{}, err
	}
	return tls.Certificate{Certificate: [][]byte{der}, PrivateKey: key}, nil
}

func createPod(t *testing.T, ns string, pod *corev1.Pod) {
	t.Helper()
	zero := int64(5)
	pod.Spec.TerminationGracePeriodSeconds = &zero
	if _, err := env.Kube.CoreV1().Pods(ns).Create(kubetest.Context(t), pod, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
}

func waitPod(t *testing.T, ns, name, what string, check func(*corev1.Pod) error) *corev1.Pod {
	t.Helper()
	var got *corev1.Pod
	kubetest.Eventually(t, 60*time.Second, what, func(ctx context.Context) (bool, error) {
		p, err := env.Kube.CoreV1().Pods(ns).Get(ctx, name, metav1.GetOptions{})
		if err != nil {
			return false, err
		}
		if err := check(p); err != nil {
			return false, err
		}
		got = p
		return true, nil
	})
	return got
}

func podReady(p *corev1.Pod) bool {
	for _, c := range p.Status.Conditions {
		if c.Type == corev1.PodReady {
			return c.Status == corev1.ConditionTrue
		}
	}
	return false
}

func workerOf(n *Node, pod *corev1.Pod) *podWorker {
	n.mu.Lock()
	defer n.mu.Unlock()
	return n.workers[pod.UID]
}

func containerPIDs(w *podWorker) []int {
	w.mu.Lock()
	defer w.mu.Unlock()
	var out []int
	for _, c := range w.containers {
		c.mu.Lock()
		out = append(out, c.pid)
		c.mu.Unlock()
	}
	return out
}

// pidsWith returns the processes whose argv[0] is arg.
func pidsWith(arg string) []string {
	paths, _ := filepath.Glob("/proc/[0-9]*/cmdline")
	var pids []string
	for _, p := range paths {
		raw, err := os.ReadFile(p)
		if err == nil && strings.HasPrefix(string(raw), arg+"\x00") {
			pids = append(pids, filepath.Base(filepath.Dir(p)))
		}
	}
	return pids
}

func alive(pid int) bool {
	return pid > 0 && syscall.Kill(pid, 0) == nil
}

// runNode starts a node of opts (with the tests' back-off and heartbeat) until
// the test ends; its cleanup stops it, checks that it left nothing behind, then
// runs after.
func runNode(t *testing.T, kube kubernetes.Interface, opts Options, after func()) *Node {
	t.Helper()
	opts.BackoffInitial, opts.BackoffMax, opts.HeartbeatInterval = time.Second, 4*time.Second, 2*time.Second
	n, err := New(kube, opts)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- n.Run(ctx) }()
	t.Cleanup(func() {
		cancel()
		select {
		case err := <-done:
			if err != nil {
				t.Errorf("Run: %v", err)
			}
		case <-time.After(time.Minute):
			t.Fatal("Run did not return within a minute of cancel")
		}
		assertNoLeftovers(t, n)
		if after != nil {
			after()
		}
	})
	return n
}

func assertNoLeftovers(t *testing.T, n *Node) {
	for _, pid := range n.StartedPIDs() {
		if alive(pid) {
			t.Errorf("process %d started by the node is still running", pid)
		}
	}
	// Only this node's namespaces: other test packages may run nodes meanwhile.
	for _, name := range n.PodNetworkNamespaces() {
		if _, err := os.Stat(netnsPath(name)); err == nil {
			t.Errorf("network namespace %s of a pod was left behind", name)
		}
	}
	out, _ := exec.Command("ip", "-o", "link", "show").CombinedOutput()
	for _, line := range strings.Split(string(out), "\n") {
		if strings.Contains(line, testBridge) {
			t.Errorf("link left behind: %s", line)
		}
	}
	out, _ = exec.Command("ip", "-o", "addr", "show").CombinedOutput()
	if prefix := strings.TrimSuffix(testServiceRange, "0/24"); strings.Contains(string(out), " "+prefix) {
		t.Errorf("ClusterIP addresses of %s left behind:\n%s", testServiceRange, out)
	}
	for _, dir := range []string{"/srv/app", "/srv/job", "/srv/flaky", "/srv/js", "/srv/claim"} {
		if _, err := os.Stat(dir); err == nil {
			t.Errorf("mount point %s created by the node was not removed", dir)
		}
	}
	if entries, _ := os.ReadDir(filepath.Join(n.opts.StateDir, "pods")); len(entries) > 0 {
		t.Errorf("pod directories left behind: %v", entries)
	}
	if left := sandboxCgroups(); len(left) > 0 {
		t.Errorf("cgroups of the node's sandbox left behind: %v", left)
	}
}

// sandboxCgroups are the cgroup directories the sandboxes of this process made
// (metalambda-<pid>, under its own cgroups), in every hierarchy.
func sandboxCgroups() []string {
	raw, _ := os.ReadFile("/proc/self/cgroup")
	var out []string
	for line := range strings.Lines(string(raw)) {
		parts := strings.SplitN(strings.TrimSpace(line), ":", 3)
		if len(parts) != 3 {
			continue
		}
		found, _ := filepath.Glob(filepath.Join("/sys/fs/cgroup/*", parts[2], "metalambda-"+strconv.Itoa(os.Getpid())))
		v2, _ := filepath.Glob(filepath.Join("/sys/fs/cgroup", parts[2], "metalambda-"+strconv.Itoa(os.Getpid())))
		out = append(append(out, found...), v2...)
	}
	slices.Sort(out)
	return slices.Compact(out)
}
