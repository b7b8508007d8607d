package engine

import (
	"context"
	"errors"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/util/retry"
	"k8s.io/client-go/util/workqueue"
	"k8s.io/klog/v2"

	fnv1 "github.com/metalambda/metalambda/internal/apis/metalambda/v1alpha1"
	"github.com/metalambda/metalambda/internal/jsonvalue"
	"github.com/metalambda/metalambda/internal/workloop"
)

// The rollout driver moves the shares of a Function's new revision step by step
// (spec.rollout), syncing the parents that move at each step and counting their
// failures, and halts the rollout (the previous revision serves everyone again)
// past the failure budget. The Function's status is its record: status.rollout
// says the revision, the step and the phase, status.revisions the shares. What
// lives in memory only is the step's bookkeeping (the moved parents not synced
// yet, failures not written yet); a restarted engine, or a new leader, rebuilds it
// by syncing the parents of the current step once more.

// controllersGrace bounds how long after its start the driver waits for every
// hosted controller to run with synced caches before it acts (a controller that
// cannot start would otherwise hold every rollout back).
const controllersGrace = 30 * time.Second

// gatewaySettle is how long after writing the shares the driver queues the parents
// that move: the time for the gateway's replicas to see the new shares. Only the
// syncs that begin after it count for the step.
const gatewaySettle = time.Second

// rolloutFieldManager names the driver's status writes.
const rolloutFieldManager = "metalambda-engine"

// errSuperseded is a status write given up because the Function moved on (a newer
// revision, or another step written meanwhile); the next sync decides again.
var errSuperseded = errors.New("the Function's rollout changed meanwhile")

// rollouts drives the rollouts of the Functions the engine follows.
type rollouts struct {
	m     *Manager
	fns   *functions
	queue workqueue.TypedRateLimitingInterface[functionKey]
	// started is when the driver was built: it waits up to controllersGrace from
	// it for the hosted controllers to start.
	started time.Time

	// active counts the steps being watched, so that observe costs an atomic load
	// when no rollout runs.
	active atomic.Int32
	mu     sync.Mutex
	steps  map[functionKey]*stepState
	byUID  map[types.UID]functionKey // the parents on a new revision, to their Function
}

// stepState is the bookkeeping of the current step of one rollout.
type stepState struct {
	revision string
	step     int32
	// since is when the step's parents were queued: syncs that began before it
	// do not count.
	since time.Time
	// pending are the parents moved at this step that have not synced since, and
	// where they are queued.
	pending map[types.UID]movedParent
	// names are the parents on the new revision, as failingParents names them.
	names    map[types.UID]string
	failures int32
	failing  []string
	// written is the failure count status.rollout holds.
	written int32
}

func newRollouts(m *Manager, fns *functions) *rollouts {
	return &rollouts{
		m: m, fns: fns,
		queue: workqueue.NewTypedRateLimitingQueueWithConfig(workqueue.DefaultTypedControllerRateLimiter[functionKey](),
			workqueue.TypedRateLimitingQueueConfig[functionKey]{Name: "metalambda-rollouts", MetricsProvider: m.env.metrics.queues}),
		steps: map[functionKey]*stepState{}, byUID: map[types.UID]functionKey{}, started: time.Now(),
	}
}

// enqueue asks for a look at the Function's rollout; nil-safe.
func (r *rollouts) enqueue(key functionKey) {
	if r != nil {
		r.queue.Add(key)
	}
}

// run drives rollouts until ctx ends.
func (r *rollouts) run(ctx context.Context) {
	loop := &workloop.Loop[functionKey]{
		Queue: r.queue, Workers: 1, Process: r.sync, Name: "metalambda-rollouts",
		Failed: func(ctx context.Context, key functionKey, err error, _ bool) {
			klog.FromContext(ctx).V(1).Info("Rollout sync failed; retrying", "function", key.namespace+"/"+key.name, "err", err.Error())
		},
	}
	loop.Run(ctx)
}

// observe is told of the end of every parent sync that called a hook: a sync of a
// parent on a rolling-out revision that began after its step was queued counts as
// done, or as a failure. It is nil-safe and costs an atomic load while no rollout
// runs.
func (r *rollouts) observe(ctx context.Context, uid types.UID, began time.Time, err error) {
	if r == nil || r.active.Load() == 0 {
		return
	}
	if err != nil && !failed(err) {
		return // no outcome yet: the parent is synced again
	}
	r.mu.Lock()
	key, ok := r.byUID[uid]
	s := r.steps[key]
	if !ok || s == nil || began.Before(s.since) {
		r.mu.Unlock()
		return
	}
	wake := false
	switch {
	case err != nil:
		klog.FromContext(ctx).V(1).Info("Parent sync failed on a rolling-out revision", "function", key.namespace+"/"+key.name, "revision", s.revision, "err", err.Error())
		s.failures++
		if name := s.names[uid]; len(s.failing) < fnv1.MaxFailingParents && !slices.Contains(s.failing, name) {
			s.failing = append(s.failing, name)
		}
		wake = true
	case s.pending[uid].c != nil:
		delete(s.pending, uid)
		wake = len(s.pending) == 0
	}
	r.mu.Unlock()
	if wake {
		r.queue.Add(key)
	}
}

// forget drops the bookkeeping of the Function's rollout.
func (r *rollouts) forget(key functionKey) {
	r.mu.Lock()
	defer r.mu.Unlock()
	s := r.steps[key]
	if s == nil {
		return
	}
	for uid := range s.names {
		if r.byUID[uid] == key {
			delete(r.byUID, uid)
		}
	}
	delete(r.steps, key)
	r.active.Add(-1)
}

// sync decides what the Function's rollout needs and does it. The Function is read
// from the API server, not the cache, which may not show the driver's last write.
func (r *rollouts) sync(ctx context.Context, key functionKey) (time.Duration, error) {
	if !r.m.controllersReady() && time.Since(r.started) < controllersGrace {
		// A step lists the parents of the controllers the Function serves: at
		// start (or on becoming the leader) wait for them to run.
		return time.Second, nil
	}
	if _, ok := r.fns.sub.Get(key.namespace, key.name); !ok {
		r.forget(key)
		r.m.env.metrics.forgetRollout(key)
		return 0, nil
	}
	obj, err := r.client(key).Get(ctx, key.name, metav1.GetOptions{})
	if apierrors.IsNotFound(err) {
		r.forget(key)
		return 0, nil
	}
	if err != nil {
		return 0, err
	}
	var f fnv1.Function
	if err := jsonvalue.Convert(obj.Object, &f); err != nil {
		return 0, workloop.Terminal(err)
	}
	ctx = klog.NewContext(ctx, klog.FromContext(ctx).WithValues("function", key.namespace+"/"+key.name))
	after, err := r.decide(ctx, key, obj, &f)
	if errors.Is(err, errSuperseded) {
		r.queue.Add(key)
		return 0, nil
	}
	return after, err
}

// decide is one look at a Function's rollout.
func (r *rollouts) decide(ctx context.Context, key functionKey, obj *unstructured.Unstructured, f *fnv1.Function) (time.Duration, error) {
	st, policy := &f.Status, f.Spec.Rollout
	current, listed := liveShare(st, st.CurrentRevision)
	ro := st.Rollout
	ours := ro != nil && listed && ro.Revision == current.Name
	switch {
	case policy == nil || !listed:
		r.forget(key)
		return 0, nil
	case ours && ro.Phase == fnv1.RolloutHalted && f.GetAnnotations()[fnv1.PromoteAnnotation] == current.Name:
		return 0, r.promote(ctx, key, obj, f)
	case ours && (ro.Phase == fnv1.RolloutHalted || ro.Phase == fnv1.RolloutComplete):
		r.forget(key)
		return 0, nil
	case current.Share >= 100:
		r.forget(key)
		if ours { // the policy went, or someone wrote the shares
			return 0, r.step(ctx, key, obj, f, int32(len(policy.StepsOrDefault())-1))
		}
		return 0, nil
	case !ours:
		if _, ok := rolloutSource(st); !ok {
			return 0, nil // nothing to roll out from; the gateway serves it alone
		}
		return 0, r.step(ctx, key, obj, f, firstStep(policy.StepsOrDefault(), current.Share))
	case f.GetAnnotations()[fnv1.AbortAnnotation] == current.Name:
		return 0, r.halt(ctx, key, obj, f, ReasonAborted)
	case f.GetAnnotations()[fnv1.PromoteAnnotation] == current.Name:
		return 0, r.promote(ctx, key, obj, f)
	}
	return r.progress(ctx, key, obj, f)
}

// progress watches the current step of a Progressing or Paused rollout: it halts
// it past the failure budget, follows spec.rollout.paused, and takes the next step
// once every moved parent synced and the pause passed.
func (r *rollouts) progress(ctx context.Context, key functionKey, obj *unstructured.Unstructured, f *fnv1.Function) (time.Duration, error) {
	policy, ro := f.Spec.Rollout, f.Status.Rollout
	s := r.stepFor(ctx, key, f)
	r.mu.Lock()
	failures, written, failing, pending, since := s.failures, s.written, slices.Clone(s.failing), len(s.pending), s.since
	r.mu.Unlock()
	if failures > policy.MaxFailures {
		return 0, r.halt(ctx, key, obj, f, ReasonFailureBudgetExceeded)
	}
	if failures != written {
		return 0, r.noteFailures(ctx, key, obj, f, failures, failing)
	}
	if policy.Paused != (ro.Phase == fnv1.RolloutPaused) {
		return 0, r.setPaused(ctx, key, obj, f, policy.Paused)
	}
	if policy.Paused {
		return 0, nil
	}
	if pending > 0 && r.prune(s) > 0 {
		// The last moved parent's sync wakes the driver; the look again is for
		// moved parents deleted meanwhile, which never sync.
		return pendingRecheck, nil
	}
	now := time.Now()
	due := since
	if ro.StepStartTime != nil {
		due = maxTime(due, ro.StepStartTime.Add(time.Duration(policy.PauseSeconds)*time.Second))
	}
	if wait := due.Sub(now); wait > 0 {
		return wait, nil
	}
	return 0, r.step(ctx, key, obj, f, ro.Step+1)
}

// pendingRecheck is how often a step whose moved parents have not all synced
// looks for moved parents deleted meanwhile.
const pendingRecheck = 10 * time.Second

// prune drops from the step's pending parents those gone from their controller's
// cache (deleted, or replaced by an object of the same name), and returns how many
// remain.
func (r *rollouts) prune(s *stepState) int {
	r.mu.Lock()
	defer r.mu.Unlock()
	for uid, mp := range s.pending {
		if obj, ok := mp.c.parents[mp.key.parent].sub.Get(mp.key.namespace, mp.key.name); !ok || obj.GetUID() != uid {
			delete(s.pending, uid)
		}
	}
	return len(s.pending)
}

func maxTime(a, b time.Time) time.Time {
	if a.After(b) {
		return a
	}
	return b
}

// stepFor is the bookkeeping of the rollout's current step, rebuilt when the
// driver has none (a restart, a new leader, or a step another replica wrote): the
// parents moved at this step are queued again and must each sync once more.
func (r *rollouts) stepFor(ctx context.Context, key functionKey, f *fnv1.Function) *stepState {
	ro := f.Status.Rollout
	r.mu.Lock()
	s := r.steps[key]
	r.mu.Unlock()
	if s != nil && s.revision == ro.Revision && s.step == ro.Step {
		return s
	}
	steps := f.Spec.Rollout.StepsOrDefault()
	current, _ := liveShare(&f.Status, ro.Revision)
	from, _ := liveShare(&f.Status, ro.From)
	before := sharesAt(current, from, 0)
	if ro.Step > 0 {
		before = sharesAt(current, from, stepShare(steps, ro.Step-1))
	}
	s = r.track(ctx, key, ro.Revision, ro.Step, before, f.Status.Revisions)
	r.mu.Lock()
	s.failures, s.written, s.failing = ro.Failures, ro.Failures, slices.Clone(ro.FailingParents)
	r.mu.Unlock()
	klog.FromContext(ctx).Info("Rollout step taken up again; its parents are synced once more", "revision", ro.Revision, "step", ro.Step, "parents", len(s.pending))
	return s
}

// track starts the bookkeeping of a step from shares before to after: the parents
// the step moves are queued (once the gateway had time to see the shares) and
// watched until each synced once.
func (r *rollouts) track(ctx context.Context, key functionKey, revision string, step int32, before, after []fnv1.RevisionShare) *stepState {
	s := &stepState{revision: revision, step: step, since: time.Now().Add(gatewaySettle), pending: map[types.UID]movedParent{}, names: map[types.UID]string{}}
	moved := r.parents(key, func(uid types.UID) (bool, bool) {
		on := revisionServing(string(uid), after) == revision
		return on, on && revisionServing(string(uid), before) != revision
	}, s)
	r.forget(key)
	r.mu.Lock()
	r.steps[key] = s
	for uid := range s.names {
		r.byUID[uid] = key
	}
	r.active.Add(1)
	r.mu.Unlock()
	r.queueAfter(moved, gatewaySettle)
	r.queue.AddAfter(key, gatewaySettle)
	klog.FromContext(ctx).V(1).Info("Rollout step watched", "revision", revision, "step", step, "moved", len(moved), "onRevision", len(s.names))
	return s
}

// movedParent is a parent to queue in one controller.
type movedParent struct {
	c   *controller
	key parentKey
}

// parents walks the parents of every controller the Function serves: on says
// whether a parent is on the rolled-out revision (recorded in s.names when s is
// set) and moved whether it moves (recorded in s.pending and returned).
func (r *rollouts) parents(key functionKey, classify func(types.UID) (on, moved bool), s *stepState) []movedParent {
	var out []movedParent
	for _, c := range r.m.servedBy(key) {
		for i, p := range c.parents {
			for _, parent := range p.sub.List("") {
				if !p.selects(parent) {
					continue
				}
				on, moved := classify(parent.GetUID())
				if s != nil && on {
					s.names[parent.GetUID()] = c.kind + "/" + c.name + " " + parentKey{namespace: parent.GetNamespace(), name: parent.GetName()}.String()
				}
				if moved {
					mp := movedParent{c: c, key: parentKey{parent: i, namespace: parent.GetNamespace(), name: parent.GetName()}}
					if s != nil {
						s.pending[parent.GetUID()] = mp
					}
					out = append(out, mp)
				}
			}
		}
	}
	return out
}

// queueAfter queues each moved parent for a sync after d.
func (r *rollouts) queueAfter(moved []movedParent, d time.Duration) {
	for _, mp := range moved {
		mp.c.queue.AddAfter(mp.key, d)
	}
}

// resyncMoved queues, untracked, the parents whose revision differs between the
// shares before and after (a halt or a promotion).
func (r *rollouts) resyncMoved(key functionKey, before, after []fnv1.RevisionShare) int {
	moved := r.parents(key, func(uid types.UID) (bool, bool) {
		return false, revisionServing(string(uid), before) != revisionServing(string(uid), after)
	}, nil)
	r.queueAfter(moved, gatewaySettle)
	return len(moved)
}

func (r *rollouts) client(key functionKey) interface {
	Get(ctx context.Context, name string, opts metav1.GetOptions, subresources ...string) (*unstructured.Unstructured, error)
	UpdateStatus(ctx context.Context, obj *unstructured.Unstructured, opts metav1.UpdateOptions) (*unstructured.Unstructured, error)
} {
	return r.m.env.dynamic.Resource(functionsGVR).Namespace(key.namespace)
}

// update writes the Function's status as mutate changes it, from the latest
// object and again on a conflict. mutate sees the latest status and returns
// errSuperseded when it moved on from what the driver decided on.
func (r *rollouts) update(ctx context.Context, key functionKey, mutate func(st *fnv1.FunctionStatus) error) (*unstructured.Unstructured, error) {
	var out *unstructured.Unstructured
	err := retry.RetryOnConflict(retry.DefaultRetry, func() error {
		obj, err := r.client(key).Get(ctx, key.name, metav1.GetOptions{})
		if err != nil {
			return err
		}
		var st fnv1.FunctionStatus
		if err := jsonvalue.Convert(obj.Object["status"], &st); err != nil {
			return err
		}
		if err := mutate(&st); err != nil {
			return err
		}
		if st.Rollout != nil {
			setRolloutCondition(&st, obj.GetGeneration())
		}
		status, err := runtime.DefaultUnstructuredConverter.ToUnstructured(&st)
		if err != nil {
			return err
		}
		obj.Object["status"] = status
		out, err = r.client(key).UpdateStatus(ctx, obj, metav1.UpdateOptions{FieldManager: rolloutFieldManager})
		return err
	})
	return out, err
}

// sameRollout is the precondition of every write: the latest status is still
// about the rollout (revision and step) the driver decided on.
func sameRollout(st *fnv1.FunctionStatus, decided *fnv1.FunctionStatus) error {
	if st.CurrentRevision != decided.CurrentRevision {
		return errSuperseded
	}
	a, b := st.Rollout, decided.Rollout
	if (a == nil) != (b == nil) || (a != nil && (a.Revision != b.Revision || a.Step != b.Step || a.Phase != b.Phase)) {
		return errSuperseded
	}
	return nil
}

// event records an event on the Function.
func (r *rollouts) event(obj *unstructured.Unstructured, eventType, reason, message string) {
	r.m.env.recorder.Event(obj, eventType, reason, message)
}
