package api

import (
	"context"
	"net/http"
	"strconv"
	"time"

	"github.com/go-chi/chi/v5"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	"github.com/metalambda/metalambda/internal/engineapi"
	"github.com/metalambda/metalambda/internal/httpapi"
)

// checkListQuery answers 400 for a controller list whose ?namespace= no namespace
// can have.
func checkListQuery(r *http.Request) error {
	if err := httpapi.CheckNames(r.URL.Query().Get("namespace"), ""); err != nil {
		return err
	}
	return nil
}

// checkControllerPath answers 400 for a controller path no object can match: a kind
// that is no controller kind, a namespaced kind outside /namespaces/NS/ or a
// cluster-scoped one inside, names that are no DNS-1123 subdomains, a namespace that
// is no DNS-1123 label.
func checkControllerPath(r *http.Request) error {
	namespace := chi.URLParam(r, "namespace")
	if err := httpapi.CheckNames(namespace, ""); err != nil {
		return err
	}
	if chi.URLParam(r, "kind") == "" && chi.URLParam(r, "name") == "" {
		return nil
	}
	kind := controllerKind(chi.URLParam(r, "kind"))
	switch {
	case kind == "":
		return httpapi.NewError(http.StatusBadRequest, "bad_request", "the controller kind must be CompositeController, DecoratorController, NamespacedCompositeController or NamespacedDecoratorController, got "+strconv.Quote(chi.URLParam(r, "kind")))
	case engineapi.Namespaced(kind) && namespace == "":
		return httpapi.NewError(http.StatusBadRequest, "bad_request", kind+" is namespaced: its path is /api/v1/namespaces/NAMESPACE/controllers/"+kind+"/NAME")
	case !engineapi.Namespaced(kind) && namespace != "":
		return httpapi.NewError(http.StatusBadRequest, "bad_request", kind+" is cluster-scoped: its path is /api/v1/controllers/"+kind+"/NAME")
	}
	if err := httpapi.CheckNames("", chi.URLParam(r, "name")); err != nil {
		return err
	}
	if err := httpapi.CheckNames("", chi.URLParam(r, "parent")); err != nil {
		return err
	}
	return nil
}

// controllerRef is the controller the path of r names.
func controllerRef(r *http.Request) engineapi.ControllerRef {
	return engineapi.ControllerRef{Kind: controllerKind(chi.URLParam(r, "kind")), Namespace: chi.URLParam(r, "namespace"), Name: chi.URLParam(r, "name")}
}

// describe is "Kind name", or "Kind namespace/name" for a namespaced controller.
func describe(ref engineapi.ControllerRef) string {
	if ref.Namespace != "" {
		return ref.Kind + " " + strconv.Quote(ref.Namespace+"/"+ref.Name)
	}
	return ref.Kind + " " + strconv.Quote(ref.Name)
}

// runningController is the running controller ref names, once the caller is
// authorized to get it: a 403 before anything is looked up, then a 404.
func (s *server) runningController(ctx context.Context, c *caller, ref engineapi.ControllerRef) (Controller, error) {
	if err := mustMay(ctx, c, controllerAccess(ref.Kind, ref.Namespace, ref.Name)); err != nil {
		return nil, err
	}
	ctl := s.engine.Controller(ref.Kind, ref.Namespace, ref.Name)
	if ctl == nil {
		return nil, httpapi.NewError(http.StatusNotFound, "not_found", "this engine runs no "+describe(ref))
	}
	return ctl, nil
}

// controller is the summary of one controller the caller may get, whether it runs or
// not (a namespaced controller without the rights it needs is shown with its
// MissingRights condition).
func (s *server) controller(ctx context.Context, c *caller, r *http.Request) (any, error) {
	ref := controllerRef(r)
	if err := mustMay(ctx, c, controllerAccess(ref.Kind, ref.Namespace, ref.Name)); err != nil {
		return nil, err
	}
	for _, obj := range s.engine.Controllers() {
		if obj.GetKind() == ref.Kind && obj.GetNamespace() == ref.Namespace && obj.GetName() == ref.Name {
			return s.summary(obj), nil
		}
	}
	return nil, httpapi.NewError(http.StatusNotFound, "not_found", "this engine serves no "+describe(ref))
}

// parents lists the parents of one running controller that the caller may get.
func (s *server) parents(ctx context.Context, c *caller, r *http.Request) (any, error) {
	ref := controllerRef(r)
	ctl, err := s.runningController(ctx, c, ref)
	if err != nil {
		return nil, err
	}
	out := engineapi.ParentList{Controller: ref, Items: []engineapi.ObjectRef{}}
	for _, p := range ctl.AllParents() {
		ok, err := c.may(ctx, access{group: p.Resource.Group, resource: p.Resource.Resource, namespace: p.Object.GetNamespace(), name: p.Object.GetName()})
		if err != nil {
			return nil, err
		}
		if ok {
			out.Items = append(out.Items, apiObjectRef(p.Object))
		}
	}
	return out, nil
}

// namespacedParent is a parent of a namespaced controller, in its namespace, as
// parent shows it.
func (s *server) namespacedParent(ctx context.Context, c *caller, r *http.Request) (any, error) {
	ref := controllerRef(r)
	return s.showParent(ctx, c, r, ref, ref.Namespace, chi.URLParam(r, "parent"))
}

// controllerInfo is what a summary shows of the controller object itself: the
// ServiceAccount of a namespaced controller and the status conditions.
func controllerInfo(sum *engineapi.ControllerSummary, obj *unstructured.Unstructured) {
	if engineapi.Namespaced(sum.Kind) {
		sa, _, _ := unstructured.NestedString(obj.Object, "spec", "serviceAccountName")
		if sa == "" {
			sa = "default"
		}
		sum.ServiceAccountName = sa
	}
	conds, _, _ := unstructured.NestedSlice(obj.Object, "status", "conditions")
	for _, c := range conds {
		cond, _ := c.(map[string]any)
		out := engineapi.Condition{}
		out.Type, _ = cond["type"].(string)
		out.Status, _ = cond["status"].(string)
		out.Reason, _ = cond["reason"].(string)
		out.Message, _ = cond["message"].(string)
		if t, ok := cond["lastTransitionTime"].(string); ok {
			if parsed, err := time.Parse(time.RFC3339, t); err == nil {
				out.LastTransitionTime = &parsed
			}
		}
		if out.Type != "" {
			sum.Conditions = append(sum.Conditions, out)
		}
	}
}
