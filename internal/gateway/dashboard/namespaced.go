package dashboard

import (
	"context"
	"net/http"
	"time"

	"github.com/go-chi/chi/v5"

	"github.com/metalambda/metalambda/internal/engineapi"
)

// NamespacedControllerPage is what a namespaced controller's page shows, all of it
// from the engine's API as the user may see it.
type NamespacedControllerPage struct {
	Summary engineapi.ControllerSummary
	Ready   Condition
	// MissingRights is the message of a Ready condition False for MissingRights: the
	// grant the controller's ServiceAccount lacks.
	MissingRights string
	Parents       []NamespacedParentRow
	// More is how many parents have no last sync shown (past maxParentDetails).
	More        int
	Calls       HookCallsView
	EngineError string
}

// NamespacedParentRow is one parent in a namespaced controller's table, with what
// the engine remembers of its last sync when Detail is set.
type NamespacedParentRow struct {
	engineapi.ObjectRef
	LastSync  *time.Time
	LastError string
	Detail    bool
}

// ControllerURL is the controller's page.
func (p NamespacedControllerPage) ControllerURL() string {
	return controllerPath(p.Summary.ControllerRef)
}

func (d *Dashboard) namespacedController() view {
	return view{page: "nscontroller.html", title: "Controller", nav: "overview", load: d.loadNamespacedController}
}

// namespacedRef is the namespaced controller the request's path names.
func namespacedRef(r *http.Request) engineapi.ControllerRef {
	return engineapi.ControllerRef{Kind: chi.URLParam(r, "kind"), Namespace: chi.URLParam(r, "namespace"), Name: chi.URLParam(r, "name")}
}

// loadNamespacedController asks the engine, with the user's token, for the
// controller, its parents and its recent calls: the engine authorizes each as the
// user (get on the controller in its namespace), so that a user who may not get it
// has a 403 whether it exists or not.
func (d *Dashboard) loadNamespacedController(r *http.Request) (any, error) {
	if d.engine == nil {
		return NamespacedControllerPage{EngineError: noEngine}, nil
	}
	ctx, s := r.Context(), SessionFrom(r.Context())
	ref := namespacedRef(r)
	sum, err := d.engine.Controller(ctx, s.Token, ref)
	if err != nil {
		return nil, err
	}
	page := NamespacedControllerPage{Summary: *sum, Ready: condition(summaryConditions(*sum), "Ready")}
	ref.Kind = sum.Kind // the engine's spelling of the kind
	if page.Ready.Status == "False" && page.Ready.Reason == "MissingRights" {
		page.MissingRights = page.Ready.Message
	}
	if sum.Running {
		page.EngineError = d.addNamespacedParents(ctx, s.Token, ref, &page)
	}
	if !isEventStream(r) {
		page.Calls = d.hookCalls(ctx, s.Token, engineapi.HookCallQuery{Controller: ref.String(), Limit: 20})
	}
	return page, nil
}

// addNamespacedParents lists the parents the user may get, each with its last sync
// and error (for the first maxParentDetails); the answer is why it could not.
func (d *Dashboard) addNamespacedParents(ctx context.Context, token string, ref engineapi.ControllerRef, page *NamespacedControllerPage) string {
	parents, err := d.engine.ControllerParents(ctx, token, ref)
	if err != nil {
		return err.Error()
	}
	for i, p := range parents.Items {
		row := NamespacedParentRow{ObjectRef: p}
		if i >= maxParentDetails {
			page.More++
		} else if pd, err := d.engine.NamespacedParent(ctx, token, ref, p.Name); err == nil {
			row.Detail, row.LastSync, row.LastError = true, pd.LastSyncTime, pd.LastError
		}
		page.Parents = append(page.Parents, row)
	}
	return ""
}

func (d *Dashboard) namespacedParent() view {
	return view{page: "parent.html", title: "Parent", nav: "overview", load: d.loadNamespacedParent}
}

// loadNamespacedParent is a parent of a namespaced controller, in the controller's
// namespace: the controller and the parent's children come from the engine's API,
// the parent and its events from the Kubernetes API, both as the user.
func (d *Dashboard) loadNamespacedParent(r *http.Request) (any, error) {
	if d.engine == nil {
		return nil, notFound("%s", noEngine)
	}
	ctx, s := r.Context(), SessionFrom(r.Context())
	ref, pname := namespacedRef(r), chi.URLParam(r, "parent")
	sum, err := d.engine.Controller(ctx, s.Token, ref)
	if err != nil {
		return nil, err
	}
	ref.Kind = sum.Kind
	obj, res, err := findParent(ctx, s, sum.ParentResources, r.URL.Query().Get("resource"), ref.Namespace, pname)
	if err != nil {
		return nil, err
	}
	page := ParentPage{Kind: ref.Kind, Namespace: ref.Namespace, Name: ref.Name, Parent: parentRow(res.Resource, obj), Status: statusJSON(obj)}
	if err := page.addEvents(ctx, s, obj); err != nil {
		return nil, err
	}
	if page.Detail, err = d.engine.NamespacedParent(ctx, s.Token, ref, pname); err != nil {
		page.EngineError = err.Error()
	} else {
		page.Tree = childTree(page.Detail.Children)
		page.Parent.LastSync, page.Parent.LastError = page.Detail.LastSyncTime, page.Detail.LastError
	}
	if !isEventStream(r) {
		page.Calls = d.hookCalls(ctx, s.Token, engineapi.HookCallQuery{Controller: ref.String(), Namespace: ref.Namespace, Parent: pname, Limit: 20})
	}
	return page, nil
}
