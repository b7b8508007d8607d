//go:build integration

package gateway

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"slices"
	"sort"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/types"

	fnv1 "github.com/metalambda/metalambda/internal/apis/metalambda/v1alpha1"
	"github.com/metalambda/metalambda/internal/engine"
	"github.com/metalambda/metalambda/internal/kubetest"
	"github.com/metalambda/metalambda/internal/rollout"
)

// failingJS answers like versionedJS, and throws for the parents it names.
const failingJS = `function sync(request) {
  var p = request.parent;
  if (%s.indexOf(p.metadata.name) >= 0) { throw new Error("broken for " + p.metadata.name); }
  return {children: [{apiVersion: "v1", kind: "ConfigMap", metadata: {name: p.metadata.name}, data: {code: %q}}]};
}`

// hookCounter sits between the engine and the gateway's hook URL and counts the
// calls per parent and per code version the answer comes from ("error" for a
// failed call).
type hookCounter struct {
	target string
	mu     sync.Mutex
	calls  map[string]map[string]int
}

func (h *hookCounter) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	body, _ := io.ReadAll(r.Body)
	resp, err := http.Post(h.target+r.URL.Path, "application/json", bytes.NewReader(body))
	if err != nil {
		http.Error(w, err.Error(), http.StatusBadGateway)
		return
	}
	defer resp.Body.Close()
	data, _ := io.ReadAll(resp.Body)
	var req struct {
		Parent struct {
			Metadata struct{ Name string } `json:"metadata"`
		} `json:"parent"`
	}
	var answer struct {
		Children []struct {
			Data map[string]string `json:"data"`
		} `json:"children"`
	}
	_ = json.Unmarshal(body, &req)
	version := "error"
	if resp.StatusCode == http.StatusOK && json.Unmarshal(data, &answer) == nil && len(answer.Children) > 0 {
		version = answer.Children[0].Data["code"]
	}
	h.mu.Lock()
	if h.calls[req.Parent.Metadata.Name] == nil {
		h.calls[req.Parent.Metadata.Name] = map[string]int{}
	}
	h.calls[req.Parent.Metadata.Name][version]++
	h.mu.Unlock()
	w.Header().Set("Content-Type", resp.Header.Get("Content-Type"))
	w.WriteHeader(resp.StatusCode)
	_, _ = w.Write(data)
}

func (h *hookCounter) count(parent, version string) int {
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.calls[parent][version]
}

// rolloutRig is a gateway, an engine, a Function "versioned" with a rollout
// policy, and a CompositeController whose n parents get one ConfigMap each from
// its code, through a hookCounter.
type rolloutRig struct {
	g       *testGateway
	ns      string
	base    string
	counter *hookCounter
	uids    map[string]types.UID // parent name -> UID
	// stopEngine stops the engine the rig started.
	stopEngine func()
}

func newRolloutRig(t *testing.T, n int, policy map[string]any) *rolloutRig {
	t.Helper()
	r := &rolloutRig{g: startGateway(t), ns: env.Namespace(t), uids: map[string]types.UID{}}
	ctx := kubetest.Context(t)
	env.InstallCRDs(t, kubetest.SchemalessCRD(versionGreetings.Group, "Greeting", "greetings", "greeting"))
	r.base = "/v1/namespaces/" + r.ns + "/functions"
	if res := r.g.do(t, "POST", r.base, r.g.token, map[string]any{"name": "versioned", "runtime": "javascript", "source": fmt.Sprintf(versionedJS, "v1"), "rollout": policy}); res.status != http.StatusCreated {
		t.Fatalf("register = %d %s", res.status, res.raw)
	}
	waitFunction(t, r.ns, "versioned", func(o *unstructured.Unstructured) error { return readyIs(o, "True", "Compiled") })
	r.counter = &hookCounter{target: r.g.url, calls: map[string]map[string]int{}}
	proxy := httptest.NewServer(r.counter)
	t.Cleanup(proxy.Close)

	r.stopEngine = r.startEngine(t)
	// Only this test's parents: those of other tests may be in namespaces being
	// deleted, where their syncs fail.
	createVersionedController(t, r.ns, proxy.URL+"/hooks/"+r.ns+"/versioned", map[string]any{"test": r.ns})
	for i := range n {
		p := &unstructured.Unstructured{Object: map[string]any{
			"apiVersion": versionGreetings.GroupVersion().String(), "kind": "Greeting",
			"metadata": map[string]any{"name": fmt.Sprintf("p%02d", i), "labels": map[string]any{"test": r.ns}}, "spec": map[string]any{},
		}}
		created, err := env.Dynamic.Resource(versionGreetings).Namespace(r.ns).Create(ctx, p, metav1.CreateOptions{})
		if err != nil {
			t.Fatal(err)
		}
		r.uids[created.GetName()] = created.GetUID()
	}
	waitChildren(t, r.ns, n, "v1")
	return r
}

// startEngine runs an engine for the rig's controller and returns its stop.
func (r *rolloutRig) startEngine(t *testing.T) func() {
	t.Helper()
	mgr, err := engine.New(env.Config, func() engine.Options {
		o := engine.Defaults()
		o.TargetSelector = labels.SelectorFromSet(labels.Set{"test": r.ns})
		return o
	}(), prometheus.NewRegistry())
	if err != nil {
		t.Fatal(err)
	}
	return kubetest.Run(t, "the engine", mgr.Run, nil)
}

// setCode writes new code (the flat form keeps spec.rollout) and returns its
// revision's name.
func (r *rolloutRig) setCode(t *testing.T, source string) string {
	t.Helper()
	if res := r.g.do(t, "PUT", r.base+"/versioned", r.g.token, map[string]any{"runtime": "javascript", "source": source}); res.status != http.StatusOK {
		t.Fatalf("update = %d %s", res.status, res.raw)
	}
	return RevisionName("versioned", fnv1.FunctionSpec{Runtime: "javascript", Source: source})
}

// patch merge-patches the Function.
func (r *rolloutRig) patch(t *testing.T, patch string) {
	t.Helper()
	if _, err := env.Dynamic.Resource(FunctionsGVR).Namespace(r.ns).Patch(kubetest.Context(t), "versioned", types.MergePatchType, []byte(patch), metav1.PatchOptions{}); err != nil {
		t.Fatal(err)
	}
}

// versions maps each parent to the code version of its child.
func (r *rolloutRig) versions(ctx context.Context) (map[string]string, error) {
	cms, err := env.Kube.CoreV1().ConfigMaps(r.ns).List(ctx, metav1.ListOptions{})
	if err != nil {
		return nil, err
	}
	out := map[string]string{}
	for _, cm := range cms.Items {
		if _, ok := r.uids[cm.Name]; ok {
			out[cm.Name] = cm.Data["code"]
		}
	}
	return out, nil
}

// waitRollout waits until status.rollout of revision satisfies check.
func (r *rolloutRig) waitRollout(t *testing.T, revision string, check func(st fnv1.FunctionStatus) error) fnv1.FunctionStatus {
	t.Helper()
	var st fnv1.FunctionStatus
	kubetest.Eventually(t, 60*time.Second, "the rollout of "+revision+" reaches the state", func(ctx context.Context) (bool, error) {
		o, err := env.Get(ctx, FunctionsGVR, r.ns, "versioned")
		if err != nil {
			return false, err
		}
		st = functionStatus(o)
		if st.Rollout == nil || st.Rollout.Revision != revision {
			return false, fmt.Errorf("status.rollout = %+v", st.Rollout)
		}
		if err := check(st); err != nil {
			return false, fmt.Errorf("%v; status.rollout = %+v, revisions %+v", err, *st.Rollout, st.Revisions)
		}
		return true, nil
	})
	return st
}

func phaseIs(phase, reason string) func(fnv1.FunctionStatus) error {
	return func(st fnv1.FunctionStatus) error {
		if st.Rollout.Phase != phase || (reason != "" && st.Rollout.Reason != reason) {
			return fmt.Errorf("phase %s reason %s, want %s %s", st.Rollout.Phase, st.Rollout.Reason, phase, reason)
		}
		return nil
	}
}

// TestRolloutStepsThroughEveryParent: new code with spec.rollout moves the parents
// step by step. At each step exactly the parents covered by the step's share have
// children from the new code, the rollout completes with every parent on it, and
// no parent's hook ran on the new code more than the move and the engine's one
// follow-up sync after writing its child.
func TestRolloutStepsThroughEveryParent(t *testing.T) {
	const n = 100
	steps := []int32{10, 50, 100}
	r := newRolloutRig(t, n, map[string]any{"steps": steps, "pauseSeconds": 1})
	newRev := r.setCode(t, fmt.Sprintf(versionedJS, "v2"))

	seen := map[int32]bool{}
	var violation string
	kubetest.Eventually(t, 80*time.Second, "the rollout completes, each step seen with exactly its parents moved", func(ctx context.Context) (bool, error) {
		o, err := env.Get(ctx, FunctionsGVR, r.ns, "versioned")
		if err != nil {
			return false, err
		}
		st := functionStatus(o)
		if st.Rollout == nil || st.Rollout.Revision != newRev {
			return false, fmt.Errorf("no rollout of %s yet: %+v", newRev, st.Rollout)
		}
		share := steps[st.Rollout.Step]
		got, err := r.versions(ctx)
		if err != nil {
			return false, err
		}
		// The children match the step's share once its parents synced, or still the
		// previous step's until the new step's parents are queued.
		exact, previous := true, st.Rollout.Step > 0
		for name, uid := range r.uids {
			covered := rollout.Covered(string(uid), share)
			if got[name] == "v2" && !covered {
				violation = fmt.Sprintf("at step %d (%d%%) parent %s has new children though not covered", st.Rollout.Step, share, name)
				return true, nil
			}
			exact = exact && (got[name] == "v2") == covered
			previous = previous && (got[name] == "v2") == rollout.Covered(string(uid), steps[max(st.Rollout.Step-1, 0)])
		}
		if exact {
			seen[st.Rollout.Step] = true
		}
		if previous {
			seen[st.Rollout.Step-1] = true
		}
		done := st.Rollout.Phase == fnv1.RolloutComplete && exact
		return done, fmt.Errorf("step %d phase %s, exact %v, steps seen %v", st.Rollout.Step, st.Rollout.Phase, exact, seen)
	})
	if violation != "" {
		t.Fatal(violation)
	}
	for k := range steps {
		if !seen[int32(k)] {
			t.Errorf("step %d never seen with exactly its parents on the new code (seen %v)", k, seen)
		}
	}
	st := waitRevisions(t, r.ns, "versioned", newRev, map[string]int32{newRev: 100})
	if st.Rollout.Step != 2 || st.Rollout.Failures != 0 {
		t.Errorf("status.rollout = %+v, want step 2 without failures", *st.Rollout)
	}
	for name := range r.uids {
		// The move, and the one sync that follows the engine's own write of the child.
		if c := r.counter.count(name, "v2"); c < 1 || c > 2 {
			t.Errorf("parent %s: %d calls on the new code, want 1 or 2", name, c)
		}
	}
	reasons := map[string]int{}
	for _, e := range env.Events(t, r.ns, "Function", "versioned") {
		reasons[e.Reason]++
	}
	if reasons[engine.ReasonRolloutStep] < 1 || reasons[engine.ReasonRolloutComplete] != 1 {
		t.Errorf("events on the Function by reason = %v, want RolloutStep and one RolloutComplete", reasons)
	}
}

// TestRolloutHaltsOnAFailingParent: a revision that throws for 1 parent in 20,
// with maxFailures 0, halts at the first step that moves a failing parent: the
// old code serves every parent again and the status names the failing parent.
func TestRolloutHaltsOnAFailingParent(t *testing.T) {
	const n = 40
	steps := []int32{10, 50, 100}
	r := newRolloutRig(t, n, map[string]any{"steps": steps, "pauseSeconds": 1, "maxFailures": 0})
	// 1 in 20 by name, chosen among the parents by bucket so that one moves before 100%.
	names := slices.Collect(func(yield func(string) bool) {
		for name := range r.uids {
			if !yield(name) {
				return
			}
		}
	})
	sort.Slice(names, func(i, j int) bool {
		return rollout.Bucket(string(r.uids[names[i]])) < rollout.Bucket(string(r.uids[names[j]]))
	})
	failing := []string{names[2], names[22]}
	haltStep := int32(-1)
	for k := range steps[:len(steps)-1] {
		for _, name := range failing {
			if haltStep < 0 && rollout.Covered(string(r.uids[name]), steps[k]) {
				haltStep = int32(k)
			}
		}
	}
	if haltStep < 0 {
		t.Fatalf("no failing parent among %v moves before 100%%", failing)
	}
	list, _ := json.Marshal(failing)
	newRev := r.setCode(t, fmt.Sprintf(failingJS, list, "v2"))

	st := r.waitRollout(t, newRev, phaseIs(fnv1.RolloutHalted, engine.ReasonFailureBudgetExceeded))
	if st.Rollout.Step != haltStep {
		t.Errorf("halted at step %d, want %d (the first to move one of %v)", st.Rollout.Step, haltStep, failing)
	}
	named := false
	for _, p := range st.Rollout.FailingParents {
		for _, name := range failing {
			named = named || p == "CompositeController/"+r.ns+" "+r.ns+"/"+name
		}
	}
	if !named || !strings.Contains(st.Rollout.Message, "failing: CompositeController/"+r.ns) || st.Rollout.Failures < 1 {
		t.Errorf("status.rollout = %+v, want the failing parent named", *st.Rollout)
	}
	var old string
	for _, rev := range st.Revisions {
		if rev.Name != newRev {
			old = rev.Name
		}
	}
	waitRevisions(t, r.ns, "versioned", newRev, map[string]int32{old: 100, newRev: 0})
	waitChildren(t, r.ns, n, "v1")
	o := env.MustGet(t, FunctionsGVR, r.ns, "versioned")
	if err := conditionIs(o, engine.RolloutCondition, "False", engine.ReasonFailureBudgetExceeded); err != nil {
		t.Error(err)
	}
}

// TestRolloutDriverFollowsTheControls: paused holds the rollout at its step, annotations naming
// another revision do nothing, the abort annotation halts it, and for the next
// revision resuming and the promote annotation complete it.
func TestRolloutDriverFollowsTheControls(t *testing.T) {
	const n = 20
	r := newRolloutRig(t, n, map[string]any{"steps": []int32{10, 50, 100}, "pauseSeconds": 30, "paused": true})
	v2 := r.setCode(t, fmt.Sprintf(versionedJS, "v2"))
	r.waitRollout(t, v2, phaseIs(fnv1.RolloutPaused, ""))
	r.patch(t, `{"metadata":{"annotations":{"metalambda.dev/rollout-abort":"other","metalambda.dev/rollout-promote":"other"}}}`)
	time.Sleep(3 * time.Second)
	st := r.waitRollout(t, v2, phaseIs(fnv1.RolloutPaused, ""))
	if st.Rollout.Step != 0 {
		t.Fatalf("paused rollout moved to step %d", st.Rollout.Step)
	}

	r.patch(t, fmt.Sprintf(`{"metadata":{"annotations":{%q:%q}}}`, fnv1.AbortAnnotation, v2))
	st = r.waitRollout(t, v2, phaseIs(fnv1.RolloutHalted, engine.ReasonAborted))
	if !strings.Contains(st.Rollout.Message, "aborted") {
		t.Errorf("halt message = %q", st.Rollout.Message)
	}
	waitChildren(t, r.ns, n, "v1")

	v3 := r.setCode(t, fmt.Sprintf(versionedJS, "v3"))
	r.waitRollout(t, v3, phaseIs(fnv1.RolloutPaused, ""))
	r.patch(t, `{"spec":{"rollout":{"paused":false}}}`)
	r.waitRollout(t, v3, phaseIs(fnv1.RolloutProgressing, ""))
	r.patch(t, fmt.Sprintf(`{"metadata":{"annotations":{%q:%q}}}`, fnv1.PromoteAnnotation, v3))
	st = r.waitRollout(t, v3, phaseIs(fnv1.RolloutComplete, engine.ReasonPromoted))
	waitRevisions(t, r.ns, "versioned", v3, map[string]int32{v3: 100})
	waitChildren(t, r.ns, n, "v3")
	reasons := map[string]int{}
	for _, e := range env.Events(t, r.ns, "Function", "versioned") {
		reasons[e.Reason]++
	}
	for _, want := range []string{engine.ReasonRolloutPaused, engine.ReasonRolloutHalted, engine.ReasonRolloutComplete} {
		if reasons[want] == 0 {
			t.Errorf("no %s event on the Function; events by reason: %v", want, reasons)
		}
	}
}

// conditionIs checks a condition of a Function's status.
func conditionIs(o *unstructured.Unstructured, typ, status, reason string) error {
	for _, c := range functionStatus(o).Conditions {
		if c.Type == typ {
			if string(c.Status) != status || c.Reason != reason {
				return fmt.Errorf("condition %s = %s %s (%s), want %s %s", typ, c.Status, c.Reason, c.Message, status, reason)
			}
			return nil
		}
	}
	return fmt.Errorf("no condition %s", typ)
}

// TestRolloutContinuesAfterEngineRestart: the rollout's state is the Function's
// status. An engine stopped mid-step is replaced by a new one, which takes the step
// up again from the status and completes the rollout.
func TestRolloutContinuesAfterEngineRestart(t *testing.T) {
	const n = 20
	r := newRolloutRig(t, n, map[string]any{"steps": []int32{50, 100}, "pauseSeconds": 8})
	v2 := r.setCode(t, fmt.Sprintf(versionedJS, "v2"))
	r.waitRollout(t, v2, phaseIs(fnv1.RolloutProgressing, ""))
	var moved []string
	for name, uid := range r.uids {
		if rollout.Covered(string(uid), 50) {
			moved = append(moved, name)
		}
	}
	kubetest.Eventually(t, 30*time.Second, "the parents of step 0 are on the new code", func(ctx context.Context) (bool, error) {
		got, err := r.versions(ctx)
		if err != nil {
			return false, err
		}
		for _, name := range moved {
			if got[name] != "v2" || r.counter.count(name, "v2") == 0 {
				return false, fmt.Errorf("parent %s on %q", name, got[name])
			}
		}
		return true, nil
	})
	r.stopEngine()
	st := r.waitRollout(t, v2, phaseIs(fnv1.RolloutProgressing, ""))
	if st.Rollout.Step != 0 {
		t.Fatalf("the stopped engine went on to step %d", st.Rollout.Step)
	}
	r.startEngine(t)
	st = r.waitRollout(t, v2, phaseIs(fnv1.RolloutComplete, ""))
	if st.Rollout.Step != 1 || st.Rollout.From == "" {
		t.Errorf("status.rollout = %+v, want step 1 from the first revision", *st.Rollout)
	}
	waitChildren(t, r.ns, n, "v2")
}
