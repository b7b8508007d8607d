package gateway

import (
	"errors"
	"fmt"
	"net/http"
	"slices"

	"github.com/go-chi/chi/v5"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/client-go/util/retry"

	fnv1 "github.com/metalambda/metalambda/internal/apis/metalambda/v1alpha1"
	"github.com/metalambda/metalambda/internal/gatewayapi"
	"github.com/metalambda/metalambda/internal/httpapi"
	"github.com/metalambda/metalambda/internal/jsonvalue"
)

// The rollout controls set what the rollout driver reads (see fnv1.RolloutPolicy
// and the rollout annotations); the driver moves the shares and reports in
// status.rollout. The gateway only checks that the action makes sense in the
// phase status.rollout reports, and writes the Function as the caller.

// rolloutAction serves POST .../rollout/{action}: pause, resume, promote or abort
// the function's rollout in progress. The Function is read and updated as the
// caller (who needs update on functions), again on a conflict, so the check and the
// write see the same object.
func (g *Gateway) rolloutAction(w http.ResponseWriter, r *http.Request) {
	ns, name, action := chi.URLParam(r, "namespace"), chi.URLParam(r, "name"), chi.URLParam(r, "action")
	if !slices.Contains(gatewayapi.RolloutActions, action) {
		httpapi.WriteError(w, httpapi.NewError(http.StatusBadRequest, "unknown_action", fmt.Sprintf("unknown rollout action %q: the actions are pause, resume, promote and abort", action)))
		return
	}
	var updated *unstructured.Unstructured
	err := retry.RetryOnConflict(retry.DefaultRetry, func() error {
		u, err := g.functions(ns).Get(r.Context(), name, metav1.GetOptions{})
		if err != nil {
			return err
		}
		if err := applyRolloutAction(action, u); err != nil {
			return err
		}
		updated, err = g.functions(ns).Update(r.Context(), u, metav1.UpdateOptions{FieldManager: fieldManager})
		return err
	})
	var refused *httpapi.Error
	switch {
	case errors.As(err, &refused):
		httpapi.WriteError(w, refused)
	case err != nil:
		httpapi.WriteError(w, fromAPI(err))
	default:
		httpapi.WriteJSON(w, http.StatusOK, updated.Object)
	}
}

// applyRolloutAction changes u as action asks, or says with a 409 why the rollout
// u is in does not take it:
//   - pause sets spec.rollout.paused, in a rollout Progressing;
//   - resume clears it, whatever the phase (a pause left over from a rollout
//     that ended would hold the next one);
//   - promote and abort set their annotation to the revision status.rollout
//     names, in a rollout Progressing or Paused, and remove the other one's for
//     that revision: the latest ask wins.
func applyRolloutAction(action string, u *unstructured.Unstructured) error {
	var f fnv1.Function
	if err := jsonvalue.Convert(u.Object, &f); err != nil {
		return httpapi.NewError(http.StatusInternalServerError, "invalid_function", fmt.Sprintf("function %s/%s cannot be read: %v", u.GetNamespace(), u.GetName(), err))
	}
	if err := checkRolloutAction(action, &f); err != nil {
		return err
	}
	switch action {
	case gatewayapi.RolloutPause:
		return unstructured.SetNestedField(u.Object, true, "spec", "rollout", "paused")
	case gatewayapi.RolloutResume:
		unstructured.RemoveNestedField(u.Object, "spec", "rollout", "paused")
		return nil
	case gatewayapi.RolloutPromote:
		setRolloutAnnotation(u, fnv1.PromoteAnnotation, fnv1.AbortAnnotation, f.Status.Rollout.Revision)
	case gatewayapi.RolloutAbort:
		setRolloutAnnotation(u, fnv1.AbortAnnotation, fnv1.PromoteAnnotation, f.Status.Rollout.Revision)
	}
	return nil
}

// checkRolloutAction is nil when the rollout f is in takes action, else a 409
// naming why not.
func checkRolloutAction(action string, f *fnv1.Function) error {
	key := f.Namespace + "/" + f.Name
	policy, ro := f.Spec.Rollout, f.Status.Rollout
	if action == gatewayapi.RolloutResume {
		if policy == nil || !policy.Paused {
			return conflict("not_paused", "function %s is not paused (spec.rollout.paused is not true): there is nothing to resume", key)
		}
		return nil
	}
	switch {
	case policy == nil:
		return conflict("no_rollout_policy", "function %s has no rollout policy (spec.rollout): a new revision serves every call at once, there is no rollout to %s", key, action)
	case ro == nil || ro.Revision == "":
		return conflict("no_rollout", "function %s has no rollout in progress (status.rollout is not set): there is nothing to %s", key, action)
	case ro.Phase == fnv1.RolloutHalted:
		return conflict("rollout_halted", "the rollout of %s (function %s) is Halted%s: the previous revision serves every parent again; there is nothing to %s (change the code for a new rollout, or roll back)", ro.Revision, key, because(ro), action)
	case ro.Phase == fnv1.RolloutComplete:
		return conflict("rollout_complete", "the rollout of %s (function %s) is Complete: it serves every parent; there is nothing to %s (roll back with metalambda fn rollback)", ro.Revision, key, action)
	case action == gatewayapi.RolloutPause && (policy.Paused || ro.Phase == fnv1.RolloutPaused):
		return conflict("already_paused", "the rollout of %s (function %s) is paused already (spec.rollout.paused is true)", ro.Revision, key)
	}
	return nil
}

func conflict(code, format string, args ...any) *httpapi.Error {
	return httpapi.NewError(http.StatusConflict, code, fmt.Sprintf(format, args...))
}

// because is " (reason: message)" of a rollout, or "" when it says neither.
func because(ro *fnv1.RolloutStatus) string {
	switch {
	case ro.Reason != "" && ro.Message != "":
		return " (" + ro.Reason + ": " + ro.Message + ")"
	case ro.Reason != "" || ro.Message != "":
		return " (" + ro.Reason + ro.Message + ")"
	}
	return ""
}

// setRolloutAnnotation sets key to revision on u and removes other when it names
// the same revision.
func setRolloutAnnotation(u *unstructured.Unstructured, key, other, revision string) {
	annotations := u.GetAnnotations()
	if annotations == nil {
		annotations = map[string]string{}
	}
	annotations[key] = revision
	if annotations[other] == revision {
		delete(annotations, other)
	}
	u.SetAnnotations(annotations)
}
