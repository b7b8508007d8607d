package dashboard

import (
	"net/http"

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
	Parents       []engineapi.ObjectRef
	Calls         HookCallsView
	EngineError   string
}

func (d *Dashboard) namespacedController() view {
	return view{page: "nscontroller.html", title: "Controller", nav: "overview", load: d.loadNamespacedController}
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
	ref := engineapi.ControllerRef{Kind: chi.URLParam(r, "kind"), Namespace: chi.URLParam(r, "namespace"), Name: chi.URLParam(r, "name")}
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
		parents, err := d.engine.ControllerParents(ctx, s.Token, ref)
		if err != nil {
			page.EngineError = err.Error()
		} else {
			page.Parents = parents.Items
		}
	}
	if !isEventStream(r) {
		page.Calls = d.hookCalls(ctx, s.Token, engineapi.HookCallQuery{Controller: ref.String(), Limit: 20})
	}
	return page, nil
}
