package dashboard

import (
	"bytes"
	"io"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/metalambda/metalambda/internal/engineapi"
	"github.com/metalambda/metalambda/web"
)

// The sync buttons post the parent (or all) with the CSRF token, and their outcome
// names what was queued, what waits for its hook, and a refusal's reason.
func TestSyncTemplates(t *testing.T) {
	pages, err := parsePages(web.Templates(), "")
	if err != nil {
		t.Fatal(err)
	}
	syncForm := funcs["syncForm"].(func(string, string, string, string, ...ParentRow) SyncForm)
	held := time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)
	for _, tc := range []struct {
		tmpl string
		data any
		want []string
	}{
		{"sync-form", syncForm("tok", "CompositeController", "", "web"),
			[]string{`hx-post="/ui/controllers/CompositeController/web/sync"`, `name="csrf" value="tok"`, `name="all" value="1"`, "Sync all"}},
		{"sync-form", syncForm("tok", "CompositeController", "", "web", ParentRow{Namespace: "ns", Name: "p", Kind: "App"}),
			[]string{`name="namespace" value="ns"`, `name="parent" value="p"`, `name="kind" value="App"`, "Sync now"}},
		{"sync-form", syncForm("tok", "NamespacedCompositeController", "team-a", "greeter"),
			[]string{`hx-post="/ui/namespaces/team-a/controllers/NamespacedCompositeController/greeter/sync"`, `name="all" value="1"`, "Sync all"}},
		{"sync-form", syncForm("tok", "NamespacedCompositeController", "team-a", "greeter", ParentRow{Namespace: "team-a", Name: "g", Kind: "Greeting"}),
			[]string{`hx-post="/ui/namespaces/team-a/controllers/NamespacedCompositeController/greeter/sync"`, `name="parent" value="g"`, "Sync now"}},
		{"sync-result", SyncOutcome{Result: &engineapi.SyncResult{Queued: 2, NotPermitted: 1, Parents: []engineapi.QueuedParent{
			{ObjectRef: engineapi.ObjectRef{Namespace: "ns", Name: "p"}}, {ObjectRef: engineapi.ObjectRef{Name: "q"}, HeldUntil: &held},
		}}}, []string{"Queued 2 parents", "left out 1 you may not update", "ns/p", "synced at 03:04:05Z"}},
		{"sync-result", SyncOutcome{Error: "Refused: user \"dev\" may not update apps p"}, []string{`role="alert"`, "may not update apps p"}},
	} {
		var buf bytes.Buffer
		if err := pages["controller.html"].ExecuteTemplate(&buf, tc.tmpl, tc.data); err != nil {
			t.Fatal(err)
		}
		if err := pages["parent.html"].ExecuteTemplate(&bytes.Buffer{}, tc.tmpl, tc.data); err != nil {
			t.Fatal(err)
		}
		out := strings.Join(strings.Fields(buf.String()), " ")
		for _, want := range tc.want {
			if !strings.Contains(out, strings.Join(strings.Fields(want), " ")) && !strings.Contains(buf.String(), want) {
				t.Errorf("%s: no %q in\n%s", tc.tmpl, want, buf.String())
			}
		}
	}
}

// A namespaced controller's sync buttons post to its own path, and the dashboard asks
// the engine's namespaced sync endpoint with the user's token; the engine's refusal
// is shown with its reason.
func TestNamespacedSyncGoesToTheEngineAsTheUser(t *testing.T) {
	type call struct{ method, path, auth, body string }
	var got []call
	engine := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(r.Body)
		got = append(got, call{r.Method, r.URL.Path, r.Header.Get("Authorization"), string(body)})
		w.Header().Set("Content-Type", "application/json")
		if strings.Contains(string(body), `"other"`) {
			w.WriteHeader(http.StatusForbidden)
			_, _ = io.WriteString(w, `{"error": "forbidden", "message": "user \"alice\" may not update greetings other in namespace team-a"}`)
			return
		}
		_, _ = io.WriteString(w, `{"queued": 1, "parents": [{"apiVersion": "example.com/v1", "kind": "Greeting", "namespace": "team-a", "name": "g"}]}`)
	}))
	t.Cleanup(engine.Close)
	h, _ := testDashboardWith(t, func(o *Options) { o.EngineURL = engine.URL })
	session, csrf := login(t, h)
	post := func(form url.Values) *httptest.ResponseRecorder {
		form.Set("csrf", csrf)
		r := httptest.NewRequest(http.MethodPost, Prefix+"/namespaces/team-a/controllers/NamespacedCompositeController/greeter/sync", strings.NewReader(form.Encode()))
		r.Header.Set("Content-Type", "application/x-www-form-urlencoded")
		r.AddCookie(session)
		return serve(h, r)
	}

	rec := post(url.Values{"namespace": {"team-a"}, "parent": {"g"}, "kind": {"Greeting"}})
	if rec.Code != http.StatusOK || !strings.Contains(rec.Body.String(), "Queued 1 parent") || !strings.Contains(rec.Body.String(), "team-a/g") {
		t.Errorf("Sync now: %d %s", rec.Code, rec.Body.String())
	}
	want := call{http.MethodPost, "/api/v1/namespaces/team-a/controllers/NamespacedCompositeController/greeter/sync", "Bearer " + goodToken, `{"namespace":"team-a","name":"g","kind":"Greeting"}`}
	if len(got) != 1 || got[0] != want {
		t.Errorf("the engine got %+v, want %+v", got, want)
	}
	rec = post(url.Values{"all": {"1"}})
	if rec.Code != http.StatusOK || len(got) != 2 || got[1].body != `{"all":true}` || got[1].path != want.path {
		t.Errorf("Sync all: %d %s; the engine got %+v", rec.Code, rec.Body.String(), got)
	}
	rec = post(url.Values{"parent": {"other"}})
	if rec.Code != http.StatusForbidden || !strings.Contains(rec.Body.String(), "Refused: user &#34;alice&#34; may not update greetings other") {
		t.Errorf("a refused sync: %d %s", rec.Code, rec.Body.String())
	}
}
