package engine

import (
	"fmt"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	fnv1 "github.com/metalambda/metalambda/internal/apis/metalambda/v1alpha1"
	fnrollout "github.com/metalambda/metalambda/internal/rollout"
)

func TestFirstStep(t *testing.T) {
	steps := []int32{10, 50, 100}
	for _, tc := range []struct {
		share int32
		want  int32
	}{{0, 0}, {10, 0}, {11, 1}, {50, 1}, {90, 2}, {100, 2}} {
		if got := firstStep(steps, tc.share); got != tc.want {
			t.Errorf("firstStep(%v, %d) = %d, want %d", steps, tc.share, got, tc.want)
		}
	}
}

func TestRolloutSource(t *testing.T) {
	a, b, c := fnv1.RevisionShare{Name: "a", Revision: 1, Share: 50}, fnv1.RevisionShare{Name: "b", Revision: 2, Share: 50}, fnv1.RevisionShare{Name: "c", Revision: 3}
	for _, tc := range []struct {
		name string
		st   fnv1.FunctionStatus
		want string
	}{
		{"largest share, ties to the older", fnv1.FunctionStatus{CurrentRevision: "c", Revisions: []fnv1.RevisionShare{a, b, c}}, "a"},
		{"status.rollout.from while live", fnv1.FunctionStatus{CurrentRevision: "c", Revisions: []fnv1.RevisionShare{a, b, c}, Rollout: &fnv1.RolloutStatus{Revision: "c", From: "b"}}, "b"},
		{"from of an older rollout is not taken", fnv1.FunctionStatus{CurrentRevision: "c", Revisions: []fnv1.RevisionShare{a, b, c}, Rollout: &fnv1.RolloutStatus{Revision: "b", From: "b"}}, "a"},
		{"none", fnv1.FunctionStatus{CurrentRevision: "c", Revisions: []fnv1.RevisionShare{c}}, ""},
	} {
		got, ok := rolloutSource(&tc.st)
		if got.Name != tc.want || ok != (tc.want != "") {
			t.Errorf("%s: rolloutSource = %q %v, want %q", tc.name, got.Name, ok, tc.want)
		}
	}
}

func TestSharesAt(t *testing.T) {
	cur, from := fnv1.RevisionShare{Name: "new", Revision: 2}, fnv1.RevisionShare{Name: "old", Revision: 1, Share: 100}
	if diff := cmp.Diff([]fnv1.RevisionShare{{Name: "old", Revision: 1, Share: 90}, {Name: "new", Revision: 2, Share: 10}}, sharesAt(cur, from, 10)); diff != "" {
		t.Errorf("sharesAt 10 (-want +got):\n%s", diff)
	}
	if diff := cmp.Diff([]fnv1.RevisionShare{{Name: "new", Revision: 2, Share: 100}}, sharesAt(cur, from, 100)); diff != "" {
		t.Errorf("sharesAt 100 (-want +got):\n%s", diff)
	}
}

// TestRevisionServingMatchesCovered: the parents a share of the newest revision
// serves are the ones rollout.Covered names, as the gateway chooses them.
func TestRevisionServingMatchesCovered(t *testing.T) {
	revs := sharesAt(fnv1.RevisionShare{Name: "new", Revision: 5}, fnv1.RevisionShare{Name: "old", Revision: 4}, 30)
	for i := range 500 {
		uid := fmt.Sprintf("uid-%d", i)
		want := "old"
		if fnrollout.Covered(uid, 30) {
			want = "new"
		}
		if got := revisionServing(uid, revs); got != want {
			t.Fatalf("revisionServing(%s) = %s, want %s", uid, got, want)
		}
	}
	if got := revisionServing("x", nil); got != "" {
		t.Errorf("no revisions: %q", got)
	}
}

func TestHaltMessage(t *testing.T) {
	ro := &fnv1.RolloutStatus{Revision: "new", From: "old", Failures: 7}
	for i := range 7 {
		ro.FailingParents = append(ro.FailingParents, fmt.Sprintf("CompositeController/c ns/p%d", i))
	}
	msg := haltMessage(ReasonFailureBudgetExceeded, ro, 3)
	for _, want := range []string{"7 failed syncs", "maxFailures 3", "old serves every parent", "ns/p0", "ns/p4", "and 2 more"} {
		if !strings.Contains(msg, want) {
			t.Errorf("message %q lacks %q", msg, want)
		}
	}
	if strings.Contains(msg, "ns/p5") {
		t.Errorf("message %q names more than %d parents", msg, maxNamedFailures)
	}
	if msg := haltMessage(ReasonAborted, &fnv1.RolloutStatus{Revision: "new", From: "old"}, 0); !strings.Contains(msg, fnv1.AbortAnnotation) {
		t.Errorf("abort message %q does not name the annotation", msg)
	}
}

func TestSetRolloutCondition(t *testing.T) {
	st := &fnv1.FunctionStatus{Rollout: &fnv1.RolloutStatus{Revision: "new", Phase: fnv1.RolloutHalted, Reason: ReasonAborted, Message: "m"}}
	setRolloutCondition(st, 3)
	if c := st.Conditions[0]; c.Type != RolloutCondition || c.Status != "False" || c.Reason != ReasonAborted || c.ObservedGeneration != 3 {
		t.Errorf("halted: %+v", c)
	}
	st.Rollout.Phase = fnv1.RolloutComplete
	setRolloutCondition(st, 3)
	if c := st.Conditions[0]; len(st.Conditions) != 1 || c.Status != "True" || c.Reason != fnv1.RolloutComplete {
		t.Errorf("complete: %+v", st.Conditions)
	}
}
