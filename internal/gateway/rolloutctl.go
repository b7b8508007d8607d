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
	"github.com/metalambda/metalambda/internal/httpapi"
	"github.com/metalambda/metalambda/internal/jsonvalue"
	"github.com/metalambda/metalambda/internal/rollout"
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
	if !slices.Contains(rollout.Actions, action) {
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
// u is in does not take it (rollout.CheckAction): pause sets spec.rollout.paused,
// resume clears it; promote and abort set their annotation to the revision
// status.rollout names and remove the other one's for that revision: the latest
// ask wins.
func applyRolloutAction(action string, u *unstructured.Unstructured) error {
	var f fnv1.Function
	if err := jsonvalue.Convert(u.Object, &f); err != nil {
		return httpapi.NewError(http.StatusInternalServerError, "invalid_function", fmt.Sprintf("function %s/%s cannot be read: %v", u.GetNamespace(), u.GetName(), err))
	}
	var refused *rollout.Refusal
	if errors.As(rollout.CheckAction(action, u.GetNamespace()+"/"+u.GetName(), f.Spec.Rollout, f.Status.Rollout), &refused) {
		return httpapi.NewError(http.StatusConflict, refused.Code, refused.Message)
	}
	switch action {
	case rollout.Pause:
		return unstructured.SetNestedField(u.Object, true, "spec", "rollout", "paused")
	case rollout.Resume:
		unstructured.RemoveNestedField(u.Object, "spec", "rollout", "paused")
		return nil
	case rollout.Promote:
		setRolloutAnnotation(u, fnv1.PromoteAnnotation, fnv1.AbortAnnotation, f.Status.Rollout.Revision)
	case rollout.Abort:
		setRolloutAnnotation(u, fnv1.AbortAnnotation, fnv1.PromoteAnnotation, f.Status.Rollout.Revision)
	}
	return nil
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
