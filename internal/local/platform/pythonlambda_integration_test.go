//go:build integration

package platform

import (
	"archive/zip"
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/base64"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"sync"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/kubernetes"

	"github.com/metalambda/metalambda/internal/engine"
	"github.com/metalambda/metalambda/internal/kubetest"
)

var pythonLambdasGVR = schema.GroupVersionResource{Group: "example.com", Version: "v1", Resource: "pythonlambdas"}

// loadRate is the steady stream of requests sent through the ingress while a
// PythonLambda changes.
const loadRate = 25 // per second

// TestPythonLambdaInProduction runs PythonLambdas on the local platform: changes
// under load lose no request, and requirements install from a wheel built here.
func TestPythonLambdaInProduction(t *testing.T) {
	p, ctx := startWithNode(t, nodeOptions("mle2e0", "10.244.214.0/24"))
	defer p.Stop()
	t.Run("ZeroDowntime", func(t *testing.T) { testZeroDowntime(t, ctx, p) })
	t.Run("Requirements", func(t *testing.T) { testRequirements(t, ctx, p) })
}

// testZeroDowntime runs a PythonLambda under a steady stream of requests through
// the ingress and changes its code (one replica, then two), its replicas and its
// image, then a Secret its env reads: no request fails, and once each rollout ends
// every answer comes from the new pods.
func testZeroDowntime(t *testing.T, ctx context.Context, p *Platform) {
	env := connect(t, p.Kubeconfig)
	kube := env.Kube
	lambdas := env.Dynamic.Resource(pythonLambdasGVR).Namespace("zero")
	defer dumpLambdaOnFailure(t, ctx, lambdas, kube, "zero")
	if _, err := env.Apply(ctx, []byte(`
apiVersion: v1
kind: Namespace
metadata: {name: zero}
---
apiVersion: v1
kind: Secret
metadata: {name: greeting, namespace: zero}
stringData: {word: hello}
---
apiVersion: example.com/v1
kind: PythonLambda
metadata: {name: zero, namespace: zero}
spec:
  host: zero.example.com
  replicas: 1
  env:
  - name: WORD
    valueFrom: {secretKeyRef: {name: greeting, key: word}}
  code: |
    import os
    output = "v1 " + os.environ["WORD"]
`)); err != nil {
		t.Fatal(err)
	}
	url := "http://" + p.opts.IngressAddress + "/"
	kubetest.Eventually(t, 3*time.Minute, "the lambda answers through the ingress", func(context.Context) (bool, error) {
		code, body, err := ask(url, "zero.example.com")
		return code == 200 && body == "v1 hello", fmt.Errorf("%d %q %v", code, body, err)
	})
	waitRolledOut(t, ctx, lambdas, kube, 1)

	l := startLoad(url, "zero.example.com", loadRate)
	defer l.stop()
	// step makes a change under the load, waits until the answer is want and the
	// rollout has ended with replicas pods, and checks that no request failed.
	step := func(what string, change func() error, replicas int, want string) {
		t.Helper()
		l.reset()
		start := time.Now()
		if err := change(); err != nil {
			t.Fatal(err)
		}
		kubetest.Eventually(t, 2*time.Minute, what+": the answer is "+want, func(context.Context) (bool, error) {
			code, body, err := ask(url, "zero.example.com")
			return code == 200 && body == want, fmt.Errorf("%d %q %v", code, body, err)
		})
		waitRolledOut(t, ctx, lambdas, kube, replicas)
		// Every pod now runs the new spec: every answer is the new one.
		l.expectOnly(want)
		time.Sleep(time.Second)
		sent, failed, answers := l.snapshot()
		t.Logf("%s: %d requests in %s, %d failed, answers %v", what, sent, time.Since(start).Round(time.Millisecond), failed, answers)
		if failed > 0 {
			t.Errorf("%s: %d of %d requests failed: %v", what, failed, sent, l.failures())
		}
		if late := l.unexpected(); late > 0 {
			t.Errorf("%s: %d answers after the rollout were not %q", what, late, want)
		}
		if sent < 10 {
			t.Errorf("%s: only %d requests were sent", what, sent)
		}
	}
	patch := func(body string) func() error {
		return func() error {
			_, err := lambdas.Patch(ctx, "zero", types.MergePatchType, []byte(body), metav1.PatchOptions{})
			return err
		}
	}
	step("code change, 1 replica", patch(`{"spec":{"code":"import os\noutput = 'v2 ' + os.environ['WORD']\n"}}`), 1, "v2 hello")
	step("scale 1 to 2", patch(`{"spec":{"replicas":2}}`), 2, "v2 hello")
	step("code change, 2 replicas", patch(`{"spec":{"code":"import os\noutput = 'v3 ' + os.environ['WORD']\n"}}`), 2, "v3 hello")
	step("image change", patch(`{"spec":{"image":"python:3.12-slim"}}`), 2, "v3 hello")
	step("scale 2 to 1", patch(`{"spec":{"replicas":1}}`), 1, "v3 hello")
	// A Secret change reaches the code through the rollout it triggers.
	step("Secret change", func() error {
		secret, err := kube.CoreV1().Secrets("zero").Get(ctx, "greeting", metav1.GetOptions{})
		if err != nil {
			return err
		}
		secret.Data = map[string][]byte{"word": []byte("bonjour")}
		_, err = kube.CoreV1().Secrets("zero").Update(ctx, secret, metav1.UpdateOptions{})
		return err
	}, 1, "v3 bonjour")
	checkNoSecretInStatus(t, ctx, lambdas)
	checkOldConfigMapsRemoved(t, ctx, kube)
}

// ask sends one GET through the ingress.
func ask(url, host string) (int, string, error) {
	req, err := http.NewRequest(http.MethodGet, url, nil)
	if err != nil {
		return 0, "", err
	}
	req.Host = host
	client := &http.Client{Timeout: 10 * time.Second}
	resp, err := client.Do(req)
	if err != nil {
		return 0, "", err
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	return resp.StatusCode, string(body), err
}

// waitRolledOut waits until the lambda's Updated condition is True, exactly
// replicas pods exist, all current, Ready and not terminating, and the ingress
// serves only them.
func waitRolledOut(t *testing.T, ctx context.Context, lambdas dynamic.ResourceInterface, kube kubernetes.Interface, replicas int) {
	t.Helper()
	kubetest.Eventually(t, 3*time.Minute, fmt.Sprintf("the rollout ends with %d Ready pods", replicas), func(ctx context.Context) (bool, error) {
		obj, err := lambdas.Get(ctx, "zero", metav1.GetOptions{})
		if err != nil {
			return false, err
		}
		if obj.GetGeneration() != observedGeneration(obj) {
			return false, fmt.Errorf("generation %d not observed yet", obj.GetGeneration())
		}
		updated := updatedCondition(obj)
		if updated == nil || updated["status"] != "True" {
			return false, fmt.Errorf("Updated condition %v", updated)
		}
		hash, _, _ := unstructured.NestedString(obj.Object, "status", "updateRevision")
		pods, err := kube.CoreV1().Pods("zero").List(ctx, metav1.ListOptions{LabelSelector: engine.ControllerUIDLabel + "=" + string(obj.GetUID())})
		if err != nil {
			return false, err
		}
		var states []string
		good := 0
		for _, p := range pods.Items {
			ok := p.DeletionTimestamp == nil && podReady(&p) && p.Annotations["pythonlambda.example.com/spec-hash"] == hash
			if ok {
				good++
			}
			states = append(states, fmt.Sprintf("%s(ready=%t deleting=%t hash=%s)", p.Name, podReady(&p), p.DeletionTimestamp != nil, p.Annotations["pythonlambda.example.com/spec-hash"]))
		}
		return good == replicas && len(pods.Items) == replicas, fmt.Errorf("want %d pods of %s: %v", replicas, hash, states)
	})
}

func observedGeneration(obj *unstructured.Unstructured) int64 {
	g, _, _ := unstructured.NestedInt64(obj.Object, "status", "observedGeneration")
	return g
}

// load sends GET requests at a fixed rate and records what they get.
type load struct {
	done chan struct{}
	wg   sync.WaitGroup

	mu        sync.Mutex
	sent      int
	failed    []string
	answers   map[string]int
	only      string // once set, answers other than it are counted in late
	late      int
	collected bool
}

func startLoad(url, host string, rate int) *load {
	l := &load{done: make(chan struct{}), answers: map[string]int{}}
	l.wg.Add(1)
	go func() {
		defer l.wg.Done()
		tick := time.NewTicker(time.Second / time.Duration(rate))
		defer tick.Stop()
		for {
			select {
			case <-l.done:
				return
			case <-tick.C:
			}
			l.wg.Add(1)
			go func() {
				defer l.wg.Done()
				l.record(ask(url, host))
			}()
		}
	}()
	return l
}

func (l *load) record(code int, body string, err error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.sent++
	switch {
	case err != nil:
		l.failed = append(l.failed, err.Error())
	case code != http.StatusOK:
		l.failed = append(l.failed, fmt.Sprintf("%d %q", code, body))
	default:
		l.answers[body]++
		if l.only != "" && body != l.only {
			l.late++
		}
	}
}

// reset starts a new count.
func (l *load) reset() {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.sent, l.failed, l.answers, l.only, l.late = 0, nil, map[string]int{}, "", 0
}

// expectOnly counts, from now on, answers other than want.
func (l *load) expectOnly(want string) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.only = want
}

func (l *load) snapshot() (sent, failed int, answers string) {
	l.mu.Lock()
	defer l.mu.Unlock()
	var parts []string
	for body, n := range l.answers {
		parts = append(parts, fmt.Sprintf("%q x%d", body, n))
	}
	sort.Strings(parts)
	return l.sent, len(l.failed), strings.Join(parts, ", ")
}

func (l *load) failures() []string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return append([]string(nil), l.failed[:min(len(l.failed), 10)]...)
}

func (l *load) unexpected() int {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.late
}

func (l *load) stop() {
	if !l.collected {
		l.collected = true
		close(l.done)
		l.wg.Wait()
	}
}

// checkNoSecretInStatus checks that the Secret's values appear nowhere in the
// lambda's status or its ControllerRevisions.
func checkNoSecretInStatus(t *testing.T, ctx context.Context, lambdas dynamic.ResourceInterface) {
	t.Helper()
	obj, err := lambdas.Get(ctx, "zero", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if s := fmt.Sprint(obj.Object["status"]); strings.Contains(s, "bonjour") || strings.Contains(s, "Ym9uam91cg") {
		t.Errorf("the status holds the Secret's value: %s", s)
	}
}

// checkOldConfigMapsRemoved checks that only the current code's ConfigMap is left
// once no pod mounts the older ones.
func checkOldConfigMapsRemoved(t *testing.T, ctx context.Context, kube kubernetes.Interface) {
	t.Helper()
	kubetest.Eventually(t, time.Minute, "one code ConfigMap is left", func(ctx context.Context) (bool, error) {
		cms, err := kube.CoreV1().ConfigMaps("zero").List(ctx, metav1.ListOptions{LabelSelector: "app.kubernetes.io/name=pythonlambda"})
		if err != nil {
			return false, err
		}
		var names []string
		for _, cm := range cms.Items {
			if cm.DeletionTimestamp == nil {
				names = append(names, cm.Name)
			}
		}
		return len(names) == 1, fmt.Errorf("ConfigMaps %v", names)
	})
}

// dumpLambdaOnFailure logs the status of the lambdas, their pods and events in ns
// when the test failed.
func dumpLambdaOnFailure(t *testing.T, ctx context.Context, lambdas dynamic.ResourceInterface, kube kubernetes.Interface, ns string) {
	if !t.Failed() {
		return
	}
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 10*time.Second)
	defer cancel()
	if list, err := lambdas.List(ctx, metav1.ListOptions{}); err == nil {
		for _, obj := range list.Items {
			t.Logf("PythonLambda %s status: %v", obj.GetName(), obj.Object["status"])
		}
	}
	if events, err := kube.CoreV1().Events(ns).List(ctx, metav1.ListOptions{}); err == nil {
		for _, e := range events.Items {
			t.Logf("event %s %s: %s %s", e.InvolvedObject.Kind, e.InvolvedObject.Name, e.Reason, e.Message)
		}
	}
	pods, _ := kube.CoreV1().Pods(ns).List(ctx, metav1.ListOptions{})
	for _, p := range pods.Items {
		t.Logf("pod %s phase=%s ready=%t deleting=%t init=%+v containers=%+v", p.Name, p.Status.Phase, podReady(&p), p.DeletionTimestamp != nil,
			p.Status.InitContainerStatuses, p.Status.ContainerStatuses)
	}
}

// testRequirements builds a tiny wheel, serves its directory over HTTP to the pods,
// points the operator's pip at it (the pythonlambda Function's env) and runs a
// lambda importing it; a lambda requiring a package nobody has reports pip's error.
func testRequirements(t *testing.T, ctx context.Context, p *Platform) {
	env := connect(t, p.Kubeconfig)
	kube := env.Kube
	dyn := env.Dynamic
	lambdas := dyn.Resource(pythonLambdasGVR).Namespace("deps")
	defer dumpLambdaOnFailure(t, ctx, lambdas, kube, "deps")
	// Pods on the local node see none of the host's files: the wheel directory is
	// served on the node's bridge address, as a directory served over HTTP would
	// be on a cluster.
	dir := t.TempDir()
	writeWheel(t, dir, "tinypkg", "1.0", "def greet(name):\n    return 'tinypkg greets ' + name\n")
	wheels, host := serveOnBridge(t, "mle2e0", dir)
	functions := dyn.Resource(schema.GroupVersionResource{Group: "metalambda.dev", Version: "v1alpha1", Resource: "functions"}).Namespace("metalambda-system")
	// pip takes plain HTTP from localhost alone unless the host is trusted.
	patch := fmt.Sprintf(`{"spec":{"env":{"PIP_FIND_LINKS":%q,"PIP_NO_INDEX":"1","PIP_TRUSTED_HOST":%q}}}`, wheels, host)
	if _, err := functions.Patch(ctx, "pythonlambda", types.MergePatchType, []byte(patch), metav1.PatchOptions{}); err != nil {
		t.Fatal(err)
	}
	waitHookUses(t, p, wheels)
	if _, err := env.Apply(ctx, []byte(`
apiVersion: v1
kind: Namespace
metadata: {name: deps}
---
apiVersion: example.com/v1
kind: PythonLambda
metadata: {name: tiny, namespace: deps}
spec:
  host: tiny.example.com
  requirements: |
    tinypkg==1.0
  code: |
    import tinypkg
    output = tinypkg.greet(query_params.get("name", ["nobody"])[0])
---
apiVersion: example.com/v1
kind: PythonLambda
metadata: {name: broken, namespace: deps}
spec:
  requirements: |
    nosuchpkg==9.9
  code: |
    output = "unreachable"
`)); err != nil {
		t.Fatal(err)
	}
	url := "http://" + p.opts.IngressAddress + "/?name=Ada"
	kubetest.Eventually(t, 3*time.Minute, "the lambda importing the wheel answers", func(context.Context) (bool, error) {
		code, body, err := ask(url, "tiny.example.com")
		return code == 200 && body == "tinypkg greets Ada", fmt.Errorf("%d %q %v", code, body, err)
	})
	kubetest.Eventually(t, 2*time.Minute, "the failing requirement is in the status with pip's message", func(ctx context.Context) (bool, error) {
		obj, err := lambdas.Get(ctx, "broken", metav1.GetOptions{})
		if err != nil {
			return false, err
		}
		conds, _, _ := unstructured.NestedSlice(obj.Object, "status", "conditions")
		for _, c := range conds {
			m := c.(map[string]any)
			msg, _ := m["message"].(string)
			if m["type"] == "Ready" && m["reason"] == "RequirementsFailed" && strings.Contains(msg, "nosuchpkg") &&
				strings.Contains(msg, "No matching distribution found") {
				t.Logf("Ready condition: %s", msg)
				return true, nil
			}
		}
		return false, fmt.Errorf("conditions %v", conds)
	})
}

// serveOnBridge serves dir, with its listing, on the address of the node's
// bridge, which pods reach, and returns its URL and host.
func serveOnBridge(t *testing.T, bridge, dir string) (string, string) {
	t.Helper()
	iface, err := net.InterfaceByName(bridge)
	if err != nil {
		t.Fatal(err)
	}
	addrs, err := iface.Addrs()
	if err != nil || len(addrs) == 0 {
		t.Fatalf("bridge %s has no address: %v", bridge, err)
	}
	ip, _, err := net.ParseCIDR(addrs[0].String())
	if err != nil {
		t.Fatal(err)
	}
	l, err := net.Listen("tcp", net.JoinHostPort(ip.String(), "0"))
	if err != nil {
		t.Fatal(err)
	}
	srv := &http.Server{Handler: http.FileServer(http.Dir(dir)), ReadHeaderTimeout: 10 * time.Second}
	go func() { _ = srv.Serve(l) }()
	t.Cleanup(func() { _ = srv.Close() })
	return "http://" + l.Addr().String() + "/", ip.String()
}

// waitHookUses waits until the gateway's pythonlambda hook gives pip the wheel
// directory: the gateway has loaded the Function's new env.
func waitHookUses(t *testing.T, p *Platform, wheels string) {
	t.Helper()
	token, err := os.ReadFile(HookTokenFile(p.opts.DataDir))
	if err != nil {
		t.Fatal(err)
	}
	req := `{"parent":{"apiVersion":"example.com/v1","kind":"PythonLambda","metadata":{"name":"probe","namespace":"deps"},
		"spec":{"code":"output = 1","requirements":"tinypkg"}},"children":{}}`
	kubetest.Eventually(t, time.Minute, "the hook gives pip the wheel directory", func(ctx context.Context) (bool, error) {
		r, err := http.NewRequestWithContext(ctx, http.MethodPost, "http://"+p.opts.GatewayAddress+"/hooks/metalambda-system/pythonlambda", strings.NewReader(req))
		if err != nil {
			return false, err
		}
		r.Header.Set("Authorization", "Bearer "+strings.TrimSpace(string(token)))
		r.Header.Set("Content-Type", "application/json")
		resp, err := http.DefaultClient.Do(r)
		if err != nil {
			return false, err
		}
		defer resp.Body.Close()
		body, _ := io.ReadAll(resp.Body)
		return resp.StatusCode == 200 && strings.Contains(string(body), wheels), fmt.Errorf("%d %.300s", resp.StatusCode, body)
	})
}

// writeWheel writes a pure-Python wheel of one module package into dir, as
// pip builds them: the package, its dist-info and a RECORD with hashes.
func writeWheel(t *testing.T, dir, name, version, initPy string) {
	t.Helper()
	info := name + "-" + version + ".dist-info"
	files := []struct{ path, body string }{
		{name + "/__init__.py", initPy},
		{info + "/METADATA", "Metadata-Version: 2.1\nName: " + name + "\nVersion: " + version + "\n"},
		{info + "/WHEEL", "Wheel-Version: 1.0\nGenerator: metalambda-test\nRoot-Is-Purelib: true\nTag: py3-none-any\n"},
	}
	var buf bytes.Buffer
	zw := zip.NewWriter(&buf)
	var record strings.Builder
	for _, f := range files {
		w, err := zw.Create(f.path)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := w.Write([]byte(f.body)); err != nil {
			t.Fatal(err)
		}
		sum := sha256.Sum256([]byte(f.body))
		fmt.Fprintf(&record, "%s,sha256=%s,%d\n", f.path, base64.RawURLEncoding.EncodeToString(sum[:]), len(f.body))
	}
	record.WriteString(info + "/RECORD,,\n")
	w, err := zw.Create(info + "/RECORD")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := w.Write([]byte(record.String())); err != nil {
		t.Fatal(err)
	}
	if err := zw.Close(); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, name+"-"+version+"-py3-none-any.whl"), buf.Bytes(), 0o644); err != nil {
		t.Fatal(err)
	}
}
