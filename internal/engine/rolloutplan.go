package engine

import (
	"cmp"
	"fmt"
	"slices"
	"strings"

	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	fnv1 "github.com/metalambda/metalambda/internal/apis/metalambda/v1alpha1"
	fnrollout "github.com/metalambda/metalambda/internal/rollout"
)

// The pure part of the rollout driver (rolloutdriver.go): which shares a step
// writes, which revision serves a parent under given shares, and the Rollout
// condition.

// Reasons of a halted rollout, and of the events and the Rollout condition.
const (
	ReasonFailureBudgetExceeded = "FailureBudgetExceeded"
	ReasonAborted               = "Aborted"
	ReasonRolloutStep           = "RolloutStep"
	ReasonRolloutPaused         = "RolloutPaused"
	ReasonRolloutHalted         = "RolloutHalted"
	ReasonRolloutComplete       = "RolloutComplete"
	// RolloutCondition is the condition type the driver sets on a Function.
	RolloutCondition = "Rollout"
)

// maxNamedFailures is how many failing parents a halt's message names.
const maxNamedFailures = 5

// revisionServing is the live revision (by name) that serves the parent with
// this UID under revs, as the gateway chooses it: newest revision first, by
// number (see rollout.Choose); "" for no revisions.
func revisionServing(uid string, revs []fnv1.RevisionShare) string {
	byNewest := slices.SortedFunc(slices.Values(revs), func(a, b fnv1.RevisionShare) int { return cmp.Compare(b.Revision, a.Revision) })
	shares := make([]int32, len(byNewest))
	for i, r := range byNewest {
		shares[i] = r.Share
	}
	if i := fnrollout.Choose(uid, shares); i >= 0 {
		return byNewest[i].Name
	}
	return ""
}

// firstStep is the index of the first step that gives the new revision at least
// share: a rollout never takes parents away from the revision it rolls out (a
// rollback to a live revision starts where that revision stands).
func firstStep(steps []int32, share int32) int32 {
	for k, s := range steps {
		if s >= share {
			return int32(k)
		}
	}
	return int32(len(steps) - 1)
}

// stepShare is the share of step k, the last step's past the end (the steps were
// edited mid-rollout).
func stepShare(steps []int32, k int32) int32 {
	if int(k) >= len(steps) {
		return 100
	}
	return steps[k]
}

// rolloutSource is the revision a rollout of current replaces: status.rollout.from
// while it is live, else the live revision other than current with the largest
// share, ties to the older. ok is false when there is none.
func rolloutSource(st *fnv1.FunctionStatus) (fnv1.RevisionShare, bool) {
	var best fnv1.RevisionShare
	found := false
	for _, r := range st.Revisions {
		if r.Name == st.CurrentRevision {
			continue
		}
		if st.Rollout != nil && st.Rollout.Revision == st.CurrentRevision && r.Name == st.Rollout.From {
			return r, true
		}
		if !found || r.Share > best.Share || (r.Share == best.Share && r.Revision < best.Revision) {
			best, found = r, true
		}
	}
	return best, found
}

// sharesAt are the live revisions when current serves share percent of the
// parents and from the rest, oldest first. Every other live revision is dropped:
// the rollout of an earlier revision ends when a newer one arrives.
func sharesAt(current, from fnv1.RevisionShare, share int32) []fnv1.RevisionShare {
	current.Share = share
	if share >= 100 {
		current.Share = 100
		return []fnv1.RevisionShare{current}
	}
	from.Share = 100 - share
	return []fnv1.RevisionShare{from, current}
}

// liveShare is the share status.revisions gives name, and whether it lists it.
func liveShare(st *fnv1.FunctionStatus, name string) (fnv1.RevisionShare, bool) {
	i := slices.IndexFunc(st.Revisions, func(r fnv1.RevisionShare) bool { return r.Name == name })
	if i < 0 {
		return fnv1.RevisionShare{}, false
	}
	return st.Revisions[i], true
}

// haltMessage says why a rollout halted, naming up to maxNamedFailures parents.
func haltMessage(reason string, ro *fnv1.RolloutStatus, maxFailures int32) string {
	var msg string
	if reason == ReasonAborted {
		msg = fmt.Sprintf("the rollout of %s was aborted by the %s annotation; %s serves every parent again", ro.Revision, fnv1.AbortAnnotation, ro.From)
	} else {
		msg = fmt.Sprintf("%d failed syncs of parents on %s, more than maxFailures %d; %s serves every parent again", ro.Failures, ro.Revision, maxFailures, ro.From)
	}
	if n := len(ro.FailingParents); n > 0 {
		named := ro.FailingParents[:min(n, maxNamedFailures)]
		msg += "; failing: " + strings.Join(named, ", ")
		if n > maxNamedFailures {
			msg += fmt.Sprintf(" and %d more", n-maxNamedFailures)
		}
	}
	return msg
}

// setRolloutCondition sets the Rollout condition from status.rollout: True once
// the revision serves every parent, False while it rolls out or after a halt.
func setRolloutCondition(st *fnv1.FunctionStatus, generation int64) {
	ro := st.Rollout
	c := metav1.Condition{Type: RolloutCondition, Status: metav1.ConditionFalse, Reason: ro.Phase, ObservedGeneration: generation}
	switch ro.Phase {
	case fnv1.RolloutComplete:
		c.Status, c.Message = metav1.ConditionTrue, ro.Revision+" serves every parent"
	case fnv1.RolloutHalted:
		c.Reason, c.Message = ro.Reason, ro.Message
	case fnv1.RolloutPaused:
		c.Message = fmt.Sprintf("paused at step %d: %s serves part of the parents", ro.Step, ro.Revision)
	default:
		c.Message = fmt.Sprintf("step %d: %s serves part of the parents", ro.Step, ro.Revision)
	}
	meta.SetStatusCondition(&st.Conditions, c)
}
