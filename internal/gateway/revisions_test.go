package gateway

import (
	"fmt"
	"strings"
	"testing"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/util/validation"

	fnv1 "github.com/metalambda/metalambda/internal/apis/metalambda/v1alpha1"
)

func TestLiveRevisions(t *testing.T) {
	policy := &fnv1.RolloutPolicy{}
	rs := func(name string, n int64, share int32) fnv1.RevisionShare {
		return fnv1.RevisionShare{Name: name, Revision: n, Share: share}
	}
	for _, tc := range []struct {
		name   string
		policy *fnv1.RolloutPolicy
		status []fnv1.RevisionShare
		want   string
	}{
		{"first revision", nil, nil, "[{c 3 100}]"},
		{"no policy: at once", nil, []fnv1.RevisionShare{rs("a", 1, 100)}, "[{c 3 100}]"},
		{"no policy ends a rollout", nil, []fnv1.RevisionShare{rs("a", 1, 50), rs("b", 2, 50)}, "[{c 3 100}]"},
		{"policy, first revision", policy, nil, "[{c 3 100}]"},
		{"policy: the new one waits", policy, []fnv1.RevisionShare{rs("a", 1, 100)}, "[{a 1 100} {c 3 0}]"},
		{"policy: a waiting one is replaced", policy, []fnv1.RevisionShare{rs("a", 1, 100), rs("b", 2, 0)}, "[{a 1 100} {c 3 0}]"},
		{"policy: mid-rollout both stay", policy, []fnv1.RevisionShare{rs("a", 1, 50), rs("b", 2, 50)}, "[{a 1 50} {b 2 50} {c 3 0}]"},
		{"policy: back to the serving one", policy, []fnv1.RevisionShare{rs("c", 1, 100), rs("b", 2, 0)}, "[{c 3 100}]"},
		{"policy: back to a live one keeps its share", policy, []fnv1.RevisionShare{rs("c", 1, 60), rs("b", 2, 40)}, "[{b 2 40} {c 3 60}]"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			f := &fnv1.Function{Spec: fnv1.FunctionSpec{Rollout: tc.policy}, Status: fnv1.FunctionStatus{Revisions: tc.status}}
			var parts []string
			for _, r := range liveRevisions(f, "c", 3) {
				parts = append(parts, fmt.Sprintf("{%s %d %d}", r.Name, r.Revision, r.Share))
			}
			if got := "[" + strings.Join(parts, " ") + "]"; got != tc.want {
				t.Errorf("live = %s, want %s", got, tc.want)
			}
		})
	}
}

func TestRevisionNameIsStableShortAndValid(t *testing.T) {
	spec := fnv1.FunctionSpec{Runtime: "javascript", Source: "x"}
	name := RevisionName("hello", spec)
	if !strings.HasPrefix(name, "hello-") || len(name) != len("hello-")+10 || name != RevisionName("hello", spec) {
		t.Errorf("RevisionName = %q", name)
	}
	on := true
	settings := spec
	settings.History, settings.Rollout = &fnv1.FunctionHistory{Enabled: &on}, &fnv1.RolloutPolicy{PauseSeconds: 5}
	if RevisionName("hello", settings) != name {
		t.Error("the history settings or the rollout policy changed the revision")
	}
	if changed := (fnv1.FunctionSpec{Runtime: "javascript", Source: "x", TimeoutSeconds: 3}); RevisionName("hello", changed) == name {
		t.Error("a new timeout kept the revision")
	}
	long := strings.Repeat("a", 200) + "." + strings.Repeat("b", 52)
	if got := RevisionName(long, spec); len(got) > 253 || len(validation.IsDNS1123Subdomain(got)) > 0 {
		t.Errorf("RevisionName of a 253-character name = %q (%d): %v", got, len(got), validation.IsDNS1123Subdomain(got))
	}
}

// TestFlatPutKeepsSettings: the flat form of PUT says what a function runs; the
// stored history, rollout policy and history limit stay unless it names them.
func TestFlatPutKeepsSettings(t *testing.T) {
	stored := map[string]any{"runtime": "python", "source": "old", "env": map[string]any{"A": "1"},
		"history": map[string]any{"enabled": false}, "rollout": map[string]any{"pauseSeconds": int64(5)}, "revisionHistoryLimit": int64(3)}
	spec := map[string]any{"runtime": "python", "source": "new", "revisionHistoryLimit": int64(7)}
	keepSettings(spec, stored)
	want := map[string]any{"runtime": "python", "source": "new", "revisionHistoryLimit": int64(7),
		"history": map[string]any{"enabled": false}, "rollout": map[string]any{"pauseSeconds": int64(5)}}
	if fmt.Sprint(spec) != fmt.Sprint(want) {
		t.Errorf("spec = %v, want %v (env is what runs: dropped)", spec, want)
	}
}

// The revisions API, which fn history shows and fn rollback takes its target
// from, lists only ControllerRevisions whose content hashes to their name, as the
// gateway serves only those: whoever may create ControllerRevisions in the
// namespace, but not write the Function, could otherwise list code of theirs,
// under an owner reference to the Function and a revision number of their
// choosing, for the Function's writer to roll back to.
func TestListedRevisionsHashToTheirName(t *testing.T) {
	fn := &unstructured.Unstructured{}
	fn.SetAPIVersion(fnv1.Group + "/" + fnv1.Version)
	fn.SetKind(fnv1.Kind)
	fn.SetNamespace("ns")
	fn.SetName("hello")
	fn.SetUID("uid-1")
	genuine := fnv1.FunctionSpec{Runtime: "javascript", Source: "genuine"}
	forged := fnv1.FunctionSpec{Runtime: "javascript", Source: "attacker's"}
	status := &fnv1.FunctionStatus{}
	build := func(name string, spec fnv1.FunctionSpec, number int64) *unstructured.Unstructured {
		f := &fnv1.Function{Spec: spec}
		obj, err := newRevision(fn, f, name, number)
		if err != nil {
			t.Fatal(err)
		}
		return obj
	}
	if rev, ok := toRevision(fn, build(RevisionName("hello", genuine), genuine, 1), status); !ok || rev.Spec.Source != "genuine" {
		t.Errorf("a genuine revision is not listed: %v %+v", ok, rev)
	}
	for _, name := range []string{"hello-0123456789", RevisionName("hello", genuine)} {
		if rev, ok := toRevision(fn, build(name, forged, 7), status); ok {
			t.Errorf("ControllerRevision %s holding other content than its name was made from is listed: %+v", name, rev)
		}
	}
}
