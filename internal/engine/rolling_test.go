package engine

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	dynamicfake "k8s.io/client-go/dynamic/fake"
	"k8s.io/client-go/tools/record"

	"github.com/metalambda/metalambda/internal/apis/metacontroller/v1alpha1"
	"github.com/metalambda/metalambda/internal/engine/discovery"
	"github.com/metalambda/metalambda/internal/engine/informer"
)

func pod(name, version string, ready bool) *unstructured.Unstructured {
	status := "False"
	if ready {
		status = "True"
	}
	return &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": "v1", "kind": "Pod",
		"metadata": map[string]any{"name": name, "namespace": "ns", "annotations": map[string]any{"version": version}},
		"status":   map[string]any{"conditions": []any{map[string]any{"type": "Ready", "status": status}}},
	}}
}

// rollingController is a composite controller of Pods rolled with a Ready check,
// enough to run the rollout logic without an API server.
func rollingController(method v1alpha1.ChildUpdateMethod) *controller {
	trueStatus := "True"
	return &controller{
		children: []*childType{{
			res:    &discovery.Resource{GroupVersionResource: schema.GroupVersionResource{Version: "v1", Resource: "pods"}, Kind: "Pod", Namespaced: true},
			method: method,
			checks: &v1alpha1.ChildUpdateStatusChecks{Conditions: []v1alpha1.StatusConditionCheck{{Type: "Ready", Status: &trueStatus}}},
		}},
		flavor: &composite{},
		env:    &environment{opts: Defaults(), own: newOwnWrites()},
	}
}

func desiredPods(version string, names ...string) *outcome {
	out := &outcome{}
	for _, n := range names {
		d := pod(n, version, false)
		delete(d.Object, "status")
		out.desired = append(out.desired, d)
	}
	return out
}

func rev(name string, out *outcome, claims ...string) *revision {
	r := &revision{name: name, out: out, claims: map[childID]bool{}, desired: map[childID]*unstructured.Unstructured{}}
	for _, c := range claims {
		r.claims[childID{kind: "Pod", name: c}] = true
	}
	for _, d := range out.desired {
		r.desired[idOf(d)] = d
	}
	return r
}

func claimed(r *revision) string {
	var names []string
	for _, n := range []string{"a", "b", "c"} {
		if r.claims[childID{kind: "Pod", name: n}] {
			names = append(names, n)
		}
	}
	return strings.Join(names, ",")
}

func TestRollMovesOneChildWhenTheMovedOnesPassTheirChecks(t *testing.T) {
	parent := &unstructured.Unstructured{Object: map[string]any{"metadata": map[string]any{"name": "p", "uid": "u1"}}}
	tests := []struct {
		name            string
		observed        []*unstructured.Unstructured
		latestClaims    []string
		oldClaims       []string
		wantLatest      string
		wantOld         string
		wantReason      string
		wantMessagePart string
	}{{
		name:       "first move",
		observed:   []*unstructured.Unstructured{pod("a", "v1", true), pod("b", "v1", true), pod("c", "v1", true)},
		oldClaims:  []string{"a", "b", "c"},
		wantLatest: "a", wantOld: "b,c", wantReason: ReasonRolloutProgressing, wantMessagePart: "updating Pod a",
	}, {
		name:         "a moved but not Ready yet",
		observed:     []*unstructured.Unstructured{pod("a", "v2", false), pod("b", "v1", true), pod("c", "v1", true)},
		latestClaims: []string{"a"}, oldClaims: []string{"b", "c"},
		wantLatest: "a", wantOld: "b,c", wantReason: ReasonRolloutWaiting, wantMessagePart: `Pod a fails its status check: condition "Ready" has status "False", want "True"`,
	}, {
		name:         "a moved and recreating",
		observed:     []*unstructured.Unstructured{pod("b", "v1", true), pod("c", "v1", true)},
		latestClaims: []string{"a"}, oldClaims: []string{"b", "c"},
		wantLatest: "a", wantOld: "b,c", wantReason: ReasonRolloutWaiting, wantMessagePart: "waiting for Pod a to exist",
	}, {
		name:         "a moved and Ready: b goes next",
		observed:     []*unstructured.Unstructured{pod("a", "v2", true), pod("b", "v1", true), pod("c", "v1", true)},
		latestClaims: []string{"a"}, oldClaims: []string{"b", "c"},
		wantLatest: "a,b", wantOld: "c", wantReason: ReasonRolloutProgressing, wantMessagePart: "updating Pod b",
	}, {
		name:         "a child already as the latest wants moves at once",
		observed:     []*unstructured.Unstructured{pod("a", "v2", true), pod("b", "v1", true), pod("c", "v2", false)},
		latestClaims: []string{"a"}, oldClaims: []string{"b", "c"},
		wantLatest: "a,c", wantOld: "b", wantReason: ReasonRolloutWaiting, wantMessagePart: "Pod c fails its status check",
	}, {
		name:         "done",
		observed:     []*unstructured.Unstructured{pod("a", "v2", true), pod("b", "v2", true), pod("c", "v2", true)},
		latestClaims: []string{"a", "b", "c"},
		wantLatest:   "a,b,c", wantOld: "", wantReason: ReasonOnLatestRevision, wantMessagePart: "latest ControllerRevision: latest",
	}}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c := rollingController(v1alpha1.ChildUpdateRollingRecreate)
			observed := map[childID]*unstructured.Unstructured{}
			for _, o := range tt.observed {
				c.flavor.prepareChild(parent, o)
				if err := c.stamp(o); err != nil {
					t.Fatal(err)
				}
				observed[idOf(o)] = o
			}
			latest := rev("latest", desiredPods("v2", "a", "b", "c"), tt.latestClaims...)
			old := rev("old", desiredPods("v1", "a", "b", "c"), tt.oldClaims...)
			c.roll(parent, []*revision{latest, old}, observed)
			if got := claimed(latest); got != tt.wantLatest {
				t.Errorf("latest claims %q, want %q", got, tt.wantLatest)
			}
			if got := claimed(old); got != tt.wantOld {
				t.Errorf("old claims %q, want %q", got, tt.wantOld)
			}
			cond := fmt.Sprint(latest.out.status["conditions"])
			if !strings.Contains(cond, "reason:"+tt.wantReason) || !strings.Contains(cond, tt.wantMessagePart) {
				t.Errorf("conditions %s, want reason %s and a message with %q", cond, tt.wantReason, tt.wantMessagePart)
			}
		})
	}
}

// Children an older revision still claims keep that revision's desired state.
// RollingInPlace also waits until a moved child's controller observed its new spec.
func TestRollingInPlaceWaitsForObservedGeneration(t *testing.T) {
	parent := &unstructured.Unstructured{Object: map[string]any{"metadata": map[string]any{"name": "p", "uid": "u1"}}}
	c := rollingController(v1alpha1.ChildUpdateRollingInPlace)
	observed := map[childID]*unstructured.Unstructured{}
	for _, o := range []*unstructured.Unstructured{pod("a", "v2", true), pod("b", "v1", true)} {
		c.flavor.prepareChild(parent, o)
		if err := c.stamp(o); err != nil {
			t.Fatal(err)
		}
		observed[idOf(o)] = o
	}
	a := observed[childID{kind: "Pod", name: "a"}]
	a.SetGeneration(2)
	_ = unstructured.SetNestedField(a.Object, int64(1), "status", "observedGeneration")
	latest := rev("latest", desiredPods("v2", "a", "b"), "a")
	old := rev("old", desiredPods("v1", "a", "b"), "b")
	c.roll(parent, []*revision{latest, old}, observed)
	if got := claimed(old); got != "b" {
		t.Errorf("b moved before a observed its generation: old claims %q", got)
	}
	if cond := fmt.Sprint(latest.out.status["conditions"]); !strings.Contains(cond, "waiting for Pod a to observe generation 2 (status.observedGeneration is 1)") {
		t.Errorf("conditions %s", cond)
	}
	_ = unstructured.SetNestedField(a.Object, int64(2), "status", "observedGeneration")
	latest, old = rev("latest", desiredPods("v2", "a", "b"), "a"), rev("old", desiredPods("v1", "a", "b"), "b")
	c.roll(parent, []*revision{latest, old}, observed)
	if got := claimed(latest); got != "a,b" {
		t.Errorf("once a observed its generation, latest claims %q, want a,b", got)
	}
}

func TestMergeKeepsOlderRevisionsChildren(t *testing.T) {
	latest := rev("latest", desiredPods("v2", "a", "b"), "a")
	latest.out.status = map[string]any{"from": "latest"}
	latest.out.resyncAfter = 30 * time.Second
	old := rev("old", desiredPods("v1", "a", "b"), "b")
	old.out.status = map[string]any{"from": "old"}
	old.out.resyncAfter = 10 * time.Second
	out := merge([]*revision{latest, old})
	var got []string
	for _, d := range out.desired {
		got = append(got, d.GetName()+"="+d.GetAnnotations()["version"])
	}
	if strings.Join(got, " ") != "a=v2 b=v1" {
		t.Errorf("merged children %v, want a=v2 b=v1", got)
	}
	if out.status["from"] != "latest" || out.resyncAfter != 10*time.Second {
		t.Errorf("status %v resync %v; want the latest's status and the smallest resync", out.status, out.resyncAfter)
	}
}

func TestRevisionNameIsUpstreams(t *testing.T) {
	p := &parentType{res: &discovery.Resource{GroupVersionResource: schema.GroupVersionResource{Group: "ctl.example.com", Version: "v1", Resource: "catsets"}}}
	// sha1("uid-1" + `{"spec":{"replicas":3}}`)
	got := revisionName(p, "uid-1", []byte(`{"spec":{"replicas":3}}`))
	if !strings.HasPrefix(got, "catsets.ctl.example.com-") || len(got) != len("catsets.ctl.example.com-")+40 {
		t.Errorf("revision name %q", got)
	}
	if again := revisionName(p, "uid-1", []byte(`{"spec":{"replicas":3}}`)); again != got {
		t.Errorf("revision names differ for the same input: %q and %q", got, again)
	}
	if other := revisionName(p, "uid-2", []byte(`{"spec":{"replicas":3}}`)); other == got {
		t.Errorf("two parents got the same revision name %q", got)
	}
}

// panicky observes by panicking.
type panicky struct{ composite }

func (*panicky) observe(context.Context, *parentType, *unstructured.Unstructured, []*childType) ([][]*unstructured.Unstructured, error) {
	panic("observe exploded")
}

func TestPanicInSyncBecomesSyncError(t *testing.T) {
	gvr := schema.GroupVersionResource{Group: "test.metalambda.dev", Version: "v1", Resource: "parents"}
	parent := &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": "test.metalambda.dev/v1", "kind": "Parent",
		"metadata": map[string]any{"name": "p", "namespace": "ns", "uid": "u1"},
	}}
	dyn := dynamicfake.NewSimpleDynamicClientWithCustomListKinds(runtime.NewScheme(), map[schema.GroupVersionResource]string{gvr: "ParentList"}, parent)
	sub := informer.NewFactory(dyn, informer.Options{}).Subscribe(gvr)
	defer sub.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if !sub.WaitForSync(ctx) {
		t.Fatal("informer did not sync")
	}
	rec := record.NewFakeRecorder(10)
	c := &controller{
		parents: []*parentType{{res: &discovery.Resource{GroupVersionResource: gvr, Kind: "Parent", Namespaced: true}, sub: sub, selects: func(*unstructured.Unstructured) bool { return true }}},
		flavor:  &panicky{},
		env:     &environment{opts: Defaults(), recorder: rec, own: newOwnWrites()},
	}
	_, err := c.newLoop().Handle(ctx, parentKey{namespace: "ns", name: "p"}) // the work loop recovers the panic
	if err == nil || !strings.Contains(err.Error(), "observe exploded") {
		t.Fatalf("reconcile returned %v, want the panic as an error", err)
	}
	select {
	case ev := <-rec.Events:
		if !strings.HasPrefix(ev, "Warning SyncError internal error in the engine") || !strings.Contains(ev, "observe exploded") {
			t.Errorf("event %q", ev)
		}
	default:
		t.Error("no SyncError event")
	}
}
