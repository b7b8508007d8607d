//go:build integration

package engine

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/watch"

	"github.com/metalambda/metalambda/internal/kubetest"
)

// A CatSet-like controller: pods named <parent>-<i>, recreated one at a time when the
// parent's spec changes, each move waiting for the pods already moved to be Ready.
const rollingManifest = `
apiVersion: metacontroller.k8s.io/v1alpha1
kind: CompositeController
metadata:
  name: %[1]s
  labels: {metalambda.dev/test-engine: %[1]s}
spec:
  generateSelector: true
  parentResource: {apiVersion: test.metalambda.dev/v1, resource: parents, labelSelector: {matchLabels: {metalambda.dev/test-engine: %[1]s}}}
  childResources:
  - apiVersion: v1
    resource: pods
    updateStrategy:
      method: RollingRecreate
      statusChecks:
        conditions:
        - {type: Ready, status: "True"}
  hooks:
    sync:
      webhook: {url: "%[2]s/sync", timeout: 2s}
`

const catsetManifest = `
apiVersion: test.metalambda.dev/v1
kind: Parent
metadata: {name: %s}
spec: {replicas: 3, version: %s}
`

var revisionsGVR = ControllerRevisions

// catsetHook answers replicas pods carrying the parent's spec.version, and counts in
// status the pods it sees Ready. It records which versions it was asked about.
type catsetHook struct {
	mu       sync.Mutex
	versions map[string]int
}

func (h *catsetHook) sync(req map[string]any) (int, any) {
	parent := req["parent"].(map[string]any)
	name := field(parent, "metadata", "name").(string)
	version := field(parent, "spec", "version").(string)
	h.mu.Lock()
	h.versions[version]++
	h.mu.Unlock()
	var children []any
	for i := range int(field(parent, "spec", "replicas").(float64)) {
		children = append(children, map[string]any{
			"apiVersion": "v1", "kind": "Pod",
			"metadata": map[string]any{
				"name":        fmt.Sprintf("%s-%d", name, i),
				"annotations": map[string]any{"version": version},
			},
			"spec": map[string]any{"containers": []any{map[string]any{"name": "app", "image": "python:3.11"}}},
		})
	}
	ready := 0
	for _, p := range req["children"].(map[string]any)["Pod.v1"].(map[string]any) {
		if podReady(&unstructured.Unstructured{Object: p.(map[string]any)}) {
			ready++
		}
	}
	return 200, map[string]any{"status": map[string]any{"readyReplicas": ready}, "children": children}
}

func (h *catsetHook) asked(version string) int {
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.versions[version]
}

func podReady(pod *unstructured.Unstructured) bool {
	conds, _, _ := unstructured.NestedSlice(pod.Object, "status", "conditions")
	for _, c := range conds {
		if m, ok := c.(map[string]any); ok && m["type"] == "Ready" && m["status"] == "True" {
			return true
		}
	}
	return false
}

// fakeKubelet plays the node for pods no node runs: after a short delay it marks each
// pod Ready, unless the pod's version is in broken.
func fakeKubelet(t *testing.T, ns string, broken ...string) {
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	t.Cleanup(func() { cancel(); <-done })
	go func() {
		defer close(done)
		for ctx.Err() == nil {
			pods, err := env.Kube.CoreV1().Pods(ns).List(ctx, metav1.ListOptions{})
			if err == nil {
				for i := range pods.Items {
					p := &pods.Items[i]
					if p.DeletionTimestamp != nil || slices.Contains(broken, p.Annotations["version"]) || time.Since(p.CreationTimestamp.Time) < 300*time.Millisecond {
						continue
					}
					if !typedPodReady(p) {
						p.Status.Phase = corev1.PodRunning
						p.Status.Conditions = append(p.Status.Conditions, corev1.PodCondition{Type: corev1.PodReady, Status: corev1.ConditionTrue})
						_, _ = env.Kube.CoreV1().Pods(ns).UpdateStatus(ctx, p, metav1.UpdateOptions{})
					}
				}
			}
			select {
			case <-ctx.Done():
			case <-time.After(100 * time.Millisecond):
			}
		}
	}()
}

// podWatch follows the pods of one namespace and records, after every event, how many
// of the wanted pods are missing, being deleted or not Ready, and the order in which
// pods of a version were created.
type podWatch struct {
	mu         sync.Mutex
	maxUnready int
	created    []string
}

func watchPods(t *testing.T, ns string, names []string, version string) *podWatch {
	list, err := env.Kube.CoreV1().Pods(ns).List(kubetest.Context(t), metav1.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	state := map[string]*corev1.Pod{}
	for i := range list.Items {
		state[list.Items[i].Name] = &list.Items[i]
	}
	w, err := env.Kube.CoreV1().Pods(ns).Watch(kubetest.Context(t), metav1.ListOptions{ResourceVersion: list.ResourceVersion})
	if err != nil {
		t.Fatal(err)
	}
	pw := &podWatch{}
	done := make(chan struct{})
	t.Cleanup(func() { w.Stop(); <-done })
	go func() {
		defer close(done)
		for ev := range w.ResultChan() {
			pod, ok := ev.Object.(*corev1.Pod)
			if !ok {
				continue
			}
			pw.mu.Lock()
			if ev.Type == watch.Deleted {
				delete(state, pod.Name)
			} else {
				if _, seen := state[pod.Name]; !seen && ev.Type == watch.Added && pod.Annotations["version"] == version {
					pw.created = append(pw.created, pod.Name)
				}
				state[pod.Name] = pod
			}
			unready := 0
			for _, n := range names {
				p := state[n]
				if p == nil || p.DeletionTimestamp != nil || !typedPodReady(p) {
					unready++
				}
			}
			pw.maxUnready = max(pw.maxUnready, unready)
			pw.mu.Unlock()
		}
	}()
	return pw
}

func (pw *podWatch) result() (int, []string) {
	pw.mu.Lock()
	defer pw.mu.Unlock()
	return pw.maxUnready, slices.Clone(pw.created)
}

func typedPodReady(p *corev1.Pod) bool {
	for _, c := range p.Status.Conditions {
		if c.Type == corev1.PodReady {
			return c.Status == corev1.ConditionTrue
		}
	}
	return false
}

func updatedCondition(obj *unstructured.Unstructured) map[string]any {
	conds, _, _ := unstructured.NestedSlice(obj.Object, "status", "conditions")
	for _, c := range conds {
		if m, ok := c.(map[string]any); ok && m["type"] == UpdatedCondition {
			return m
		}
	}
	return nil
}

// podVersions returns the version annotation of each named pod, "" for a pod that is
// missing (deleted to be recreated, say); callers compare against full lists, so a
// missing pod reads as "not there yet".
func podVersions(t *testing.T, ns string, names []string) []string {
	t.Helper()
	out := make([]string, len(names))
	for i, n := range names {
		obj, err := env.Get(kubetest.Context(t), podsGVR, ns, n)
		switch {
		case apierrors.IsNotFound(err):
		case err != nil:
			t.Fatal(err)
		default:
			out[i] = obj.GetAnnotations()["version"]
		}
	}
	return out
}

func revisionsOfParent(t *testing.T, ns string, parent *unstructured.Unstructured) []unstructured.Unstructured {
	list, err := env.Dynamic.Resource(revisionsGVR).Namespace(ns).List(kubetest.Context(t), metav1.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	var out []unstructured.Unstructured
	for _, r := range list.Items {
		if ref := metav1.GetControllerOf(&r); ref != nil && ref.UID == parent.GetUID() {
			out = append(out, r)
		}
	}
	return out
}

func TestRollingRecreateMovesOnePodAtATime(t *testing.T) {
	setup(t)
	ns := env.Namespace(t)
	startEngine(t, ns)
	hook := &catsetHook{versions: map[string]int{}}
	server := newHookServer(t, hook.sync)
	fakeKubelet(t, ns, "broken")
	create(t, ccGVR, "", rollingManifest, ns, server.URL)
	parent := create(t, parentsGVR, ns, catsetManifest, "cat", "v1")
	names := []string{"cat-0", "cat-1", "cat-2"}

	onLatest := func(o *unstructured.Unstructured) error {
		c := updatedCondition(o)
		if c == nil || c["status"] != "True" || c["reason"] != ReasonOnLatestRevision {
			return fmt.Errorf("Updated condition %v", c)
		}
		if ready := field(o.Object, "status", "readyReplicas"); ready != int64(3) {
			return fmt.Errorf("readyReplicas %v", ready)
		}
		return nil
	}
	env.WaitFor(t, "the first revision is rolled out and every pod Ready", parentsGVR, ns, "cat", onLatest)
	if got := podVersions(t, ns, names); !slices.Equal(got, []string{"v1", "v1", "v1"}) {
		t.Fatalf("pod versions %v", got)
	}

	// v2: pods move one at a time, in the hook's order, never more than one unready.
	pw := watchPods(t, ns, names, "v2")
	patchSpec(t, ns, "cat", map[string]any{"replicas": 3, "version": "v2"})
	env.WaitFor(t, "v2 is rolled out", parentsGVR, ns, "cat", func(o *unstructured.Unstructured) error {
		if err := onLatest(o); err != nil {
			return err
		}
		if got := podVersions(t, ns, names); !slices.Equal(got, []string{"v2", "v2", "v2"}) {
			return fmt.Errorf("pod versions %v", got)
		}
		return nil
	})
	maxUnready, order := pw.result()
	if maxUnready != 1 {
		t.Errorf("at most %d pods were unready at once during the rollout, want exactly 1", maxUnready)
	}
	if !slices.Equal(order, names) {
		t.Errorf("pods were recreated in the order %v, want %v", order, names)
	}
	if hook.asked("v1") == 0 || hook.asked("v2") == 0 {
		t.Errorf("the hook was asked about v1 %d times and v2 %d times; each revision gets its own call", hook.asked("v1"), hook.asked("v2"))
	}
	// History is pruned: only the latest revision remains, claiming every pod.
	kubetest.Eventually(t, 30*time.Second, "one ControllerRevision remains", func(context.Context) (bool, error) {
		revs := revisionsOfParent(t, ns, parent)
		if len(revs) != 1 {
			return false, fmt.Errorf("%d revisions", len(revs))
		}
		names, _, _ := unstructured.NestedSlice(revs[0].Object, "children")
		return strings.Contains(fmt.Sprint(names), "[cat-0 cat-1 cat-2]") && strings.Contains(fmt.Sprint(revs[0].Object["parentPatch"]), "v2"), fmt.Errorf("revision %v", revs[0].Object)
	})

	// A version whose pods never become Ready halts the rollout at its first pod.
	patchSpec(t, ns, "cat", map[string]any{"replicas": 3, "version": "broken"})
	env.WaitFor(t, "the rollout waits for cat-0", parentsGVR, ns, "cat", func(o *unstructured.Unstructured) error {
		c := updatedCondition(o)
		if c == nil || c["reason"] != ReasonRolloutWaiting || !strings.Contains(fmt.Sprint(c["message"]), "Pod cat-0") || !strings.Contains(fmt.Sprint(c["message"]), `"Ready"`) {
			return fmt.Errorf("Updated condition %v", c)
		}
		return nil
	})
	time.Sleep(2 * time.Second) // a halted rollout must stay halted
	if got := podVersions(t, ns, names); !slices.Equal(got, []string{"broken", "v2", "v2"}) {
		t.Errorf("pod versions %v after the rollout halted, want [broken v2 v2]", got)
	}
	if revs := revisionsOfParent(t, ns, parent); len(revs) != 2 {
		t.Errorf("%d ControllerRevisions during a halted rollout, want 2", len(revs))
	}

	// Going back to v2 moves cat-0 back at once and prunes the broken revision.
	patchSpec(t, ns, "cat", map[string]any{"replicas": 3, "version": "v2"})
	env.WaitFor(t, "back on v2", parentsGVR, ns, "cat", func(o *unstructured.Unstructured) error {
		if err := onLatest(o); err != nil {
			return err
		}
		if got := podVersions(t, ns, names); !slices.Equal(got, []string{"v2", "v2", "v2"}) {
			return fmt.Errorf("pod versions %v", got)
		}
		if revs := revisionsOfParent(t, ns, parent); len(revs) != 1 {
			return fmt.Errorf("%d revisions", len(revs))
		}
		return nil
	})
}

// RollingInPlace updates children in place, one per sync, keeping their UIDs.
func TestRollingInPlaceUpdatesInPlace(t *testing.T) {
	setup(t)
	ns := env.Namespace(t)
	startEngine(t, ns)
	hook := newHookServer(t, func(req map[string]any) (int, any) {
		parent := req["parent"].(map[string]any)
		version := field(parent, "spec", "version").(string)
		var children []any
		for i := range 3 {
			children = append(children, configMap(fmt.Sprintf("cm-%d", i), map[string]any{"version": version}, nil))
		}
		return 200, map[string]any{"children": children}
	})
	inPlace := strings.NewReplacer("resource: pods", "resource: configmaps", `method: RollingRecreate
      statusChecks:
        conditions:
        - {type: Ready, status: "True"}`, "method: RollingInPlace").Replace(rollingManifest)
	if inPlace == rollingManifest || !strings.Contains(inPlace, "RollingInPlace") || !strings.Contains(inPlace, "configmaps") {
		t.Fatalf("manifest not rewritten:\n%s", inPlace)
	}
	create(t, ccGVR, "", inPlace, ns, hook.URL)
	parent := create(t, parentsGVR, ns, catsetManifest, "cat", "v1")
	versions := func() []string {
		var out []string
		for i := range 3 {
			cm, err := env.Get(kubetest.Context(t), configMapsGVR, ns, fmt.Sprintf("cm-%d", i))
			if err != nil {
				return nil
			}
			out = append(out, fmt.Sprint(field(cm.Object, "data", "version")))
		}
		return out
	}
	kubetest.Eventually(t, 30*time.Second, "v1 children exist", func(context.Context) (bool, error) {
		got := versions()
		return slices.Equal(got, []string{"v1", "v1", "v1"}), fmt.Errorf("versions %v", got)
	})
	uids := map[string]string{}
	for i := range 3 {
		name := fmt.Sprintf("cm-%d", i)
		uids[name] = string(env.MustGet(t, configMapsGVR, ns, name).GetUID())
	}
	patchSpec(t, ns, "cat", map[string]any{"replicas": 3, "version": "v2"})
	env.WaitFor(t, "v2 is rolled out in place", parentsGVR, ns, "cat", func(o *unstructured.Unstructured) error {
		if c := updatedCondition(o); c == nil || c["reason"] != ReasonOnLatestRevision {
			return fmt.Errorf("Updated condition %v", c)
		}
		if got := versions(); !slices.Equal(got, []string{"v2", "v2", "v2"}) {
			return fmt.Errorf("versions %v", got)
		}
		return nil
	})
	for name, uid := range uids {
		if got := string(env.MustGet(t, configMapsGVR, ns, name).GetUID()); got != uid {
			t.Errorf("%s was recreated (UID %s, was %s); RollingInPlace updates in place", name, got, uid)
		}
	}
	if revs := revisionsOfParent(t, ns, parent); len(revs) != 1 {
		t.Errorf("%d ControllerRevisions after the rollout, want 1", len(revs))
	}
}
