package dashboard

import (
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
)

// A namespaced controller's page, all from the engine's API: each parent links to
// its page with its last sync and error, and Sync all posts to the controller's own
// path.
func TestNamespacedControllerPageLinksItsParents(t *testing.T) {
	const base = "/api/v1/namespaces/team-a/controllers/NamespacedCompositeController/greeter"
	answers := map[string]string{
		base: `{"kind": "NamespacedCompositeController", "namespace": "team-a", "name": "greeter", "running": true, "serviceAccountName": "ctl", "parents": 2,
			"parentResources": [{"apiVersion": "example.com/v1", "resource": "greetings"}],
			"conditions": [{"type": "Ready", "status": "True", "reason": "Running"}]}`,
		base + "/parents": `{"items": [{"apiVersion": "example.com/v1", "kind": "Greeting", "namespace": "team-a", "name": "g1"},
			{"apiVersion": "example.com/v1", "kind": "Greeting", "namespace": "team-a", "name": "g2"}]}`,
		base + "/parents/g1": `{"parent": {"name": "g1"}, "lastSyncTime": "2026-01-02T03:04:00Z", "children": []}`,
		base + "/parents/g2": `{"parent": {"name": "g2"}, "lastError": "the hook answered 500", "children": []}`,
		"/api/v1/hookcalls":  `{"items": [], "historyEnabled": true}`,
	}
	engine := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		a, ok := answers[r.URL.Path]
		if !ok || r.Header.Get("Authorization") != "Bearer "+goodToken {
			http.Error(w, `{"error": "not_found", "message": "no `+r.URL.Path+`"}`, http.StatusNotFound)
			return
		}
		w.Header().Set("Content-Type", "application/json")
		_, _ = io.WriteString(w, a)
	}))
	t.Cleanup(engine.Close)
	h, _ := testDashboardWith(t, func(o *Options) { o.EngineURL = engine.URL })
	session, _ := login(t, h)
	r := httptest.NewRequest(http.MethodGet, Prefix+"/namespaces/team-a/controllers/NamespacedCompositeController/greeter", nil)
	r.AddCookie(session)
	rec := serve(h, r)
	body := rec.Body.String()
	if rec.Code != http.StatusOK {
		t.Fatalf("the page: %d %s", rec.Code, body)
	}
	page := "/ui/namespaces/team-a/controllers/NamespacedCompositeController/greeter"
	for _, want := range []string{
		`<a href="` + page + `/parents/g1">g1</a>`, `<a href="` + page + `/parents/g2">g2</a>`,
		`<time datetime="2026-01-02T03:04:00Z">`, "the hook answered 500",
		`hx-post="` + page + `/sync"`, `data-testid="sync-all"`,
	} {
		if !strings.Contains(body, want) {
			t.Errorf("the page has no %s:\n%s", want, body)
		}
	}
}
