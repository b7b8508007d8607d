package dashboard

import (
	"errors"
	"net/http"
	"net/url"

	"github.com/go-chi/chi/v5"

	"github.com/metalambda/metalambda/internal/engineapi"
)

// SyncForm is what a "Sync now" (Parent set) or "Sync all" button posts. Namespace
// is set for a namespaced controller.
type SyncForm struct {
	CSRF, Kind, Namespace, Name string
	Parent                      *ParentRow
}

// Action is where the form posts.
func (f SyncForm) Action() string {
	return controllerPath(engineapi.ControllerRef{Kind: f.Kind, Namespace: f.Namespace, Name: f.Name}) + "/sync"
}

// SyncOutcome is what the "Sync now" and "Sync all" buttons show: what the engine
// queued, or why it refused.
type SyncOutcome struct {
	Result *engineapi.SyncResult
	Error  string
	// code is the status the dashboard answers with, to a request that is not htmx's.
	code int
}

// syncNow asks the engine, as the session's user, to sync one parent of a controller
// (form fields namespace, parent and kind, the parent's kind) or all of them (all).
// The controller is cluster-scoped, or namespaced when the path has a namespace.
func (d *Dashboard) syncNow(w http.ResponseWriter, r *http.Request) {
	s := SessionFrom(r.Context())
	ref := engineapi.ControllerRef{Kind: chi.URLParam(r, "kind"), Namespace: chi.URLParam(r, "namespace"), Name: chi.URLParam(r, "name")}
	req := engineapi.SyncRequest{All: r.PostFormValue("all") != ""}
	if !req.All {
		req.Namespace, req.Name, req.Kind = r.PostFormValue("namespace"), r.PostFormValue("parent"), r.PostFormValue("kind")
	}
	out := SyncOutcome{code: http.StatusOK}
	if d.engine == nil {
		out.Error, out.code = noEngine, http.StatusServiceUnavailable
	} else if res, err := d.engine.SyncController(r.Context(), s.Token, ref, req); err != nil {
		out.Error, out.code = syncError(err)
	} else {
		out.Result = res
	}
	// htmx swaps only 2xx answers: to htmx, the fragment says what went wrong.
	status := out.code
	if isHTMX(r) {
		status = http.StatusOK
	}
	d.execute(w, status, "controller.html", "sync-result", out)
}

// controllerPath is the dashboard's page of the controller ref names:
// /ui/controllers/KIND/NAME, or /ui/namespaces/NS/controllers/KIND/NAME.
func controllerPath(ref engineapi.ControllerRef) string {
	p := Prefix + "/controllers/" + url.PathEscape(ref.Kind) + "/" + url.PathEscape(ref.Name)
	if ref.Namespace != "" {
		p = Prefix + "/namespaces/" + url.PathEscape(ref.Namespace) + "/controllers/" + url.PathEscape(ref.Kind) + "/" + url.PathEscape(ref.Name)
	}
	return p
}

// syncError is the engine's refusal as a person reads it, and the status to answer.
func syncError(err error) (string, int) {
	var api *engineapi.Error
	if !errors.As(err, &api) {
		return "The engine API did not answer: " + err.Error(), http.StatusBadGateway
	}
	msg := api.Message
	if api.Status == http.StatusForbidden {
		msg = "Refused: " + msg + ". A sync needs get on the controller and update on the parent."
	}
	return msg, api.Status
}
