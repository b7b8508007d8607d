//go:build integration

package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"math/rand/v2"
	"net/http"
	"net/http/httptest"
	"slices"
	"strconv"
	"strings"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"

	"github.com/metalambda/metalambda/internal/kubetest"
)

// The fixture of the high-availability and crash tests: parents of a test CRD, each
// asking through spec.children for that many ConfigMaps, and a hook that answers with
// them and a status listing the children it was shown. A parent is converged once the
// hook has seen all of its children.

var (
	haParents  = schema.GroupVersionResource{Group: "ha.metalambda.dev", Version: "v1", Resource: "parents"}
	configMaps = schema.GroupVersionResource{Version: "v1", Resource: "configmaps"}
)

const testLabel = "metalambda.dev/test"

func installHACRDs(t *testing.T) {
	t.Helper()
	env.InstallCRDs(t)
	env.InstallCRDs(t, kubetest.SchemalessCRD(haParents.Group, "Parent", "parents", "parent"))
}

// hookListener serves the children hook and counts the calls it received, so that a
// test can tell which engine called: each engine is pointed at its own listener.
type hookListener struct {
	*httptest.Server
	calls atomic.Int64
}

func newHookListener(t *testing.T) *hookListener {
	l := &hookListener{}
	l.Server = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		l.calls.Add(1)
		syncChildren(w, r)
	}))
	t.Cleanup(l.Close)
	return l
}

// syncChildren asks for spec.children ConfigMaps, and reports in the status the
// names of the children the request showed.
func syncChildren(w http.ResponseWriter, r *http.Request) {
	var req struct {
		Parent struct {
			Metadata struct {
				Name string `json:"name"`
			} `json:"metadata"`
			Spec struct {
				Children int `json:"children"`
			} `json:"spec"`
		} `json:"parent"`
		Children map[string]map[string]json.RawMessage `json:"children"`
	}
	if err := json.NewDecoder(r.Body).Decode(&req); err != nil {
		http.Error(w, err.Error(), http.StatusBadRequest)
		return
	}
	name := req.Parent.Metadata.Name
	children := []any{}
	for i := range req.Parent.Spec.Children {
		children = append(children, map[string]any{
			"apiVersion": "v1", "kind": "ConfigMap",
			"metadata": map[string]any{"name": childName(name, i)},
			"data":     map[string]any{"parent": name, "index": strconv.Itoa(i)},
		})
	}
	observed := slices.Sorted(maps.Keys(req.Children["ConfigMap.v1"]))
	w.Header().Set("Content-Type", "application/json")
	_ = json.NewEncoder(w).Encode(map[string]any{
		"status":   map[string]any{"children": append([]string{}, observed...)},
		"children": children,
	})
}

func childName(parent string, i int) string { return fmt.Sprintf("%s-%d", parent, i) }

// createController creates the CompositeController of test namespace ns, served only
// by engines started with engineArgs(ns, ...), its hook given as a Service that each
// engine resolves to its own listener.
func createController(t *testing.T, ns string, resyncSeconds int) {
	t.Helper()
	cc := &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": "metacontroller.k8s.io/v1alpha1", "kind": "CompositeController",
		"metadata": map[string]any{"name": ns, "labels": map[string]any{testLabel: ns}},
		"spec": map[string]any{
			"generateSelector":    true,
			"resyncPeriodSeconds": int64(resyncSeconds),
			"parentResource": map[string]any{
				"apiVersion": "ha.metalambda.dev/v1", "resource": "parents",
				"labelSelector": map[string]any{"matchLabels": map[string]any{testLabel: ns}},
			},
			"childResources": []any{map[string]any{"apiVersion": "v1", "resource": "configmaps", "updateStrategy": map[string]any{"method": "InPlace"}}},
			"hooks": map[string]any{"sync": map[string]any{"webhook": map[string]any{
				"service": map[string]any{"name": "hooks", "namespace": "hook-system", "port": int64(80)}, "path": "/sync",
			}}},
		},
	}}
	client := env.Dynamic.Resource(schema.GroupVersionResource{Group: "metacontroller.k8s.io", Version: "v1alpha1", Resource: "compositecontrollers"})
	if _, err := client.Create(kubetest.Context(t), cc, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = client.Delete(context.Background(), ns, metav1.DeleteOptions{}) })
}

// engineArgs are the flags of an engine serving test namespace ns's controller and
// calling hooks at the given listener.
func engineArgs(ns string, hooks *hookListener, extra ...string) []string {
	return append([]string{"--target-label-selector=" + testLabel + "=" + ns, "--resolve-service=hooks.hook-system=" + hooks.URL}, extra...)
}

// createParents creates parents p000... asking for children[i] ConfigMaps each, and
// returns what every parent wants.
func createParents(t *testing.T, ns string, children []int) map[string]int {
	t.Helper()
	want := map[string]int{}
	for i, n := range children {
		createParent(t, ns, fmt.Sprintf("p%03d", i), n, want)
	}
	return want
}

func createParent(t *testing.T, ns, name string, children int, want map[string]int) {
	t.Helper()
	p := &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": "ha.metalambda.dev/v1", "kind": "Parent",
		"metadata": map[string]any{"name": name, "labels": map[string]any{testLabel: ns}},
		"spec":     map[string]any{"children": int64(children)},
	}}
	if _, err := env.Dynamic.Resource(haParents).Namespace(ns).Create(kubetest.Context(t), p, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	want[name] = children
}

// setChildren changes how many children a parent asks for.
func setChildren(t *testing.T, ns, name string, n int, want map[string]int) {
	t.Helper()
	patch := fmt.Sprintf(`{"spec":{"children":%d}}`, n)
	if _, err := env.Dynamic.Resource(haParents).Namespace(ns).Patch(kubetest.Context(t), name, types.MergePatchType, []byte(patch), metav1.PatchOptions{}); err != nil {
		t.Fatal(err)
	}
	want[name] = n
}

// checkExact compares the namespace with what the hook asks for: every wanted child
// exists once, controlled by its parent, with the hook's data; no other child exists;
// every parent's status lists all its children for its current generation.
func checkExact(ctx context.Context, ns string, want map[string]int) error {
	parents, err := env.Dynamic.Resource(haParents).Namespace(ns).List(ctx, metav1.ListOptions{})
	if err != nil {
		return err
	}
	var problems []error
	uids := map[string]types.UID{}
	for _, p := range parents.Items {
		uids[p.GetName()] = p.GetUID()
		var names []string
		for i := range want[p.GetName()] {
			names = append(names, childName(p.GetName(), i))
		}
		status, _, _ := unstructured.NestedStringSlice(p.Object, "status", "children")
		gen, _, _ := unstructured.NestedInt64(p.Object, "status", "observedGeneration")
		if !slices.Equal(status, names) || gen != p.GetGeneration() {
			problems = append(problems, fmt.Errorf("parent %s: status lists %v for generation %d, want %v for generation %d", p.GetName(), status, gen, names, p.GetGeneration()))
		}
	}
	if len(parents.Items) != len(want) {
		problems = append(problems, fmt.Errorf("%d parents, want %d", len(parents.Items), len(want)))
	}
	cms, err := env.Kube.CoreV1().ConfigMaps(ns).List(ctx, metav1.ListOptions{})
	if err != nil {
		return err
	}
	seen := map[string]bool{}
	for _, cm := range cms.Items {
		if cm.Name == "kube-root-ca.crt" {
			continue
		}
		seen[cm.Name] = true
		owner := metav1.GetControllerOf(&cm)
		parent, index := cm.Data["parent"], cm.Data["index"]
		i, _ := strconv.Atoi(index)
		switch {
		case owner == nil || owner.Kind != "Parent" || owner.Name != parent || owner.UID != uids[parent]:
			problems = append(problems, fmt.Errorf("child %s: controller %v, want parent %s (uid %s)", cm.Name, owner, parent, uids[parent]))
		case cm.Name != childName(parent, i) || i >= want[parent]:
			problems = append(problems, fmt.Errorf("child %s (index %s): parent %s wants %d children", cm.Name, index, parent, want[parent]))
		}
	}
	for _, name := range slices.Sorted(maps.Keys(want)) {
		for i := range want[name] {
			if !seen[childName(name, i)] {
				problems = append(problems, fmt.Errorf("child %s is missing", childName(name, i)))
			}
		}
	}
	if len(problems) > 5 {
		problems = append(problems[:5], fmt.Errorf("and %d more problems", len(problems)-5))
	}
	return errors.Join(problems...)
}

func waitExact(t *testing.T, timeout time.Duration, ns string, want map[string]int) {
	t.Helper()
	start := time.Now()
	kubetest.Eventually(t, timeout, "every parent has exactly its children and its status", throttled(func(ctx context.Context) (bool, error) {
		err := checkExact(ctx, ns, want)
		return err == nil, err
	}))
	t.Logf("converged %s after the wait began", time.Since(start).Round(100*time.Millisecond))
}

// snapshot records the UID and resourceVersion of every parent and child: any write,
// or a delete and recreate, changes it.
func snapshot(t *testing.T, ns string) map[string]string {
	t.Helper()
	out := map[string]string{}
	for _, gvr := range []schema.GroupVersionResource{haParents, configMaps} {
		list, err := env.Dynamic.Resource(gvr).Namespace(ns).List(kubetest.Context(t), metav1.ListOptions{})
		if err != nil {
			t.Fatal(err)
		}
		for _, obj := range list.Items {
			out[gvr.Resource+"/"+obj.GetName()] = string(obj.GetUID()) + "@" + obj.GetResourceVersion()
		}
	}
	return out
}

func compareSnapshots(t *testing.T, what string, before, after map[string]string) {
	t.Helper()
	var changed []string
	for _, key := range slices.Sorted(maps.Keys(before)) {
		if after[key] != before[key] {
			changed = append(changed, fmt.Sprintf("%s: %s -> %s", key, before[key], after[key]))
		}
	}
	for key := range after {
		if _, ok := before[key]; !ok {
			changed = append(changed, key+": new")
		}
	}
	if len(changed) > 0 {
		t.Errorf("%s: %d objects changed (written, or deleted and recreated):\n%s", what, len(changed), strings.Join(changed[:min(len(changed), 10)], "\n"))
	}
}

// waitIdle waits until e's listener has received at least calls hook calls and the
// engine's queues are empty: it has synced every parent and has nothing left to do.
func waitIdle(t *testing.T, e *engineProcess, hooks *hookListener, calls int64) {
	t.Helper()
	kubetest.Eventually(t, 90*time.Second, "the engine has synced every parent and its queue is empty", func(context.Context) (bool, error) {
		depth, err := e.metric("metalambda_engine_queue_depth")
		if err != nil {
			return false, err
		}
		got := hooks.calls.Load()
		return got >= calls && depth == 0, fmt.Errorf("%d of %d hook calls, queue depth %v", got, calls, depth)
	})
}

func identityOf(t *testing.T, e *engineProcess) string {
	t.Helper()
	_, body, err := e.readyz()
	if err != nil {
		t.Fatal(err)
	}
	for line := range strings.Lines(body) {
		if id, ok := strings.CutPrefix(strings.TrimSpace(line), "identity: "); ok {
			return id
		}
	}
	t.Fatalf("/readyz of %s names no identity: %q", e.name, body)
	return ""
}

// waitLeading waits until e's /readyz says it leads with its controllers ready, and
// returns when that was first seen.
func waitLeading(t *testing.T, e *engineProcess, timeout time.Duration) time.Time {
	t.Helper()
	kubetest.Eventually(t, timeout, "engine "+e.name+" leads", func(context.Context) (bool, error) {
		if !e.running() {
			return false, fmt.Errorf("engine %s exited: %v", e.name, e.err)
		}
		code, body, err := e.readyz()
		return code == 200 && strings.HasPrefix(body, "ok: leader"), fmt.Errorf("%d %q %v", code, body, err)
	})
	return time.Now()
}

// waitFollowing waits until e's /readyz answers 200 as a follower of leader.
func waitFollowing(t *testing.T, e *engineProcess, leader string) {
	t.Helper()
	kubetest.Eventually(t, 30*time.Second, "engine "+e.name+" follows "+leader, func(context.Context) (bool, error) {
		code, body, err := e.readyz()
		return code == 200 && strings.HasPrefix(body, "ok: follower") && strings.Contains(body, "leader: "+leader+"\n"), fmt.Errorf("%d %q %v", code, body, err)
	})
}

func mustMetric(t *testing.T, e *engineProcess, family string, labels ...string) float64 {
	t.Helper()
	v, err := e.metric(family, labels...)
	if err != nil {
		t.Fatal(err)
	}
	return v
}

// settleWrites waits until the engine has made no write for quiet, at most max.
func settleWrites(t *testing.T, e *engineProcess, quiet, max time.Duration) {
	t.Helper()
	last, since, deadline := mustWrites(t, e), time.Now(), time.Now().Add(max)
	for time.Since(since) < quiet && time.Now().Before(deadline) {
		time.Sleep(500 * time.Millisecond)
		if w := mustWrites(t, e); w != last {
			t.Logf("%v late writes after convergence", w-last)
			last, since = w, time.Now()
		}
	}
}

func mustWrites(t *testing.T, e *engineProcess) float64 {
	t.Helper()
	v, err := e.writes("configmaps", "parents", "parents/status")
	if err != nil {
		t.Fatal(err)
	}
	return v
}

// TestLeaderElectionHandsOver: two engines with --leader-election; only the leader
// calls hooks and writes; after a SIGKILL of the leader the follower takes over and
// changes nothing that is already right; after a SIGTERM the lease is released and a
// third engine takes over at once; a leader frozen past its lease exits with an error
// when it wakes up.
func TestLeaderElectionHandsOver(t *testing.T) {
	installHACRDs(t)
	ns := env.Namespace(t)
	createController(t, ns, 0)
	hooksA, hooksB, hooksC := newHookListener(t), newHookListener(t), newHookListener(t)
	le := []string{"--leader-election", "--leader-election-namespace=" + ns, "--leader-election-id=engine"}

	a := startEngineProcess(t, "a", engineArgs(ns, hooksA, le...)...)
	waitLeading(t, a, 60*time.Second)
	b := startEngineProcess(t, "b", engineArgs(ns, hooksB, le...)...)
	idA := identityOf(t, a)
	waitFollowing(t, b, idA)
	if idB := identityOf(t, b); idA == idB || !strings.Contains(idA, "_") {
		t.Fatalf("identities %q and %q: want hostname_unique-suffix, distinct", idA, idB)
	}
	if code, _, _ := httpGet("http://" + b.health + "/healthz"); code != 200 {
		t.Errorf("follower /healthz = %d", code)
	}

	want := createParents(t, ns, slices.Repeat([]int{3}, 20))
	waitExact(t, 60*time.Second, ns, want)
	before := snapshot(t, ns)

	// Only the leader worked: its own listener got every call, its counters moved.
	if hooksA.calls.Load() == 0 || hooksB.calls.Load() != 0 {
		t.Fatalf("hook calls: leader %d, follower %d; want some and none", hooksA.calls.Load(), hooksB.calls.Load())
	}
	if got := mustMetric(t, b, "metalambda_hook_requests_total"); got != 0 {
		t.Errorf("the follower counts %v hook requests", got)
	}
	kubetest.Eventually(t, 10*time.Second, "the leader's hook counter matches its listener", func(context.Context) (bool, error) {
		got, err := a.metric("metalambda_hook_requests_total")
		return err == nil && got == float64(hooksA.calls.Load()), fmt.Errorf("leader counts %v hook requests, its listener %d (%v)", got, hooksA.calls.Load(), err)
	})
	if n := mustMetric(t, b, "metalambda_engine_api_requests_total"); n != 0 {
		t.Errorf("the follower made %v API requests besides those on the Lease", n)
	}
	if w := mustWrites(t, a); w < float64(len(want)*4) {
		t.Errorf("the leader wrote %v times, want at least a create per child and a status per parent", w)
	}
	if mustMetric(t, a, "leader_election_master_status", "name=engine") != 1 || mustMetric(t, b, "leader_election_master_status", "name=engine") != 0 {
		t.Errorf("leader_election_master_status: want 1 on the leader, 0 on the follower")
	}

	// SIGKILL the leader: nothing releases the lease, so the follower waits for it to
	// expire.
	killed := time.Now()
	a.kill()
	took := waitLeading(t, b, 60*time.Second).Sub(killed)
	t.Logf("takeover after SIGKILL of the leader: %s (lease 15s, renew deadline 10s, retry 2s)", took.Round(100*time.Millisecond))
	waitIdle(t, b, hooksB, int64(len(want)))
	compareSnapshots(t, "the new leader resynced a converged namespace", before, snapshot(t, ns))
	if w := mustWrites(t, b); w != 0 {
		t.Errorf("the new leader wrote %v times to a converged namespace", w)
	}
	callsA := hooksA.calls.Load()

	// The new leader acts on changes.
	setChildren(t, ns, "p000", 1, want)
	createParent(t, ns, "p020", 2, want)
	waitExact(t, 60*time.Second, ns, want)
	if hooksA.calls.Load() != callsA {
		t.Errorf("the killed leader's listener got calls")
	}

	// SIGTERM releases the lease: a third engine takes over without waiting for it
	// to expire.
	c := startEngineProcess(t, "c", engineArgs(ns, hooksC, le...)...)
	waitFollowing(t, c, identityOf(t, b))
	stopped := time.Now()
	if err := b.terminate(30 * time.Second); err != nil {
		t.Errorf("the leader exited with %v after SIGTERM, want 0", err)
	}
	took = waitLeading(t, c, 30*time.Second).Sub(stopped)
	t.Logf("takeover after SIGTERM of the leader (lease released): %s", took.Round(100*time.Millisecond))
	callsB := hooksB.calls.Load()
	setChildren(t, ns, "p001", 4, want)
	waitExact(t, 60*time.Second, ns, want)
	if hooksB.calls.Load() != callsB || hooksC.calls.Load() == 0 {
		t.Errorf("after the handover: old leader's listener %d new calls, new leader's %d calls", hooksB.calls.Load()-callsB, hooksC.calls.Load())
	}

	// A leader that cannot renew (here: frozen by SIGSTOP past the lease duration)
	// finds out when it runs again and exits with an error, so that its pod
	// restarts as a follower; meanwhile a follower has taken over.
	d := startEngineProcess(t, "d", engineArgs(ns, newHookListener(t), le...)...)
	waitFollowing(t, d, identityOf(t, c))
	c.signal(syscall.SIGSTOP)
	waitLeading(t, d, 60*time.Second)
	c.signal(syscall.SIGCONT)
	select {
	case <-c.done:
	case <-time.After(30 * time.Second):
		t.Fatal("the engine that lost its lease still runs 30s after it woke up")
	}
	if code := c.exitCode(); code != 1 {
		t.Errorf("the engine that lost its lease exited with %d (%v), want 1", code, c.err)
	}
	if !strings.Contains(c.logTail(20), "leader election lost") {
		t.Errorf("the engine that lost its lease does not say so:\n%s", c.logTail(20))
	}
	setChildren(t, ns, "p002", 0, want)
	waitExact(t, 60*time.Second, ns, want)
}

// TestEngineSurvivesSIGKILL kills the engine at random points while 200 parents
// converge, changes what some parents want while it is down, restarts it, three
// times; then lets it finish. The end state is exact, and one more restart finds
// nothing to write. Once per apply strategy.
func TestEngineSurvivesSIGKILL(t *testing.T) {
	installHACRDs(t)
	for _, strategy := range []string{"server-side-apply", "three-way"} {
		t.Run(strategy, func(t *testing.T) { survivesSIGKILL(t, "--apply-strategy="+strategy) })
	}
}

func survivesSIGKILL(t *testing.T, args ...string) {
	ns := env.Namespace(t)
	createController(t, ns, 0)
	hooks := newHookListener(t)
	seed := uint64(time.Now().UnixNano())
	t.Logf("random seed %d", seed)
	rng := rand.New(rand.NewPCG(seed, 0))
	counts := make([]int, 200)
	for i := range counts {
		counts[i] = 1 + rng.IntN(4)
	}
	want := createParents(t, ns, counts)
	e := startEngineProcess(t, "engine", engineArgs(ns, hooks, append(args, "--client-go-qps=100", "--client-go-burst=200")...)...)
	for round := range 3 {
		base := hooks.calls.Load()
		k := int64(rng.IntN(300))
		waitCallsOrExact(t, hooks, base+k, ns, want)
		e.kill()
		t.Logf("round %d: SIGKILL after %d hook calls (%d in all)", round, hooks.calls.Load()-base, hooks.calls.Load())
		for range 10 {
			setChildren(t, ns, fmt.Sprintf("p%03d", rng.IntN(len(counts))), rng.IntN(5), want)
		}
		e.start()
	}
	waitExact(t, 2*time.Minute, ns, want)

	before := snapshot(t, ns)
	if err := e.terminate(30 * time.Second); err != nil {
		t.Errorf("SIGTERM: %v", err)
	}
	e.start()
	waitIdle(t, e, hooks, hooks.calls.Load()+int64(len(want)))
	compareSnapshots(t, "a restart on a converged namespace", before, snapshot(t, ns))
	if w := mustWrites(t, e); w != 0 {
		t.Errorf("a restart on a converged namespace wrote %v times", w)
	}
}

// TestEngineRecoversFromAPIServerRestart restarts kube-apiserver (etcd keeps
// running) at random points while 200 parents converge, twice. The engine keeps
// running and converges to the exact state, and a full resync then writes nothing.
func TestEngineRecoversFromAPIServerRestart(t *testing.T) {
	installHACRDs(t)
	ns := env.Namespace(t)
	createController(t, ns, 10)
	hooks := newHookListener(t)
	seed := uint64(time.Now().UnixNano())
	t.Logf("random seed %d", seed)
	rng := rand.New(rand.NewPCG(seed, 0))
	counts := make([]int, 200)
	for i := range counts {
		counts[i] = 1 + rng.IntN(4)
	}
	want := createParents(t, ns, counts)
	e := startEngineProcess(t, "engine", engineArgs(ns, hooks, "--client-go-qps=100", "--client-go-burst=200")...)
	for round := range 2 {
		base := hooks.calls.Load()
		waitCallsOrExact(t, hooks, base+int64(50+rng.IntN(250)), ns, want)
		// First a crash (SIGKILL), then a graceful stop (SIGTERM, which a busy
		// kube-apiserver may take up to its 15 s grace to honour).
		grace := time.Duration(round) * 15 * time.Second
		start := time.Now()
		if err := env.Cluster.RestartAPIServer(kubetest.Context(t), grace); err != nil {
			t.Fatalf("restart kube-apiserver: %v", err)
		}
		t.Logf("round %d: kube-apiserver stopped (grace %s) after %d hook calls; down and back in %s", round, grace, hooks.calls.Load()-base, time.Since(start).Round(100*time.Millisecond))
		if !e.running() {
			t.Fatalf("the engine exited when the API server restarted: %v", e.err)
		}
	}
	waitExact(t, 2*time.Minute, ns, want)
	if !e.running() {
		t.Fatalf("the engine exited: %v", e.err)
	}

	// Syncs that failed during the outage are still in backoff and may run once more
	// (their writes change nothing: the snapshot comparison below would see it). Once
	// writes have settled, a full resync (resyncPeriodSeconds 10) changes nothing.
	settleWrites(t, e, 5*time.Second, time.Minute)
	before := snapshot(t, ns)
	writes := writesByResource(t, e)
	waitIdle(t, e, hooks, hooks.calls.Load()+int64(len(want)))
	compareSnapshots(t, "a resync of a converged namespace", before, snapshot(t, ns))
	// The caches follow the API server again within seconds of its return
	// (see internal/engine/informer's rejoining), so the resync judges from current
	// objects and writes nothing.
	after := writesByResource(t, e)
	for _, r := range writeResources {
		if d := after[r] - writes[r]; d != 0 {
			t.Errorf("a resync of a converged namespace after API-server restarts wrote %s %v times, want 0", r, d)
		}
	}
}

var writeResources = []string{"configmaps", "parents", "parents/status"}

// writesByResource reads the engine's write counters, one per resource.
func writesByResource(t *testing.T, e *engineProcess) map[string]float64 {
	t.Helper()
	out := map[string]float64{}
	for _, r := range writeResources {
		v, err := e.writes(r)
		if err != nil {
			t.Fatal(err)
		}
		out[r] = v
	}
	return out
}

// waitCallsOrExact waits until the hook has been called calls times, or everything
// has converged already.
func waitCallsOrExact(t *testing.T, hooks *hookListener, calls int64, ns string, want map[string]int) {
	t.Helper()
	exact := throttled(func(ctx context.Context) (bool, error) {
		err := checkExact(ctx, ns, want)
		return err == nil, err
	})
	kubetest.Eventually(t, 90*time.Second, fmt.Sprintf("%d hook calls, or convergence", calls), func(ctx context.Context) (bool, error) {
		if hooks.calls.Load() >= calls {
			return true, nil
		}
		return exact(ctx)
	})
}

// throttled runs an expensive condition (a list of every parent and child) at most
// once a second, so that waiting does not load the API server under test.
func throttled(cond kubetest.Condition) kubetest.Condition {
	var last time.Time
	var ok bool
	var err error = errors.New("not checked yet")
	return func(ctx context.Context) (bool, error) {
		if time.Since(last) >= time.Second {
			last = time.Now()
			ok, err = cond(ctx)
		}
		return ok, err
	}
}
