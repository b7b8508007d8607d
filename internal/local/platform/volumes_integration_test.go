//go:build integration

package platform

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"

	"github.com/metalambda/metalambda/internal/kubetest"
	"github.com/metalambda/metalambda/internal/local/storage"
)

// bootScript appends the pod's name to boots in its claim at every start, then serves
// the file on port 8080.
const bootScript = `
import http.server, os
path = "/var/lib/cat/boots"
with open(path, "a") as f:
    f.write(os.environ["HOSTNAME"] + "\n")
class H(http.server.BaseHTTPRequestHandler):
    def do_GET(self):
        body = open(path, "rb").read()
        self.send_response(200)
        self.end_headers()
        self.wfile.write(body)
    def log_message(self, *args):
        pass
http.server.HTTPServer(("", 8080), H).serve_forever()
`

// catsetWithClaims is a CatSet of three pods, each with its own claim from a
// volumeClaimTemplate mounted at /var/lib/cat (Metacontroller's my-catset.yaml, with
// a server that records its boots in the claim).
func catsetWithClaims() []byte {
	return fmt.Appendf(nil, `
apiVersion: e2e.metalambda.dev/v1
kind: CatSet
metadata: {name: cat, namespace: catset}
spec:
  replicas: 3
  template:
    metadata:
      labels: {app: cat}
    spec:
      terminationGracePeriodSeconds: 5
      containers:
      - name: web
        image: python:3
        command: [python3, -c, %q]
        ports: [{name: http, containerPort: 8080}]
        volumeMounts: [{name: www, mountPath: /var/lib/cat}]
        readinessProbe:
          httpGet: {path: /, port: 8080}
          periodSeconds: 1
  volumeClaimTemplates:
  - metadata: {name: www, labels: {app: cat}}
    spec:
      accessModes: [ReadWriteOnce]
      resources: {requests: {storage: 1Gi}}
`, bootScript)
}

// statefulSetWithClaims is a StatefulSet of two pods, each writing its name into its
// own claim and into a generic ephemeral volume (a claim made for the pod).
const statefulSetWithClaims = `
apiVersion: v1
kind: Namespace
metadata: {name: sts}
---
apiVersion: apps/v1
kind: StatefulSet
metadata: {name: db, namespace: sts}
spec:
  serviceName: db
  replicas: 2
  selector: {matchLabels: {app: db}}
  template:
    metadata:
      labels: {app: db}
    spec:
      terminationGracePeriodSeconds: 5
      containers:
      - name: db
        image: python:3
        command: [python3, -c, "import os, time; [open(d + '/owner', 'w').write(os.environ['HOSTNAME']) for d in ('/data', '/scratch')]; time.sleep(3600)"]
        volumeMounts: [{name: data, mountPath: /data}, {name: scratch, mountPath: /scratch}]
      volumes:
      - name: scratch
        ephemeral:
          volumeClaimTemplate:
            spec:
              accessModes: [ReadWriteOnce]
              resources: {requests: {storage: 10Mi}}
  volumeClaimTemplates:
  - metadata: {name: data}
    spec:
      accessModes: [ReadWriteOnce]
      resources: {requests: {storage: 100Mi}}
`

// TestVolumes proves PersistentVolumeClaims on the local platform: a CatSet's claims
// are provisioned by the default StorageClass, bound and mounted; a pod's data
// survives the pod; deleting the CatSet leaves no claim, volume, directory or
// finalizer behind. A StatefulSet's volumeClaimTemplates and a generic ephemeral
// volume work the same, and deleting their namespace cleans up as well.
func TestVolumes(t *testing.T) {
	hook := httptest.NewServer(http.HandlerFunc(serveCatSet))
	defer hook.Close()
	p, ctx := startWithNode(t, nodeOptions("mlvol0", "10.244.219.0/24"))
	defer p.Stop()
	env := connect(t, p.Kubeconfig)
	kube := env.Kube
	root := VolumeDir(p.opts.DataDir)
	sc, err := kube.StorageV1().StorageClasses().Get(ctx, storage.ClassName, metav1.GetOptions{})
	if err != nil || sc.Annotations["storageclass.kubernetes.io/is-default-class"] != "true" {
		t.Fatalf("the default StorageClass is not installed: %v %v", sc, err)
	}

	t.Run("CatSet", func(t *testing.T) {
		defer dumpOnFailure(t, ctx, env)
		if _, err := env.Apply(ctx, fmt.Appendf(nil, catsetController, hook.URL)); err != nil {
			t.Fatal(err)
		}
		kubetest.Eventually(t, time.Minute, "the CatSet is applied", func(ctx context.Context) (bool, error) {
			_, err := env.Apply(ctx, catsetWithClaims())
			return err == nil, err
		})
		start := time.Now()
		pods := waitServing(t, ctx, kube, "catset", catNames, func(name, body string) error {
			if body != name+"\n" {
				return fmt.Errorf("pod %s serves %q", name, body)
			}
			return nil
		})
		t.Logf("3 CatSet pods Ready with their claims %s after the CatSet was created", time.Since(start).Round(time.Millisecond))
		checkClaims(t, ctx, kube, "catset", root, []string{"www-cat-0", "www-cat-1", "www-cat-2"})

		// cat-1 goes; its replacement finds what the first cat-1 wrote.
		if err := kube.CoreV1().Pods("catset").Delete(ctx, "cat-1", metav1.DeleteOptions{}); err != nil {
			t.Fatal(err)
		}
		start = time.Now()
		waitServing(t, ctx, kube, "catset", []string{"cat-1"}, func(name, body string) error {
			if pod, err := kube.CoreV1().Pods("catset").Get(ctx, name, metav1.GetOptions{}); err != nil || pod.UID == pods[name].UID {
				return fmt.Errorf("pod %s not replaced yet (%v)", name, err)
			}
			if body != "cat-1\ncat-1\n" {
				return fmt.Errorf("the new cat-1 serves %q, want both boots", body)
			}
			return nil
		})
		t.Logf("cat-1 replaced and serving its old data %s after the delete", time.Since(start).Round(time.Millisecond))

		// Deleting the CatSet deletes its pods and claims; the provisioner deletes
		// the released volumes and their directories.
		if err := env.Dynamic.Resource(catsetsGVR).Namespace("catset").Delete(ctx, "cat", metav1.DeleteOptions{}); err != nil {
			t.Fatal(err)
		}
		start = time.Now()
		waitNoStorage(t, ctx, kube, "catset", root)
		t.Logf("pods, claims, volumes and directories gone %s after the CatSet was deleted", time.Since(start).Round(time.Millisecond))
	})

	t.Run("StatefulSet", func(t *testing.T) {
		if _, err := env.Apply(ctx, []byte(statefulSetWithClaims)); err != nil {
			t.Fatal(err)
		}
		start := time.Now()
		kubetest.Eventually(t, 2*time.Minute, "both StatefulSet pods run with their claims", func(ctx context.Context) (bool, error) {
			for _, name := range []string{"db-0", "db-1"} {
				pod, err := kube.CoreV1().Pods("sts").Get(ctx, name, metav1.GetOptions{})
				if err != nil {
					return false, err
				}
				if pod.Status.Phase != corev1.PodRunning {
					return false, fmt.Errorf("pod %s: phase %s, message %q", name, pod.Status.Phase, pod.Status.Message)
				}
			}
			return true, nil
		})
		t.Logf("2 StatefulSet pods Running with 4 claims %s after the StatefulSet was created", time.Since(start).Round(time.Millisecond))
		dirs := checkClaims(t, ctx, kube, "sts", root, []string{"data-db-0", "data-db-1", "db-0-scratch", "db-1-scratch"})
		kubetest.Eventually(t, 30*time.Second, "each pod wrote its name into its own claims", func(context.Context) (bool, error) {
			for i, dir := range dirs {
				b, err := os.ReadFile(filepath.Join(dir, "owner"))
				if want := fmt.Sprintf("db-%d", i%2); string(b) != want {
					return false, fmt.Errorf("%s/owner = %q (%v), want %q", dir, b, err, want)
				}
			}
			return true, nil
		})

		// StatefulSets keep their claims; deleting the namespace takes everything.
		if err := kube.CoreV1().Namespaces().Delete(ctx, "sts", metav1.DeleteOptions{}); err != nil {
			t.Fatal(err)
		}
		start = time.Now()
		waitNoStorage(t, ctx, kube, "sts", root)
		kubetest.Eventually(t, time.Minute, "the namespace is gone", func(ctx context.Context) (bool, error) {
			_, err := kube.CoreV1().Namespaces().Get(ctx, "sts", metav1.GetOptions{})
			return apierrors.IsNotFound(err), fmt.Errorf("namespace sts: %v", err)
		})
		t.Logf("namespace, claims, volumes and directories gone %s after the namespace was deleted", time.Since(start).Round(time.Millisecond))
	})
}

// waitServing waits until every named pod is Ready and answers GET / on its pod
// address with a body check accepts; it returns the pods.
func waitServing(t *testing.T, ctx context.Context, kube kubernetes.Interface, ns string, names []string, check func(name, body string) error) map[string]*corev1.Pod {
	t.Helper()
	pods := map[string]*corev1.Pod{}
	kubetest.Eventually(t, 3*time.Minute, fmt.Sprintf("pods %v are Ready and serve their claims", names), func(ctx context.Context) (bool, error) {
		for _, name := range names {
			pod, err := kube.CoreV1().Pods(ns).Get(ctx, name, metav1.GetOptions{})
			if err != nil {
				return false, err
			}
			if !runningAndReady(*pod) {
				return false, fmt.Errorf("pod %s: phase %s, ready %t, message %q", name, pod.Status.Phase, podReady(pod), pod.Status.Message)
			}
			body, err := getBody(ctx, "http://"+pod.Status.PodIP+":8080/")
			if err != nil {
				return false, fmt.Errorf("pod %s: %w", name, err)
			}
			if err := check(name, body); err != nil {
				return false, err
			}
			pods[name] = pod
		}
		return true, nil
	})
	return pods
}

// checkClaims checks that the named claims are bound to volumes of the default
// StorageClass, each a directory of its own under root; it returns the directories.
func checkClaims(t *testing.T, ctx context.Context, kube kubernetes.Interface, ns, root string, names []string) []string {
	t.Helper()
	var dirs []string
	for _, name := range names {
		claim, err := kube.CoreV1().PersistentVolumeClaims(ns).Get(ctx, name, metav1.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		if claim.Status.Phase != corev1.ClaimBound || claim.Spec.StorageClassName == nil || *claim.Spec.StorageClassName != storage.ClassName {
			t.Fatalf("claim %s: phase %s, class %v", name, claim.Status.Phase, claim.Spec.StorageClassName)
		}
		pv, err := kube.CoreV1().PersistentVolumes().Get(ctx, claim.Spec.VolumeName, metav1.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		if pv.Spec.Local == nil || filepath.Dir(pv.Spec.Local.Path) != root {
			t.Fatalf("volume %s of claim %s is not a directory under %s: %+v", pv.Name, name, root, pv.Spec.PersistentVolumeSource)
		}
		if info, err := os.Stat(pv.Spec.Local.Path); err != nil || !info.IsDir() {
			t.Fatalf("the directory of volume %s: %v", pv.Name, err)
		}
		dirs = append(dirs, pv.Spec.Local.Path)
	}
	return dirs
}

// waitNoStorage waits until ns has no pod and no claim, no volume of the default
// StorageClass remains and root holds no directory.
func waitNoStorage(t *testing.T, ctx context.Context, kube kubernetes.Interface, ns, root string) {
	t.Helper()
	kubetest.Eventually(t, 2*time.Minute, "no pod, claim, volume or volume directory remains", func(ctx context.Context) (bool, error) {
		pods, err := kube.CoreV1().Pods(ns).List(ctx, metav1.ListOptions{})
		if err != nil {
			return false, err
		}
		claims, err := kube.CoreV1().PersistentVolumeClaims(ns).List(ctx, metav1.ListOptions{})
		if err != nil {
			return false, err
		}
		pvs, err := kube.CoreV1().PersistentVolumes().List(ctx, metav1.ListOptions{})
		if err != nil {
			return false, err
		}
		entries, err := os.ReadDir(root)
		if err != nil {
			return false, err
		}
		var left []string
		for _, pod := range pods.Items {
			left = append(left, "pod "+pod.Name)
		}
		for _, c := range claims.Items {
			left = append(left, fmt.Sprintf("claim %s (%s, finalizers %v)", c.Name, c.Status.Phase, c.Finalizers))
		}
		for _, pv := range pvs.Items {
			left = append(left, fmt.Sprintf("volume %s (%s, finalizers %v)", pv.Name, pv.Status.Phase, pv.Finalizers))
		}
		for _, e := range entries {
			left = append(left, "directory "+e.Name())
		}
		if len(left) > 0 {
			return false, errors.New(strings.Join(left, "; "))
		}
		return true, nil
	})
}

// getBody GETs url and returns the body of a 200 answer.
func getBody(ctx context.Context, url string) (string, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	if err != nil {
		return "", err
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return "", err
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	if resp.StatusCode != http.StatusOK {
		return "", fmt.Errorf("GET %s: %s", url, resp.Status)
	}
	return string(body), err
}
