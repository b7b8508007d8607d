package api

import (
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/metalambda/metalambda/internal/engineapi"
	"github.com/metalambda/metalambda/internal/httpapi/httpapitest"
)

// syncServer serves the API of a CompositeController "web" whose parents are App a
// and b in ns, App c in other, and Widget b in ns, with the stand-in API allowing
// allowed.
func syncServer(t *testing.T, allowed map[access]bool) (*httpapitest.Reviews, *fakeController, http.Handler) {
	api, auth := reviews(t, allowed)
	ctl := &fakeController{parents: []Parent{
		parentOf(apps, "App", "ns", "a"),
		parentOf(apps, "App", "ns", "b"),
		parentOf(widgets, "Widget", "ns", "b"),
		parentOf(apps, "App", "other", "c"),
	}}
	return api, ctl, (&server{engine: fakeEngine{ctl: ctl}, auth: auth}).routes()
}

func post(h http.Handler, path, body string) *httptest.ResponseRecorder {
	r := httptest.NewRequest(http.MethodPost, path, strings.NewReader(body))
	r.Header.Set("Authorization", "Bearer "+httpapitest.GoodToken)
	w := httptest.NewRecorder()
	h.ServeHTTP(w, r)
	return w
}

var (
	getWeb        = controllerAccess(CompositeKind, "", "web")
	updateAppsNS  = access{verb: "update", group: "example.com", resource: "apps", namespace: "ns"}
	updateAppsAll = access{verb: "update", group: "example.com", resource: "apps", namespace: "other"}
)

func syncResult(t *testing.T, w *httptest.ResponseRecorder) engineapi.SyncResult {
	t.Helper()
	if w.Code != http.StatusOK {
		t.Fatalf("%d %s, want 200", w.Code, w.Body)
	}
	var out engineapi.SyncResult
	if err := json.Unmarshal(w.Body.Bytes(), &out); err != nil {
		t.Fatal(err)
	}
	return out
}

// A body or path no parent can match is a 400 before any review.
func TestSyncRequestIsCheckedBeforeAnyReview(t *testing.T) {
	api, _, h := syncServer(t, nil)
	for path, body := range map[string]string{
		"/api/v1/controllers/Deployment/web/sync": `{"all": true}`,
		"/api/v1/controllers/cc/Web_1/sync":       `{"all": true}`,
		"/api/v1/controllers/cc/web/sync":         ``,
	} {
		if w := post(h, path, body); w.Code != http.StatusBadRequest {
			t.Errorf("%s %s: %d %s, want 400", path, body, w.Code, w.Body)
		}
	}
	for _, body := range []string{`{}`, `{"name": "a", "all": true}`, `{"namespace": "NS", "name": "a"}`, `{"name": "a b"}`, `{"parent": "a"}`, `[]`} {
		if w := post(h, "/api/v1/controllers/cc/web/sync", body); w.Code != http.StatusBadRequest {
			t.Errorf("%s: %d %s, want 400", body, w.Code, w.Body)
		}
	}
	if w := post(h, "/api/v1/controllers/cc/web/sync", `{"all": true, "pad": "`+strings.Repeat("x", maxSyncBody)+`"}`); w.Code != http.StatusRequestEntityTooLarge {
		t.Errorf("a large body: %d, want 413", w.Code)
	}
	if tr, sar := api.TokenReviews.Load(), api.AccessReviews.Load(); tr != 0 || sar != 0 {
		t.Errorf("%d TokenReviews and %d SubjectAccessReviews, want none", tr, sar)
	}
}

// One parent needs update on it: get is not enough, update in another namespace
// neither, and a caller that may not update gets 403 whether the parent exists or
// not; an authorized caller gets 404 for a parent that does not exist.
func TestSyncOneParentNeedsUpdate(t *testing.T) {
	getApps := access{group: "example.com", resource: "apps", namespace: "ns"}
	for name, allowed := range map[string]map[access]bool{
		"get only":                    {getWeb: true, getApps: true},
		"update in another namespace": {getWeb: true, updateAppsAll: true},
	} {
		_, ctl, h := syncServer(t, allowed)
		for _, parent := range []string{"a", "missing"} {
			w := post(h, "/api/v1/controllers/cc/web/sync", `{"namespace": "ns", "name": "`+parent+`"}`)
			if w.Code != http.StatusForbidden || !strings.Contains(w.Body.String(), `may not update`) {
				t.Errorf("%s, parent %s: %d %s, want 403 naming update", name, parent, w.Code, w.Body)
			}
		}
		if len(ctl.queued) != 0 {
			t.Errorf("%s: queued %v", name, ctl.queued)
		}
	}

	_, ctl, h := syncServer(t, map[access]bool{getWeb: true, updateAppsNS: true})
	out := syncResult(t, post(h, "/api/v1/controllers/cc/web/sync", `{"namespace": "ns", "name": "a"}`))
	if out.Queued != 1 || len(out.Parents) != 1 || out.Parents[0].Name != "a" || out.Parents[0].HeldUntil != nil || !slices.Equal(ctl.queued, []string{"ns/a"}) {
		t.Errorf("answer %+v, queued %v; want ns/a", out, ctl.queued)
	}
	// Allowed on apps only: the Widget of the same name is not looked at.
	if out := syncResult(t, post(h, "/api/v1/controllers/cc/web/sync", `{"namespace": "ns", "name": "b"}`)); out.Parents[0].Kind != "App" {
		t.Errorf("b: %+v, want the App", out)
	}
	if w := post(h, "/api/v1/controllers/cc/web/sync", `{"namespace": "ns", "name": "missing"}`); w.Code != http.StatusNotFound {
		t.Errorf("a parent that does not exist: %d %s, want 404", w.Code, w.Body)
	}
	if w := post(h, "/api/v1/controllers/cc/other/sync", `{"all": true}`); w.Code != http.StatusForbidden {
		t.Errorf("a controller the caller may not get: %d %s, want 403", w.Code, w.Body)
	}
	_, _, h = syncServer(t, map[access]bool{controllerAccess(CompositeKind, "", "other"): true})
	if w := post(h, "/api/v1/controllers/cc/other/sync", `{"all": true}`); w.Code != http.StatusNotFound {
		t.Errorf("a controller the engine does not run: %d %s, want 404", w.Code, w.Body)
	}
}

// All parents are those the caller may update, and no other; a caller that may
// update none gets 403.
func TestSyncAllQueuesOnlyWhatTheCallerMayUpdate(t *testing.T) {
	_, ctl, h := syncServer(t, map[access]bool{getWeb: true, updateAppsNS: true})
	out := syncResult(t, post(h, "/api/v1/controllers/cc/web/sync", `{"all": true}`))
	if want := []string{"ns/a", "ns/b"}; out.Queued != 2 || out.NotPermitted != 2 || !slices.Equal(ctl.queued, want) {
		t.Errorf("answer %+v, queued %v; want %v, 2 not permitted", out, ctl.queued, want)
	}

	_, ctl, h = syncServer(t, map[access]bool{getWeb: true})
	w := post(h, "/api/v1/controllers/cc/web/sync", `{"all": true}`)
	if w.Code != http.StatusForbidden || !strings.Contains(w.Body.String(), "apps.example.com") || strings.Contains(w.Body.String(), "other") || len(ctl.queued) != 0 {
		t.Errorf("no update anywhere: %d %s, queued %v; want 403 naming the resources, not the namespaces", w.Code, w.Body, ctl.queued)
	}
}

// A parent held by its hook's Retry-After is queued, and the answer says until when
// it waits.
func TestSyncOfAHeldParentSaysUntilWhen(t *testing.T) {
	_, ctl, h := syncServer(t, map[access]bool{getWeb: true, updateAppsNS: true})
	ctl.held = time.Minute
	out := syncResult(t, post(h, "/api/v1/controllers/cc/web/sync", `{"namespace": "ns", "name": "a"}`))
	if len(out.Parents) != 1 || out.Parents[0].HeldUntil == nil || time.Until(*out.Parents[0].HeldUntil) < 30*time.Second {
		t.Errorf("answer %+v, want held for about a minute", out)
	}
}

// A standby replica under leader election runs no controllers: it answers 503 and
// names the leader.
func TestStandbyNamesTheLeader(t *testing.T) {
	_, auth := reviews(t, map[access]bool{getWeb: true, updateAppsNS: true})
	h := (&server{engine: fakeEngine{ctl: &fakeController{}, leader: "engine-0_abc"}, auth: auth}).routes()
	w := post(h, "/api/v1/controllers/cc/web/sync", `{"namespace": "ns", "name": "a"}`)
	if w.Code != http.StatusServiceUnavailable || !strings.Contains(w.Body.String(), `not_leader`) || !strings.Contains(w.Body.String(), `engine-0_abc`) {
		t.Errorf("%d %s, want 503 not_leader naming the leader", w.Code, w.Body)
	}
}

// A decorator's parents of two kinds with one name are ambiguous until the body
// names the kind.
func TestSyncOfAnAmbiguousParentNeedsTheKind(t *testing.T) {
	updateWidgetsNS := access{verb: "update", group: "example.com", resource: "widgets", namespace: "ns"}
	_, ctl, h := syncServer(t, map[access]bool{getWeb: true, updateAppsNS: true, updateWidgetsNS: true})
	if w := post(h, "/api/v1/controllers/cc/web/sync", `{"namespace": "ns", "name": "b"}`); w.Code != http.StatusConflict || !strings.Contains(w.Body.String(), `\"kind\"`) {
		t.Errorf("%d %s, want 409 asking for the kind", w.Code, w.Body)
	}
	out := syncResult(t, post(h, "/api/v1/controllers/cc/web/sync", `{"namespace": "ns", "name": "b", "kind": "Widget"}`))
	if out.Queued != 1 || out.Parents[0].Kind != "Widget" || len(ctl.queued) != 1 {
		t.Errorf("answer %+v, queued %v; want the Widget", out, ctl.queued)
	}
}

// A caller who may update the parents' resource cluster-wide has all of them queued,
// however many namespaces they are in: the reviews of one request are bounded, and
// a review per namespace ran out of them past a few hundred namespaces, so that the
// parents past them were counted as not permitted.
func TestSyncAllAcrossManyNamespaces(t *testing.T) {
	const n = 2 * maxChecksPerRequest
	allowed := map[access]bool{getWeb: true, {verb: "update", group: "example.com", resource: "apps"}: true}
	ctl := &fakeController{}
	for i := range n {
		ns := fmt.Sprintf("ns%d", i)
		ctl.parents = append(ctl.parents, parentOf(apps, "App", ns, "a"))
		allowed[access{verb: "update", group: "example.com", resource: "apps", namespace: ns}] = true // as RBAC answers a cluster-wide grant
	}
	_, auth := reviews(t, allowed)
	h := (&server{engine: fakeEngine{ctl: ctl}, auth: auth}).routes()
	out := syncResult(t, post(h, "/api/v1/controllers/cc/web/sync", `{"all": true}`))
	if out.Queued != n || out.NotPermitted != 0 || len(ctl.queued) != n {
		t.Errorf("queued %d (%d enqueued), not permitted %d; want all %d queued", out.Queued, len(ctl.queued), out.NotPermitted, n)
	}
}
