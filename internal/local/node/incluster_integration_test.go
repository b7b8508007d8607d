//go:build integration

package node

import (
	"context"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"

	"github.com/metalambda/metalambda/internal/kubetest"
)

// testServiceRange is the test cluster's Service range (TestMain), kept off the
// default so a running local platform's ClusterIPs do not collide with the tests'.
const testServiceRange = "10.97.213.0/24"

// inClusterImageName is the image the node runs as the in-cluster client.
const inClusterImageName = "metalambda.test/incluster"

// inClusterImage builds the in-cluster client and maps inClusterImageName to it,
// as the platform maps its component images to its binaries: a container sees
// its image's entrypoint, not the host's files.
func inClusterImage(t *testing.T) ImageRule {
	bin := filepath.Join(t.TempDir(), "incluster")
	build := exec.Command("go", "build", "-o", bin, "./testdata/incluster")
	if out, err := build.CombinedOutput(); err != nil {
		t.Fatalf("go build: %v\n%s", err, out)
	}
	return ImageRule{Image: inClusterImageName, Kind: "host", Entrypoint: []string{bin}}
}

// testInCluster runs a Go program built with client-go as a pod: rest.InClusterConfig
// finds the API server through the kubernetes Service and the mounted service account
// files, verifies its certificate against the mounted CA, and gets exactly the rights
// of the pod's own service account (ConfigMaps yes, Secrets no).
func testInCluster(t *testing.T, n *Node) {
	ns := env.Namespace(t)
	ctx := kubetest.Context(t)
	objs := []func() error{
		func() error {
			_, err := env.Kube.CoreV1().ServiceAccounts(ns).Create(ctx, &corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Name: "reader"}}, metav1.CreateOptions{})
			return err
		},
		func() error {
			_, err := env.Kube.RbacV1().Roles(ns).Create(ctx, &rbacv1.Role{
				ObjectMeta: metav1.ObjectMeta{Name: "configmap-reader"},
				Rules:      []rbacv1.PolicyRule{{APIGroups: []string{""}, Resources: []string{"configmaps"}, Verbs: []string{"list"}}},
			}, metav1.CreateOptions{})
			return err
		},
		func() error {
			_, err := env.Kube.RbacV1().RoleBindings(ns).Create(ctx, &rbacv1.RoleBinding{
				ObjectMeta: metav1.ObjectMeta{Name: "reader"},
				RoleRef:    rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "Role", Name: "configmap-reader"},
				Subjects:   []rbacv1.Subject{{Kind: rbacv1.ServiceAccountKind, Name: "reader", Namespace: ns}},
			}, metav1.CreateOptions{})
			return err
		},
		func() error {
			_, err := env.Kube.CoreV1().ConfigMaps(ns).Create(ctx, &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "visible"}}, metav1.CreateOptions{})
			return err
		},
	}
	for _, create := range objs {
		if err := create(); err != nil {
			t.Fatal(err)
		}
	}
	createPod(t, ns, &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: "incluster"},
		Spec: corev1.PodSpec{
			ServiceAccountName: "reader",
			RestartPolicy:      corev1.RestartPolicyNever,
			Containers:         []corev1.Container{{Name: "client", Image: inClusterImageName}},
		},
	})
	pod := waitPod(t, ns, "incluster", "the in-cluster client finishes", func(p *corev1.Pod) error {
		if p.Status.Phase != corev1.PodSucceeded && p.Status.Phase != corev1.PodFailed {
			return fmt.Errorf("phase %s statuses %+v", p.Status.Phase, p.Status.ContainerStatuses)
		}
		return nil
	})
	logs, err := env.Kube.CoreV1().Pods(ns).GetLogs("incluster", &corev1.PodLogOptions{Container: "client"}).Do(ctx).Raw()
	if err != nil {
		t.Fatalf("logs: %v", err)
	}
	if pod.Status.Phase != corev1.PodSucceeded {
		t.Fatalf("the in-cluster client failed:\n%s", logs)
	}
	kube, err := env.Kube.CoreV1().Services("default").Get(ctx, "kubernetes", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{
		"host: https://" + net.JoinHostPort(kube.Spec.ClusterIP, "443"),
		"configmaps in " + ns + ": kube-root-ca.crt,visible",
		`secrets: forbidden: secrets is forbidden: User "system:serviceaccount:` + ns + `:reader" cannot list resource "secrets"`,
		"certificate verified for kubernetes.default.svc",
		"token bound to pod incluster for audience https://kubernetes.default.svc.cluster.local",
	} {
		if !strings.Contains(string(logs), want) {
			t.Errorf("the client's output lacks %q:\n%s", want, logs)
		}
	}
	testKubernetesEndpoints(t, n)
}

// testKubernetesEndpoints checks the kubernetes Service names the address the node
// serves the API server at, and that the address answers.
func testKubernetesEndpoints(t *testing.T, n *Node) {
	ctx := kubetest.Context(t)
	slice, err := env.Kube.DiscoveryV1().EndpointSlices("default").Get(ctx, "kubernetes", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	wantIP := n.net.gw.String()
	if len(slice.Endpoints) != 1 || len(slice.Endpoints[0].Addresses) != 1 || slice.Endpoints[0].Addresses[0] != wantIP ||
		len(slice.Ports) != 1 || slice.Ports[0].Port == nil {
		t.Fatalf("kubernetes EndpointSlice %+v %+v: want one endpoint at %s", slice.Endpoints, slice.Ports, wantIP)
	}
	conn, err := net.DialTimeout("tcp", net.JoinHostPort(wantIP, fmt.Sprint(*slice.Ports[0].Port)), 5*time.Second)
	if err != nil {
		t.Fatalf("the published API server endpoint does not answer: %v", err)
	}
	conn.Close()
}

// testServiceClusterIP reaches a Service by its ClusterIP from the host and, through
// the injected {NAME}_SERVICE_HOST/PORT variables, from another pod.
func testServiceClusterIP(t *testing.T, n *Node) {
	ns := env.Namespace(t)
	ctx := kubetest.Context(t)
	svc, err := env.Kube.CoreV1().Services(ns).Create(ctx, &corev1.Service{
		ObjectMeta: metav1.ObjectMeta{Name: "echo"},
		Spec: corev1.ServiceSpec{Selector: map[string]string{"app": "echo"},
			Ports: []corev1.ServicePort{{Name: "http", Port: 80, TargetPort: intstr.FromString("web")}}},
	}, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	createPod(t, ns, &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: "echo", Labels: map[string]string{"app": "echo"}},
		Spec: corev1.PodSpec{Containers: []corev1.Container{{
			Name: "server", Image: "python:3.11", Command: []string{"python3", "-c", statusServer, "8080"},
			Ports: []corev1.ContainerPort{{Name: "web", ContainerPort: 8080}},
			ReadinessProbe: &corev1.Probe{
				ProbeHandler:  corev1.ProbeHandler{HTTPGet: &corev1.HTTPGetAction{Path: "/", Port: intstr.FromString("web")}},
				PeriodSeconds: 1,
			},
		}}},
	})
	waitPod(t, ns, "echo", "the server is Ready", func(p *corev1.Pod) error {
		if !podReady(p) {
			return fmt.Errorf("conditions %v", p.Status.Conditions)
		}
		return nil
	})
	url := "http://" + net.JoinHostPort(svc.Spec.ClusterIP, "80") + "/hello"
	kubetest.Eventually(t, 30*time.Second, "the host reaches the Service at its ClusterIP", func(context.Context) (bool, error) {
		client := &http.Client{Timeout: 3 * time.Second}
		resp, err := client.Get(url)
		if err != nil {
			return false, err
		}
		defer resp.Body.Close()
		_, _ = io.Copy(io.Discard, resp.Body)
		return resp.StatusCode == http.StatusOK, fmt.Errorf("status %d", resp.StatusCode)
	})
	client := `
import os, urllib.request
url = "http://%s:%s/hello" % (os.environ["ECHO_SERVICE_HOST"], os.environ["ECHO_SERVICE_PORT"])
with urllib.request.urlopen(url, timeout=10) as r:
    print("status", r.status, "from", url)
`
	createPod(t, ns, &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: "client"},
		Spec: corev1.PodSpec{
			RestartPolicy: corev1.RestartPolicyOnFailure,
			Containers:    []corev1.Container{{Name: "client", Image: "python:3.11", Command: []string{"python3", "-c", client}}},
		},
	})
	waitPod(t, ns, "client", "the client pod reaches the Service and finishes", func(p *corev1.Pod) error {
		if p.Status.Phase != corev1.PodSucceeded {
			return fmt.Errorf("phase %s statuses %+v", p.Status.Phase, p.Status.ContainerStatuses)
		}
		return nil
	})
	logs, err := env.Kube.CoreV1().Pods(ns).GetLogs("client", &corev1.PodLogOptions{Container: "client"}).Do(ctx).Raw()
	want := fmt.Sprintf("status 200 from http://%s:80/hello", svc.Spec.ClusterIP)
	if err != nil || !strings.Contains(string(logs), want) {
		t.Errorf("client logs = %q, %v; want %q", logs, err, want)
	}
}

// testServiceDNS checks the cluster DNS: a pod reaches a Service by its short name
// (the search path of its namespace) and by its full name, a missing Service is
// NXDOMAIN, and a pod with dnsPolicy Default gets the host's resolver.
func testServiceDNS(t *testing.T, n *Node) {
	ns := env.Namespace(t)
	ctx := kubetest.Context(t)
	if _, err := env.Kube.CoreV1().Services(ns).Create(ctx, &corev1.Service{
		ObjectMeta: metav1.ObjectMeta{Name: "named"},
		Spec: corev1.ServiceSpec{Selector: map[string]string{"app": "named"},
			Ports: []corev1.ServicePort{{Name: "http", Port: 80, TargetPort: intstr.FromString("web")}}},
	}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	createPod(t, ns, &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: "named", Labels: map[string]string{"app": "named"}},
		Spec: corev1.PodSpec{Containers: []corev1.Container{{
			Name: "server", Image: "python:3.11", Command: []string{"python3", "-c", statusServer, "8080"},
			Ports: []corev1.ContainerPort{{Name: "web", ContainerPort: 8080}},
			ReadinessProbe: &corev1.Probe{
				ProbeHandler:  corev1.ProbeHandler{HTTPGet: &corev1.HTTPGetAction{Path: "/", Port: intstr.FromString("web")}},
				PeriodSeconds: 1,
			},
		}}},
	})
	client := `
import socket, sys, urllib.request
for url in sys.argv[1:]:
    with urllib.request.urlopen(url, timeout=10) as r:
        print("status", r.status, "from", url)
try:
    socket.gethostbyname("absent.` + ns + `.svc.cluster.local")
    print("absent resolved")
except socket.gaierror as e:
    print("absent:", e.errno == socket.EAI_NONAME)
print(open("/etc/resolv.conf").read())
`
	createPod(t, ns, &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: "dns-client"},
		Spec: corev1.PodSpec{
			RestartPolicy: corev1.RestartPolicyOnFailure,
			Containers: []corev1.Container{{Name: "client", Image: "python:3.11", Command: []string{"python3", "-c", client,
				"http://named/short", "http://named." + ns + ".svc.cluster.local/full"}}},
		},
	})
	createPod(t, ns, &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: "host-dns"},
		Spec: corev1.PodSpec{
			RestartPolicy: corev1.RestartPolicyOnFailure, DNSPolicy: corev1.DNSDefault,
			Containers: []corev1.Container{{Name: "client", Image: "busybox", Command: []string{"cat", "/etc/resolv.conf"}}},
		},
	})
	for _, name := range []string{"dns-client", "host-dns"} {
		waitPod(t, ns, name, "the pod finishes", func(p *corev1.Pod) error {
			if p.Status.Phase != corev1.PodSucceeded {
				return fmt.Errorf("phase %s statuses %+v", p.Status.Phase, p.Status.ContainerStatuses)
			}
			return nil
		})
	}
	logs := podLogs(t, ns, "dns-client", "client")
	gw, _ := gateway(n.opts.PodCIDR)
	for _, want := range []string{
		"status 200 from http://named/short",
		"status 200 from http://named." + ns + ".svc.cluster.local/full",
		"absent: True",
		"nameserver " + gw.String() + "\n",
		"search " + ns + ".svc.cluster.local svc.cluster.local cluster.local",
		"options ndots:5",
	} {
		if !strings.Contains(logs, want) {
			t.Errorf("dns-client logs lack %q:\n%s", want, logs)
		}
	}
	host, err := os.ReadFile("/etc/resolv.conf")
	if err != nil {
		t.Fatal(err)
	}
	hostDNS := podLogs(t, ns, "host-dns", "client")
	if strings.Contains(hostDNS, gw.String()) || !strings.Contains(hostDNS, firstNameserver(string(host))) {
		t.Errorf("dnsPolicy Default pod's resolv.conf:\n%s\nwant the host's nameserver %q", hostDNS, firstNameserver(string(host)))
	}
}

func firstNameserver(resolvConf string) string {
	for line := range strings.Lines(resolvConf) {
		if f := strings.Fields(line); len(f) == 2 && f[0] == "nameserver" {
			return "nameserver " + f[1]
		}
	}
	return "nameserver"
}
