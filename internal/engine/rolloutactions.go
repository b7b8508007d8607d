package engine

import (
	"context"
	"fmt"
	"slices"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/klog/v2"

	fnv1 "github.com/metalambda/metalambda/internal/apis/metalambda/v1alpha1"
)

// The writes of the rollout driver: a step, a halt, a promotion, a pause, and the
// failures counted so far. Each is made from the latest Function and only while
// its rollout is still the one the driver decided on (sameRollout).

// ReasonPromoted is status.rollout.reason of a rollout completed by the promote
// annotation.
const ReasonPromoted = "Promoted"

// step writes step k of the rollout of the current revision: its shares and
// status.rollout. The last step completes the rollout: the revision is then the
// only live one.
func (r *rollouts) step(ctx context.Context, key functionKey, obj *unstructured.Unstructured, f *fnv1.Function, k int32) error {
	return r.stepWith(ctx, key, obj, f, k, "")
}

// promote completes the rollout at once, on the promote annotation.
func (r *rollouts) promote(ctx context.Context, key functionKey, obj *unstructured.Unstructured, f *fnv1.Function) error {
	return r.stepWith(ctx, key, obj, f, int32(len(f.Spec.Rollout.StepsOrDefault())-1), ReasonPromoted)
}

func (r *rollouts) stepWith(ctx context.Context, key functionKey, obj *unstructured.Unstructured, f *fnv1.Function, k int32, reason string) error {
	steps := f.Spec.Rollout.StepsOrDefault()
	k = min(max(k, 0), int32(len(steps)-1))
	share := stepShare(steps, k)
	var before, after []fnv1.RevisionShare
	var written fnv1.RolloutStatus
	_, err := r.update(ctx, key, func(st *fnv1.FunctionStatus) error {
		if err := sameRollout(st, &f.Status); err != nil {
			return err
		}
		current, _ := liveShare(st, st.CurrentRevision)
		from, ok := rolloutSource(st)
		if !ok && share < 100 {
			return errSuperseded
		}
		ro := fnv1.RolloutStatus{Revision: current.Name, From: from.Name, Step: k, Phase: fnv1.RolloutProgressing, Reason: reason, StepStartTime: &metav1.Time{Time: time.Now()}}
		if old := st.Rollout; old != nil && old.Revision == current.Name {
			ro.Failures, ro.FailingParents = old.Failures, old.FailingParents
			if !ok {
				ro.From = old.From
			}
		}
		if share >= 100 {
			ro.Phase = fnv1.RolloutComplete
		}
		before, after = st.Revisions, sharesAt(current, from, share)
		st.Revisions, st.Rollout, written = after, &ro, ro
		return nil
	})
	if err != nil {
		return err
	}
	r.m.env.metrics.rolloutAt(key, k, share)
	log := klog.FromContext(ctx)
	if written.Phase == fnv1.RolloutComplete {
		r.forget(key)
		n := r.resyncMoved(key, before, after)
		r.event(obj, corev1.EventTypeNormal, ReasonRolloutComplete, fmt.Sprintf("revision %s serves every parent (step %d); %d parents moved", written.Revision, k, n))
		log.Info("Rollout complete", "revision", written.Revision, "step", k, "reason", reason, "moved", n)
		return nil
	}
	s := r.track(ctx, key, written.Revision, k, before, after)
	r.mu.Lock()
	s.failures, s.written, s.failing = written.Failures, written.Failures, slices.Clone(written.FailingParents)
	moved := len(s.pending)
	r.mu.Unlock()
	r.event(obj, corev1.EventTypeNormal, ReasonRolloutStep, fmt.Sprintf("step %d: revision %s serves %d%% of the parents; %d parents moved", k, written.Revision, share, moved))
	log.Info("Rollout step", "revision", written.Revision, "step", k, "share", share, "moved", moved)
	return nil
}

// halt gives every parent back to the revision rolled out from, for reason
// (FailureBudgetExceeded or Aborted), and re-syncs the parents that move back.
func (r *rollouts) halt(ctx context.Context, key functionKey, obj *unstructured.Unstructured, f *fnv1.Function, reason string) error {
	failures, failing := f.Status.Rollout.Failures, f.Status.Rollout.FailingParents
	r.mu.Lock()
	if s := r.steps[key]; s != nil && s.revision == f.Status.Rollout.Revision {
		failures, failing = max(failures, s.failures), slices.Clone(s.failing)
	}
	r.mu.Unlock()
	var before, after []fnv1.RevisionShare
	var written fnv1.RolloutStatus
	_, err := r.update(ctx, key, func(st *fnv1.FunctionStatus) error {
		if err := sameRollout(st, &f.Status); err != nil {
			return err
		}
		current, _ := liveShare(st, st.CurrentRevision)
		from, ok := rolloutSource(st)
		if !ok {
			return errSuperseded
		}
		ro := *st.Rollout
		ro.Phase, ro.Reason, ro.From = fnv1.RolloutHalted, reason, from.Name
		ro.Failures, ro.FailingParents = failures, failing
		ro.Message = haltMessage(reason, &ro, f.Spec.Rollout.MaxFailures)
		before, after = st.Revisions, sharesAt(current, from, 0)
		st.Revisions, st.Rollout, written = after, &ro, ro
		return nil
	})
	if err != nil {
		return err
	}
	r.forget(key)
	n := r.resyncMoved(key, before, after)
	r.m.env.metrics.rolloutHalted(key, reason)
	r.event(obj, corev1.EventTypeWarning, ReasonRolloutHalted, written.Message)
	klog.FromContext(ctx).Info("Rollout halted", "revision", written.Revision, "reason", reason, "failures", written.Failures, "movedBack", n)
	return nil
}

// setPaused writes the phase spec.rollout.paused asks for; the shares stay.
func (r *rollouts) setPaused(ctx context.Context, key functionKey, obj *unstructured.Unstructured, f *fnv1.Function, paused bool) error {
	phase := fnv1.RolloutProgressing
	if paused {
		phase = fnv1.RolloutPaused
	}
	_, err := r.update(ctx, key, func(st *fnv1.FunctionStatus) error {
		if err := sameRollout(st, &f.Status); err != nil {
			return err
		}
		st.Rollout.Phase = phase
		return nil
	})
	if err != nil {
		return err
	}
	ro := f.Status.Rollout
	if paused {
		r.event(obj, corev1.EventTypeNormal, ReasonRolloutPaused, fmt.Sprintf("paused at step %d of the rollout of revision %s", ro.Step, ro.Revision))
	} else {
		r.event(obj, corev1.EventTypeNormal, ReasonRolloutStep, fmt.Sprintf("resumed at step %d of the rollout of revision %s", ro.Step, ro.Revision))
	}
	return nil
}

// noteFailures writes the failures counted so far into status.rollout.
func (r *rollouts) noteFailures(ctx context.Context, key functionKey, _ *unstructured.Unstructured, f *fnv1.Function, failures int32, failing []string) error {
	_, err := r.update(ctx, key, func(st *fnv1.FunctionStatus) error {
		if err := sameRollout(st, &f.Status); err != nil {
			return err
		}
		st.Rollout.Failures, st.Rollout.FailingParents = failures, failing
		return nil
	})
	if err != nil {
		return err
	}
	r.mu.Lock()
	if s := r.steps[key]; s != nil {
		s.written = max(s.written, failures)
	}
	r.mu.Unlock()
	return nil
}
