package dashboard

import (
	"context"
	"net/http"
	"net/url"
	"strconv"
	"strings"

	"github.com/metalambda/metalambda/internal/engineapi"
)

// HookCallsView is a list of recent hook calls that grows live: its stream (StreamURL)
// sends the calls newer than the newest shown.
type HookCallsView struct {
	Query     engineapi.HookCallQuery
	Calls     []engineapi.HookCall
	StreamURL string
	// Error says why the calls are missing, if they are; Disabled that the engine
	// records none.
	Error    string
	Disabled bool
}

// hookCalls reads the calls q selects, newest first.
func (d *Dashboard) hookCalls(ctx context.Context, token string, q engineapi.HookCallQuery) HookCallsView {
	v := HookCallsView{Query: q}
	if d.engine == nil {
		v.Error = noEngine
		return v
	}
	l, err := d.engine.HookCalls(ctx, token, q)
	if err != nil {
		v.Error = err.Error()
		return v
	}
	v.Calls, v.Disabled = l.Items, !l.HistoryEnabled
	q.Since, q.Limit = l.LatestID, 0
	v.StreamURL = Prefix + "/hookcalls?" + hookCallValues(q).Encode()
	return v
}

func hookCallValues(q engineapi.HookCallQuery) url.Values {
	v := url.Values{}
	for k, val := range map[string]string{"controller": q.Controller, "namespace": q.Namespace, "parent": q.Parent} {
		if val != "" {
			v.Set(k, val)
		}
	}
	if q.Since > 0 {
		v.Set("since", strconv.FormatUint(q.Since, 10))
	}
	return v
}

func hookCallQuery(r *http.Request) engineapi.HookCallQuery {
	v := r.URL.Query()
	since, _ := strconv.ParseUint(v.Get("since"), 10, 64)
	return engineapi.HookCallQuery{Controller: v.Get("controller"), Namespace: v.Get("namespace"), Parent: v.Get("parent"), Since: since}
}

// HookCallsPage is what the hook calls page shows.
type HookCallsPage struct {
	Controllers []engineapi.ControllerRef
	HookCallsView
}

// hookCallsPage lists the recent calls of every controller the user may see, or of
// the one the query names, filtered by parent; its event stream sends newer calls as
// the engine records them.
func (d *Dashboard) hookCallsPage(w http.ResponseWriter, r *http.Request) {
	q := hookCallQuery(r)
	s := SessionFrom(r.Context())
	if isEventStream(r) {
		d.streamCalls(w, r, q)
		return
	}
	q.Since, q.Limit = 0, 50
	page := HookCallsPage{HookCallsView: d.hookCalls(r.Context(), s.Token, q)}
	if d.engine != nil {
		if l, err := d.engine.Controllers(r.Context(), s.Token); err == nil {
			for _, c := range l.Items {
				page.Controllers = append(page.Controllers, c.ControllerRef)
			}
		}
	}
	d.render(w, r, http.StatusOK, "hookcalls.html", "Hook calls", "hookcalls", page)
}

// streamCalls sends, as "calls" events, the calls newer than the last sent.
func (d *Dashboard) streamCalls(w http.ResponseWriter, r *http.Request, q engineapi.HookCallQuery) {
	s := SessionFrom(r.Context())
	if d.engine == nil {
		http.Error(w, noEngine, http.StatusNotFound)
		return
	}
	Stream(w, r, d.opts.LiveInterval, "calls", func(ctx context.Context) (string, error) {
		q.Limit = 50
		l, err := d.engine.HookCalls(ctx, s.Token, q)
		if unauthorized(err) {
			d.sessions.remove(s.ID)
			return "", errStop
		}
		if err != nil || len(l.Items) == 0 {
			return "", err
		}
		q.Since = l.Items[0].ID
		var b strings.Builder
		if err := d.pages["hookcalls.html"].ExecuteTemplate(&b, "calls", l.Items); err != nil {
			return "", err
		}
		return b.String(), nil
	})
}
