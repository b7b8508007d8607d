package dashboard

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"strings"

	apierrors "k8s.io/apimachinery/pkg/api/errors"

	"github.com/metalambda/metalambda/internal/engineapi"
)

// view is a page whose region marked sse-swap="live" updates itself: the same URL
// serves the whole page to a browser and, to its EventSource (Accept:
// text/event-stream), the template "live" again every LiveInterval while it changes.
type view struct {
	page, title, nav string
	// load reads what the page shows, as the session's user.
	load func(r *http.Request) (any, error)
}

func (d *Dashboard) serveView(v view) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		if isEventStream(r) {
			d.streamView(w, r, v)
			return
		}
		data, err := v.load(r)
		if err != nil {
			d.fail(w, r, err)
			return
		}
		d.render(w, r, http.StatusOK, v.page, v.title, v.nav, data)
	}
}

func (d *Dashboard) streamView(w http.ResponseWriter, r *http.Request, v view) {
	Stream(w, r, d.opts.LiveInterval, "live", func(context.Context) (string, error) {
		data, err := v.load(r)
		if unauthorized(err) {
			d.sessions.remove(SessionFrom(r.Context()).ID)
			return "", errStop
		}
		if err != nil {
			return "", err
		}
		var b strings.Builder
		p := Page{Title: v.title, Nav: v.nav, Session: SessionFrom(r.Context()), LiveURL: r.URL.RequestURI(), Data: data, Now: d.opts.Now()}
		if err := d.pages[v.page].ExecuteTemplate(&b, "live", p); err != nil {
			return "", err
		}
		return b.String(), nil
	})
}

// errorPage is what error.html shows.
type errorPage struct {
	Status  int
	Message string
}

// fail answers an error of the Kubernetes or engine API with its status: a token
// that stopped working ends the session.
func (d *Dashboard) fail(w http.ResponseWriter, r *http.Request, err error) {
	if unauthorized(err) {
		d.endSession(w, r)
		return
	}
	status := http.StatusBadGateway
	var se apierrors.APIStatus
	switch {
	case apierrors.IsForbidden(err), errors.Is(err, engineapi.ErrForbidden):
		status = http.StatusForbidden
	case apierrors.IsNotFound(err), errors.Is(err, engineapi.ErrNotFound), errors.As(err, new(*notFoundError)):
		status = http.StatusNotFound
	case errors.As(err, &se) && se.Status().Code >= 400:
		status = int(se.Status().Code)
	}
	d.render(w, r, status, "error.html", http.StatusText(status), "", errorPage{Status: status, Message: err.Error()})
}

func unauthorized(err error) bool {
	return err != nil && (apierrors.IsUnauthorized(err) || errors.Is(err, engineapi.ErrUnauthorized))
}

// notFoundError is a page that does not exist (a 404).
type notFoundError struct{ msg string }

func (e *notFoundError) Error() string { return e.msg }

func notFound(format string, args ...any) error {
	return &notFoundError{msg: fmt.Sprintf(format, args...)}
}
