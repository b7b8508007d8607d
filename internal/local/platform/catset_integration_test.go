//go:build integration

package platform

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/kubernetes"

	"github.com/metalambda/metalambda/internal/engine"
	"github.com/metalambda/metalambda/internal/kubetest"
	"github.com/metalambda/metalambda/internal/local/node"
)

// The CatSet controller: Metacontroller's StatefulSet rewrite, its pods rolled one at
// a time by the engine, each move waiting for the pods already moved to be Ready; its
// claims (one per pod and volumeClaimTemplate) are children too.
const catsetController = `
apiVersion: v1
kind: Namespace
metadata: {name: catset}
---
apiVersion: apiextensions.k8s.io/v1
kind: CustomResourceDefinition
metadata: {name: catsets.e2e.metalambda.dev}
spec:
  group: e2e.metalambda.dev
  scope: Namespaced
  names: {plural: catsets, singular: catset, kind: CatSet, listKind: CatSetList}
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
---
apiVersion: metacontroller.k8s.io/v1alpha1
kind: CompositeController
metadata: {name: catset-controller}
spec:
  generateSelector: true
  parentResource:
    apiVersion: e2e.metalambda.dev/v1
    resource: catsets
    revisionHistory: {fieldPaths: [spec.template]}
  childResources:
  - apiVersion: v1
    resource: pods
    updateStrategy:
      method: RollingRecreate
      statusChecks:
        conditions:
        - {type: Ready, status: "True"}
  - apiVersion: v1
    resource: persistentvolumeclaims
  hooks:
    sync:
      webhook: {url: "%s/sync"}
`

// catsetObject is a CatSet of three python web servers whose template carries version
// (as an annotation and an environment variable); readiness is probed over HTTP on
// probePort, where the server listens only if it is 8080.
func catsetObject(version string, probePort int) []byte {
	return fmt.Appendf(nil, `
apiVersion: e2e.metalambda.dev/v1
kind: CatSet
metadata: {name: cat, namespace: catset}
spec:
  replicas: 3
  template:
    metadata:
      annotations: {version: %[1]s}
    spec:
      terminationGracePeriodSeconds: 5
      containers:
      - name: web
        image: python:3
        args: [-m, http.server, "8080"]
        env: [{name: VERSION, value: %[1]s}]
        ports: [{name: http, containerPort: 8080}]
        readinessProbe:
          httpGet: {path: /, port: %[2]d}
          periodSeconds: 1
`, version, probePort)
}

var (
	catsetsGVR = schema.GroupVersionResource{Group: "e2e.metalambda.dev", Version: "v1", Resource: "catsets"}
	catNames   = []string{"cat-0", "cat-1", "cat-2"}
)

// TestCatSetRollingUpdate proves the engine's rolling update on pods the local node
// really runs, with real readiness probes: three pods come up Ready; a template change
// recreates them one at a time in order, never more than one unready; a template
// whose pods never become Ready halts the rollout at the first pod; going back moves
// that pod back.
func TestCatSetRollingUpdate(t *testing.T) {
	hook := httptest.NewServer(http.HandlerFunc(serveCatSet))
	defer hook.Close()
	p, ctx := startWithNode(t, nodeOptions("mlcat0", "10.244.218.0/24"))
	stopped := false
	defer func() {
		if !stopped {
			p.Stop()
		}
	}()
	env := connect(t, p.Kubeconfig)
	kube := env.Kube
	if _, err := env.Apply(ctx, fmt.Appendf(nil, catsetController, hook.URL)); err != nil {
		t.Fatal(err)
	}
	pods := watchPods(t, ctx, kube, "catset")
	defer pods.stop()
	defer func() {
		if !stopped {
			dumpOnFailure(t, ctx, env)
		}
	}()
	apply := func(version string, probePort int) time.Time {
		kubetest.Eventually(t, time.Minute, "the CatSet "+version+" is applied", func(ctx context.Context) (bool, error) {
			_, err := env.Apply(ctx, catsetObject(version, probePort))
			return err == nil, err
		})
		return time.Now()
	}
	dyn := env.Dynamic
	catsets := dyn.Resource(catsetsGVR).Namespace("catset")
	waitParent := func(what string, cond func(*unstructured.Unstructured) error) {
		t.Helper()
		kubetest.Eventually(t, time.Minute, what, func(ctx context.Context) (bool, error) {
			cs, err := catsets.Get(ctx, "cat", metav1.GetOptions{})
			if err != nil {
				return false, nil // keep the last reason rather than the deadline's
			}
			err = cond(cs)
			return err == nil, err
		})
	}
	rolledOut := func(version string) func(*unstructured.Unstructured) error {
		return func(cs *unstructured.Unstructured) error {
			if c := updatedCondition(cs); c["status"] != "True" || c["reason"] != engine.ReasonOnLatestRevision {
				return fmt.Errorf("Updated condition %v", c)
			}
			if ready, _, _ := unstructured.NestedInt64(cs.Object, "status", "readyReplicas"); ready != 3 {
				return fmt.Errorf("status.readyReplicas %d", ready)
			}
			return pods.expect(version, version, version)
		}
	}

	// 1. Three pods come up Ready on the first revision, in order (the hook adds a pod
	// once the lower ordinals are Ready).
	start := apply("v1", 8080)
	waitParent("three v1 pods are Ready", rolledOut("v1"))
	t.Logf("v1: 3 pods Ready %s after the CatSet was created", time.Since(start).Round(time.Millisecond))
	pods.logReadiness(t, start)
	if _, created := pods.phase(); !slices.Equal(created, []string{"cat-0/v1", "cat-1/v1", "cat-2/v1"}) {
		t.Errorf("pods were created in the order %v, want cat-0, cat-1, cat-2 on v1", created)
	}
	checkServing(t, ctx, kube)

	// 2. A new template: pods are recreated one at a time, in order, never more than
	// one missing or unready; the history is pruned to the latest revision.
	pods.mark()
	start = apply("v2", 8080)
	waitParent("the v2 rollout is done", rolledOut("v2"))
	t.Logf("v2: rollout of 3 pods done %s after the template changed", time.Since(start).Round(time.Millisecond))
	pods.logReadiness(t, start)
	maxUnready, created := pods.phase()
	if maxUnready != 1 {
		t.Errorf("during the rollout at most %d of the 3 pods were missing, terminating or unready at once, want 1", maxUnready)
	}
	if want := []string{"cat-0/v2", "cat-1/v2", "cat-2/v2"}; !slices.Equal(created, want) {
		t.Errorf("pods were created in the order %v, want %v", created, want)
	}
	parent, err := catsets.Get(ctx, "cat", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	kubetest.Eventually(t, 30*time.Second, "one ControllerRevision remains, owning every pod", func(ctx context.Context) (bool, error) {
		revs, err := revisionsOf(ctx, dyn, parent)
		if err != nil || len(revs) != 1 {
			return false, fmt.Errorf("%d revisions (%v)", len(revs), err)
		}
		children := fmt.Sprint(revs[0].Object["children"])
		return strings.Contains(children, "[cat-0 cat-1 cat-2]"), fmt.Errorf("children %s", children)
	})
	checkServing(t, ctx, kube)

	// 3. A template whose pods never become Ready halts the rollout at cat-0.
	pods.mark()
	before := pods.uids()
	apply("broken", 8081)
	halted := func(cs *unstructured.Unstructured) error {
		c := updatedCondition(cs)
		msg := fmt.Sprint(c["message"])
		if c["status"] != "False" || c["reason"] != engine.ReasonRolloutWaiting || !strings.Contains(msg, "Pod cat-0 ") || !strings.Contains(msg, `"Ready"`) {
			return fmt.Errorf("Updated condition %v", c)
		}
		return pods.expect("broken", "v2", "v2")
	}
	waitParent("the rollout waits for cat-0", halted)
	time.Sleep(5 * time.Second) // a halted rollout stays halted while probes keep failing
	cs, err := catsets.Get(ctx, "cat", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if err := halted(cs); err != nil {
		t.Errorf("5s later the rollout is no longer halted at cat-0: %v", err)
	}
	t.Logf("halted: %v", updatedCondition(cs)["message"])
	after := pods.uids()
	if before["cat-1"] != after["cat-1"] || before["cat-2"] != after["cat-2"] {
		t.Errorf("cat-1 or cat-2 was recreated during the halted rollout: %v -> %v", before, after)
	}
	if maxUnready, created := pods.phase(); maxUnready != 1 || !slices.Equal(created, []string{"cat-0/broken"}) {
		t.Errorf("halted rollout: at most %d pods unready at once, pods created %v; want 1 and [cat-0/broken]", maxUnready, created)
	}
	if revs, err := revisionsOf(ctx, dyn, parent); err != nil || len(revs) != 2 {
		t.Errorf("%d ControllerRevisions during the halted rollout (%v), want 2", len(revs), err)
	}

	// 4. Going back to v2 moves cat-0 back at once; the broken revision is pruned.
	pods.mark()
	start = apply("v2", 8080)
	waitParent("back on v2", rolledOut("v2"))
	t.Logf("back on v2 %s after the template changed", time.Since(start).Round(time.Millisecond))
	if _, created := pods.phase(); !slices.Equal(created, []string{"cat-0/v2"}) {
		t.Errorf("going back recreated %v, want only [cat-0/v2]", created)
	}
	kubetest.Eventually(t, 30*time.Second, "the broken revision is pruned", func(ctx context.Context) (bool, error) {
		revs, err := revisionsOf(ctx, dyn, parent)
		return err == nil && len(revs) == 1, fmt.Errorf("%d revisions (%v)", len(revs), err)
	})

	dumpOnFailure(t, ctx, env)
	pods.stop()
	p.Stop()
	stopped = true
	if out, _ := runCmd("ip", "link", "show", "mlcat0"); !strings.Contains(out, "does not exist") {
		t.Errorf("the bridge survived Stop: %s", out)
	}
}

// dumpOnFailure logs the CatSet and its pods when the test failed.
func dumpOnFailure(t *testing.T, ctx context.Context, env *kubetest.Env) {
	if !t.Failed() {
		return
	}
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 10*time.Second)
	defer cancel()
	if cs, err := env.Dynamic.Resource(catsetsGVR).Namespace("catset").Get(ctx, "cat", metav1.GetOptions{}); err == nil {
		t.Logf("CatSet status: %v", cs.Object["status"])
	}
	if events, err := env.Kube.CoreV1().Events("catset").List(ctx, metav1.ListOptions{}); err == nil {
		for _, e := range events.Items {
			t.Logf("event %s %s: %s %s", e.InvolvedObject.Kind, e.InvolvedObject.Name, e.Reason, e.Message)
		}
	}
	pods, err := env.Kube.CoreV1().Pods("catset").List(ctx, metav1.ListOptions{})
	if err != nil {
		t.Logf("list pods: %v", err)
		return
	}
	for _, p := range pods.Items {
		t.Logf("pod %s %s node=%q phase=%s ready=%t deleting=%t message=%q containers=%+v", p.Name, p.Annotations["version"],
			p.Spec.NodeName, p.Status.Phase, podReady(&p), p.DeletionTimestamp != nil, p.Status.Message, p.Status.ContainerStatuses)
	}
}

// startWithNode starts the platform with a local node on its own bridge and subnet.
// nodeOptions are node.Defaults() on a bridge and pod subnet of the test's own.
func nodeOptions(bridge, podCIDR string) node.Options {
	o := node.Defaults()
	o.Bridge, o.PodCIDR = bridge, podCIDR
	return o
}

func startWithNode(t *testing.T, nodeOpts node.Options) (*Platform, context.Context) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	t.Cleanup(cancel)
	for attempt := 1; ; attempt++ {
		dataDir := filepath.Join(t.TempDir(), "data")
		opts := testOptions(t, dataDir)
		opts.Node = LocalNode(nodeOpts)
		var out strings.Builder
		p, err := Start(ctx, opts, &out)
		if err != nil && attempt < 3 && strings.Contains(err.Error(), "address already in use") {
			// A free port the options picked was taken by another process
			// before the platform listened on it (seen once in CI).
			t.Logf("up, attempt %d: %v; again with other ports", attempt, err)
			continue
		}
		if err != nil {
			t.Fatalf("up: %v\n%s", err, out.String())
		}
		return p, ctx
	}
}

// checkServing asks every pod's web server directly at its pod address.
func checkServing(t *testing.T, ctx context.Context, kube kubernetes.Interface) {
	t.Helper()
	for _, name := range catNames {
		pod, err := kube.CoreV1().Pods("catset").Get(ctx, name, metav1.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		code, _ := get(t, "http://"+pod.Status.PodIP+":8080/", "")
		if code != http.StatusOK || pod.Spec.NodeName == "" {
			t.Errorf("pod %s on node %q at %s answers %d", name, pod.Spec.NodeName, pod.Status.PodIP, code)
		}
	}
}

// serveCatSet is the CatSet sync hook, after Metacontroller's example: a pod
// <name>-<i> from spec.template for every existing pod, plus the first missing one
// once every lower ordinal is Ready. Pods are listed in ascending order, the order
// they roll in (upstream lists them descending, as StatefulSet rolls).
func serveCatSet(w http.ResponseWriter, r *http.Request) {
	var req struct {
		Parent   catSet `json:"parent"`
		Children struct {
			Pods   map[string]corev1.Pod                   `json:"Pod.v1"`
			Claims map[string]corev1.PersistentVolumeClaim `json:"PersistentVolumeClaim.v1"`
		} `json:"children"`
	}
	if err := json.NewDecoder(r.Body).Decode(&req); err != nil {
		http.Error(w, err.Error(), http.StatusBadRequest)
		return
	}
	resp, err := syncCatSet(req.Parent, req.Children.Pods, req.Children.Claims)
	if err != nil {
		http.Error(w, err.Error(), http.StatusUnprocessableEntity)
		return
	}
	w.Header().Set("Content-Type", "application/json")
	_ = json.NewEncoder(w).Encode(resp)
}

// catSet is what the hook reads of a CatSet.
type catSet struct {
	Metadata struct {
		Name string `json:"name"`
	} `json:"metadata"`
	Spec struct {
		Replicas             *int64           `json:"replicas"`
		Template             map[string]any   `json:"template"`
		VolumeClaimTemplates []map[string]any `json:"volumeClaimTemplates"`
	} `json:"spec"`
}

func syncCatSet(cs catSet, observed map[string]corev1.Pod, claims map[string]corev1.PersistentVolumeClaim) (map[string]any, error) {
	if cs.Spec.Replicas == nil || cs.Spec.Template == nil {
		return nil, errors.New("spec.replicas and spec.template are required")
	}
	replicas := *cs.Spec.Replicas
	byOrdinal := map[int64]corev1.Pod{}
	for _, pod := range observed {
		if i, ok := ordinal(cs.Metadata.Name, pod.Name); ok {
			byOrdinal[i] = pod
		}
	}
	var ready int64
	for ready < replicas && runningAndReady(byOrdinal[ready]) {
		ready++
	}
	var children []any
	for i := range replicas {
		if _, exists := byOrdinal[i]; exists || i == ready {
			children = append(children, newCatPod(cs.Metadata.Name, i, cs.Spec.Template, cs.Spec.VolumeClaimTemplates))
		}
	}
	catClaims, err := catSetClaims(cs, claims)
	if err != nil {
		return nil, err
	}
	children = append(children, catClaims...)
	return map[string]any{
		"status":   map[string]any{"replicas": len(byOrdinal), "readyReplicas": ready},
		"children": children,
	}, nil
}

var ordinalPattern = regexp.MustCompile(`^(.*)-(\d+)$`)

func ordinal(base, name string) (int64, bool) {
	m := ordinalPattern.FindStringSubmatch(name)
	if m == nil || m[1] != base {
		return 0, false
	}
	i, err := strconv.ParseInt(m[2], 10, 64)
	return i, err == nil
}

func runningAndReady(pod corev1.Pod) bool {
	return pod.Status.Phase == corev1.PodRunning && pod.DeletionTimestamp == nil && podReady(&pod)
}

func newCatPod(parent string, i int64, template map[string]any, claimTemplates []map[string]any) map[string]any {
	pod := runtime.DeepCopyJSON(template)
	name := fmt.Sprintf("%s-%d", parent, i)
	pod["apiVersion"], pod["kind"] = "v1", "Pod"
	_ = unstructured.SetNestedField(pod, name, "metadata", "name")
	_ = unstructured.SetNestedField(pod, name, "spec", "hostname")
	volumes, _, _ := unstructured.NestedSlice(pod, "spec", "volumes")
	for _, ct := range claimTemplates {
		volume, _, _ := unstructured.NestedString(ct, "metadata", "name")
		volumes = append(volumes, map[string]any{
			"name":                  volume,
			"persistentVolumeClaim": map[string]any{"claimName": volume + "-" + name},
		})
	}
	if len(volumes) > 0 {
		_ = unstructured.SetNestedSlice(pod, volumes, "spec", "volumes")
	}
	return pod
}

// catSetClaims are the claims of every ordinal below replicas, from each
// volumeClaimTemplate, plus those of higher ordinals that exist: as upstream, claims
// outlive a scale-down and go with the CatSet.
func catSetClaims(cs catSet, observed map[string]corev1.PersistentVolumeClaim) ([]any, error) {
	var out []any
	for _, ct := range cs.Spec.VolumeClaimTemplates {
		volume, _, _ := unstructured.NestedString(ct, "metadata", "name")
		if volume == "" {
			return nil, errors.New("a volumeClaimTemplate has no metadata.name")
		}
		base := volume + "-" + cs.Metadata.Name
		for i := range *cs.Spec.Replicas {
			out = append(out, newCatClaim(fmt.Sprintf("%s-%d", base, i), ct))
		}
		for _, claim := range observed {
			if i, ok := ordinal(base, claim.Name); ok && i >= *cs.Spec.Replicas {
				out = append(out, newCatClaim(claim.Name, ct))
			}
		}
	}
	return out, nil
}

func newCatClaim(name string, template map[string]any) map[string]any {
	claim := runtime.DeepCopyJSON(template)
	claim["apiVersion"], claim["kind"] = "v1", "PersistentVolumeClaim"
	_ = unstructured.SetNestedField(claim, name, "metadata", "name")
	return claim
}

func podReady(pod *corev1.Pod) bool {
	for _, c := range pod.Status.Conditions {
		if c.Type == corev1.PodReady {
			return c.Status == corev1.ConditionTrue
		}
	}
	return false
}

func updatedCondition(obj *unstructured.Unstructured) map[string]any {
	conds, _, _ := unstructured.NestedSlice(obj.Object, "status", "conditions")
	for _, c := range conds {
		if m, ok := c.(map[string]any); ok && m["type"] == engine.UpdatedCondition {
			return m
		}
	}
	return nil
}

// revisionsOf lists the ControllerRevisions the parent controls.
func revisionsOf(ctx context.Context, dyn dynamic.Interface, parent *unstructured.Unstructured) ([]unstructured.Unstructured, error) {
	list, err := dyn.Resource(engine.ControllerRevisions).Namespace(parent.GetNamespace()).List(ctx, metav1.ListOptions{})
	if err != nil {
		return nil, err
	}
	var out []unstructured.Unstructured
	for _, r := range list.Items {
		if ref := metav1.GetControllerOf(&r); ref != nil && ref.UID == parent.GetUID() {
			out = append(out, r)
		}
	}
	return out, nil
}

// podWatch follows the pods of a namespace from a List and a Watch at the list's
// resourceVersion. After every event it counts how many of catNames are missing,
// terminating or not Ready, and keeps the largest count since mark; it records the
// pods created since mark, and when each pod was first seen and first seen Ready.
type podWatch struct {
	w    watch.Interface
	done chan struct{}

	mu         sync.Mutex
	pods       map[string]*corev1.Pod
	seen       map[types.UID]time.Time
	readyAt    map[types.UID]time.Time
	maxUnready int
	created    []string
	ended      bool
}

func watchPods(t *testing.T, ctx context.Context, kube kubernetes.Interface, ns string) *podWatch {
	t.Helper()
	list, err := kube.CoreV1().Pods(ns).List(ctx, metav1.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	w, err := kube.CoreV1().Pods(ns).Watch(ctx, metav1.ListOptions{ResourceVersion: list.ResourceVersion})
	if err != nil {
		t.Fatal(err)
	}
	pw := &podWatch{w: w, done: make(chan struct{}), pods: map[string]*corev1.Pod{}, seen: map[types.UID]time.Time{}, readyAt: map[types.UID]time.Time{}}
	for i := range list.Items {
		pw.observe(watch.Added, &list.Items[i])
	}
	go func() {
		defer close(pw.done)
		for ev := range w.ResultChan() {
			if pod, ok := ev.Object.(*corev1.Pod); ok {
				pw.observe(ev.Type, pod)
			}
		}
		pw.mu.Lock()
		pw.ended = true
		pw.mu.Unlock()
	}()
	return pw
}

func (pw *podWatch) stop() {
	pw.w.Stop()
	<-pw.done
}

func (pw *podWatch) observe(typ watch.EventType, pod *corev1.Pod) {
	now := time.Now()
	pw.mu.Lock()
	defer pw.mu.Unlock()
	if _, ok := pw.seen[pod.UID]; !ok && typ != watch.Deleted {
		pw.seen[pod.UID] = now
		pw.created = append(pw.created, pod.Name+"/"+pod.Annotations["version"])
	}
	if _, ok := pw.readyAt[pod.UID]; !ok && podReady(pod) {
		pw.readyAt[pod.UID] = now
	}
	if typ == watch.Deleted {
		delete(pw.pods, pod.Name)
	} else {
		pw.pods[pod.Name] = pod
	}
	unready := 0
	for _, name := range catNames {
		if p := pw.pods[name]; p == nil || p.DeletionTimestamp != nil || !podReady(p) {
			unready++
		}
	}
	pw.maxUnready = max(pw.maxUnready, unready)
}

// mark starts a new phase: the largest unready count and the creations since now.
func (pw *podWatch) mark() {
	pw.mu.Lock()
	defer pw.mu.Unlock()
	pw.maxUnready, pw.created = 0, nil
}

// phase returns the largest unready count and the pods created (name/version) since mark.
func (pw *podWatch) phase() (int, []string) {
	pw.mu.Lock()
	defer pw.mu.Unlock()
	return pw.maxUnready, slices.Clone(pw.created)
}

// expect checks that catNames exist, are not terminating, carry these versions, and
// are Ready unless their version is "broken" (then they must not be).
func (pw *podWatch) expect(versions ...string) error {
	pw.mu.Lock()
	defer pw.mu.Unlock()
	if pw.ended {
		return errors.New("the pod watch ended")
	}
	for i, name := range catNames {
		p := pw.pods[name]
		switch {
		case p == nil:
			return fmt.Errorf("pod %s is missing", name)
		case p.DeletionTimestamp != nil:
			return fmt.Errorf("pod %s is terminating", name)
		case p.Annotations["version"] != versions[i]:
			return fmt.Errorf("pod %s is on %q, want %q", name, p.Annotations["version"], versions[i])
		case podReady(p) != (versions[i] != "broken"):
			return fmt.Errorf("pod %s (%s) has Ready %t", name, versions[i], podReady(p))
		}
	}
	return nil
}

func (pw *podWatch) uids() map[string]types.UID {
	pw.mu.Lock()
	defer pw.mu.Unlock()
	out := map[string]types.UID{}
	for name, p := range pw.pods {
		out[name] = p.UID
	}
	return out
}

// logReadiness logs, for each current pod, when it was created and became Ready,
// relative to start.
func (pw *podWatch) logReadiness(t *testing.T, start time.Time) {
	t.Helper()
	pw.mu.Lock()
	defer pw.mu.Unlock()
	for _, name := range catNames {
		p := pw.pods[name]
		seen, ready := pw.seen[p.UID], pw.readyAt[p.UID]
		t.Logf("%s %s: created at +%s, Ready at +%s (%s after creation)", name, p.Annotations["version"],
			seen.Sub(start).Round(time.Millisecond), ready.Sub(start).Round(time.Millisecond), ready.Sub(seen).Round(time.Millisecond))
	}
}
