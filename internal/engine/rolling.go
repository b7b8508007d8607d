package engine

import (
	"cmp"
	"context"
	"fmt"
	"maps"
	"slices"
	"sync"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	"github.com/metalambda/metalambda/internal/apis/metacontroller/v1alpha1"
)

// UpdatedCondition is the parent status condition that reports a rollout.
const UpdatedCondition = "Updated"

// Reasons of the Updated condition, as upstream names them.
const (
	ReasonRolloutWaiting     = "RolloutWaiting"
	ReasonRolloutProgressing = "RolloutProgressing"
	ReasonOnLatestRevision   = "OnLatestRevision"
)

// rollout is what a CompositeController with rolling child types needs: the parent
// fields that make a revision, and the ControllerRevisions informer.
type rollout struct {
	fieldPaths [][]string
	revisions  *childType
}

func (ct *childType) rolls() bool {
	return ct.method == v1alpha1.ChildUpdateRollingRecreate || ct.method == v1alpha1.ChildUpdateRollingInPlace
}

// childID names a child independently of its API version, as revisions record it.
type childID struct{ group, kind, name string }

func idOf(obj *unstructured.Unstructured) childID {
	return childID{group: groupOf(obj.GetAPIVersion()), kind: obj.GetKind(), name: obj.GetName()}
}

func (id childID) String() string { return id.kind + " " + id.name }

// revision is one live revision of a parent during a sync: the parent as that
// revision saw it, the children it still claims and what the hook wants for it.
type revision struct {
	name     string
	parent   *unstructured.Unstructured
	patch    map[string]any
	observed *unstructured.Unstructured // the ControllerRevision as read; nil until created
	claims   map[childID]bool
	out      *outcome
	desired  map[childID]*unstructured.Unstructured
}

// callRolling calls the hook once per live revision of the parent and merges the
// answers: a child keeps what its revision wants until the rollout moves it to the
// latest revision, one child at a time, each only once the children already moved
// pass their status checks. Revisions are written before any child is touched.
func (c *controller) callRolling(ctx context.Context, in *hookInput) (*outcome, error) {
	observedRevs, err := c.claimRevisions(ctx, in.parentType, in.parent)
	if err != nil {
		return nil, err
	}
	revs, err := c.revisionsOf(in.parentType, in.parent, observedRevs)
	if err != nil {
		return nil, err
	}
	if err := c.callEach(ctx, in, revs); err != nil {
		return nil, err
	}
	observed := map[childID]*unstructured.Unstructured{}
	for _, objs := range in.children {
		for _, o := range objs {
			observed[idOf(o)] = o
		}
	}
	c.roll(in.parent, revs, observed)
	live := slices.DeleteFunc(slices.Clone(revs[1:]), func(r *revision) bool { return len(r.claims) == 0 })
	revs = append(revs[:1], live...)
	if err := c.writeRevisions(ctx, in.parent, observedRevs, revs); err != nil {
		return nil, err
	}
	return merge(revs), nil
}

// callEach calls the hook for every revision, in parallel; any failure fails the sync.
func (c *controller) callEach(ctx context.Context, in *hookInput, revs []*revision) error {
	errs := make([]error, len(revs))
	var wg sync.WaitGroup
	for i, r := range revs {
		wg.Go(func() {
			rin := *in
			rin.parent = r.parent
			if i > 0 {
				rin.events = nil // the latest revision's answer speaks for the parent
			}
			r.out, errs[i] = c.call(ctx, &rin)
			if errs[i] != nil && i > 0 {
				errs[i] = fmt.Errorf("revision %s: %w", r.name, errs[i])
			}
		})
	}
	wg.Wait()
	for _, err := range errs {
		if err != nil {
			return err
		}
	}
	for _, r := range revs {
		r.desired = make(map[childID]*unstructured.Unstructured, len(r.out.desired))
		for _, d := range r.out.desired {
			r.desired[idOf(d)] = d
		}
	}
	return nil
}

// roll moves at most one child to the latest revision and records progress in the
// latest revision's status as the Updated condition.
func (c *controller) roll(parent *unstructured.Unstructured, revs []*revision, observed map[childID]*unstructured.Unstructured) {
	latest := revs[0]
	owner := c.reconcileClaims(revs)
	// Children no revision claims go to the latest; so do children that already
	// look as the latest revision wants them.
	for _, d := range latest.out.desired {
		id := idOf(d)
		if !c.rolling(id) {
			continue
		}
		r, claimed := owner[id]
		switch {
		case !claimed:
			latest.claims[id], owner[id] = true, latest
		case r != latest && observed[id] != nil && c.matches(parent, d, observed[id]):
			delete(r.claims, id)
			latest.claims[id], owner[id] = true, latest
		}
	}
	// Move the first child, in the hook's order, that is not on the latest revision.
	for _, d := range latest.out.desired {
		id := idOf(d)
		if !c.rolling(id) || owner[id] == latest {
			continue
		}
		if err := c.rolloutBlocked(parent, latest, observed); err != nil {
			setUpdated(latest.out, metav1.ConditionFalse, ReasonRolloutWaiting, err.Error())
			return
		}
		for _, r := range revs[1:] {
			delete(r.claims, id)
		}
		latest.claims[id] = true
		setUpdated(latest.out, metav1.ConditionFalse, ReasonRolloutProgressing, "updating "+id.String())
		return
	}
	setUpdated(latest.out, metav1.ConditionTrue, ReasonOnLatestRevision, "latest ControllerRevision: "+latest.name)
}

// reconcileClaims drops claims of child types that no longer roll and of children
// the latest revision no longer wants (they are deleted now), and gives a child
// claimed twice to the newer revision. It returns who claims what.
func (c *controller) reconcileClaims(revs []*revision) map[childID]*revision {
	owner := map[childID]*revision{}
	for _, r := range revs {
		for id := range r.claims {
			if _, taken := owner[id]; taken || !c.rolling(id) || revs[0].desired[id] == nil {
				delete(r.claims, id)
				continue
			}
			owner[id] = r
		}
	}
	return owner
}

// rolling reports whether children of id's group and kind use a rolling method.
func (c *controller) rolling(id childID) bool {
	ct := c.childTypeOfKind(id.group, id.kind)
	return ct != nil && ct.rolls()
}

func (c *controller) childTypeOfKind(group, kind string) *childType {
	for _, ct := range c.children {
		if ct.res.Group == group && ct.res.Kind == kind {
			return ct
		}
	}
	return nil
}

// matches reports whether observed already holds what desired asks for, as applying
// desired would find it (after the engine's own stamps).
func (c *controller) matches(parent, desired, observed *unstructured.Unstructured) bool {
	d := desired.DeepCopy()
	c.flavor.prepareChild(parent, d)
	if err := c.stamp(d); err != nil {
		return false
	}
	return c.inSync(d, observed)
}

// rolloutBlocked says why the rollout may not move another child: a child on the
// latest revision is missing, not updated yet, or fails its status checks.
func (c *controller) rolloutBlocked(parent *unstructured.Unstructured, latest *revision, observed map[childID]*unstructured.Unstructured) error {
	ids := slices.SortedFunc(maps.Keys(latest.claims), func(a, b childID) int {
		return cmp.Or(cmp.Compare(a.group, b.group), cmp.Compare(a.kind, b.kind), cmp.Compare(a.name, b.name))
	})
	for _, id := range ids {
		ct := c.childTypeOfKind(id.group, id.kind)
		obs := observed[id]
		switch {
		case obs == nil:
			return fmt.Errorf("waiting for %s to exist", id)
		case obs.GetDeletionTimestamp() != nil:
			return fmt.Errorf("waiting for %s to be deleted and created again", id)
		case !c.matches(parent, latest.desired[id], obs):
			return fmt.Errorf("waiting for %s to be updated", id)
		}
		if ct.method == v1alpha1.ChildUpdateRollingInPlace {
			if og, found, _ := unstructured.NestedInt64(obs.Object, "status", "observedGeneration"); found && og > 0 && og < obs.GetGeneration() {
				return fmt.Errorf("waiting for %s to observe generation %d (status.observedGeneration is %d)", id, obs.GetGeneration(), og)
			}
		}
		if err := statusChecks(ct.checks, obs); err != nil {
			return fmt.Errorf("%s fails its status check: %w", id, err)
		}
	}
	return nil
}

// statusChecks checks obj's status conditions against an update strategy's checks.
func statusChecks(checks *v1alpha1.ChildUpdateStatusChecks, obj *unstructured.Unstructured) error {
	if checks == nil {
		return nil
	}
	conds, _, _ := unstructured.NestedSlice(obj.Object, "status", "conditions")
	for _, want := range checks.Conditions {
		var got map[string]any
		for _, c := range conds {
			if m, ok := c.(map[string]any); ok && m["type"] == want.Type {
				got = m
				break
			}
		}
		if got == nil {
			return fmt.Errorf("condition %q is missing", want.Type)
		}
		if s, _ := got["status"].(string); want.Status != nil && s != *want.Status {
			return fmt.Errorf("condition %q has status %q, want %q", want.Type, s, *want.Status)
		}
		if r, _ := got["reason"].(string); want.Reason != nil && r != *want.Reason {
			return fmt.Errorf("condition %q has reason %q, want %q", want.Type, r, *want.Reason)
		}
	}
	return nil
}

// setUpdated sets the Updated condition in the status the hook asked for, replacing
// one the hook set itself.
func setUpdated(out *outcome, status metav1.ConditionStatus, reason, message string) {
	if out.status == nil {
		out.status = map[string]any{}
	}
	cond := map[string]any{"type": UpdatedCondition, "status": string(status), "reason": reason, "message": message}
	conds, _ := out.status["conditions"].([]any)
	conds = slices.DeleteFunc(slices.Clone(conds), func(c any) bool {
		m, ok := c.(map[string]any)
		return ok && m["type"] == UpdatedCondition
	})
	out.status["conditions"] = append(conds, cond)
}

// merge builds one outcome from every revision's: the latest revision's children,
// with each child an older revision still claims as that revision wants it; the
// latest revision's status; the smallest resync; finalized when all agree.
func merge(revs []*revision) *outcome {
	latest := revs[0]
	out := *latest.out
	out.desired = slices.Clone(latest.out.desired)
	for i, d := range out.desired {
		id := idOf(d)
		for _, r := range revs[1:] {
			if old := r.desired[id]; r.claims[id] && old != nil {
				out.desired[i] = old
			}
		}
	}
	for _, r := range revs[1:] {
		if r.out.resyncAfter > 0 && (out.resyncAfter == 0 || r.out.resyncAfter < out.resyncAfter) {
			out.resyncAfter = r.out.resyncAfter
		}
		out.finalized = out.finalized && r.out.finalized
	}
	return &out
}
