package dashboard

import (
	"context"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/go-chi/chi/v5"
	"github.com/google/go-cmp/cmp"

	"github.com/metalambda/metalambda/internal/httpapi"
	"github.com/metalambda/metalambda/web"
)

func TestReadFunctionForm(t *testing.T) {
	for _, tt := range []struct {
		name     string
		form     url.Values
		wantEnv  []EnvVar
		problems []string
	}{
		{"env rows, blank ones skipped", url.Values{"env-name": {"A", "", " B "}, "env-value": {"1", "", "2"}, "timeout": {"30"}},
			[]EnvVar{{"A", "1"}, {"B", "2"}}, nil},
		{"a value without a name", url.Values{"env-name": {""}, "env-value": {"x"}}, nil, []string{"Env row 1 has a value but no name."}},
		{"a name twice", url.Values{"env-name": {"A", "A"}, "env-value": {"1", "2"}}, []EnvVar{{"A", "1"}}, []string{"Env variable A is given twice."}},
		{"a timeout out of range", url.Values{"timeout": {"301"}}, nil, []string{`The timeout must be a whole number of seconds from 1 to 300, not "301".`}},
		{"a timeout that is not a number", url.Values{"timeout": {"ten"}}, nil, []string{`The timeout must be a whole number of seconds from 1 to 300, not "ten".`}},
	} {
		r := httptest.NewRequest(http.MethodPost, "/", strings.NewReader(tt.form.Encode()))
		r.Header.Set("Content-Type", "application/x-www-form-urlencoded")
		form, problems := readFunctionForm(r)
		var got []string
		for _, p := range problems {
			got = append(got, p.Message)
		}
		if diff := cmp.Diff(tt.problems, got); diff != "" {
			t.Errorf("%s: problems (-want +got):\n%s", tt.name, diff)
		}
		if diff := cmp.Diff(tt.wantEnv, form.Env); diff != "" {
			t.Errorf("%s: env (-want +got):\n%s", tt.name, diff)
		}
	}
}

func TestFormApplyKeepsTheRestOfTheSpec(t *testing.T) {
	spec := map[string]any{"runtime": "python", "source": "old", "handler": "h", "history": map[string]any{"enabled": false}, "timeoutSeconds": int64(5), "env": map[string]any{"OLD": "1"}}
	FunctionForm{Runtime: "python", Source: "new", Env: []EnvVar{{"A", "1"}}}.apply(spec)
	want := map[string]any{"runtime": "python", "source": "new", "handler": "h", "history": map[string]any{"enabled": false}, "env": map[string]string{"A": "1"}}
	if diff := cmp.Diff(want, spec); diff != "" {
		t.Errorf("spec (-want +got):\n%s", diff)
	}
}

// TestFunctionFragments renders the results a function's page swaps in: compile errors
// carry their position for the editor and say it in text; the replay table marks the
// changed call alone and shows its diff.
func TestFunctionFragments(t *testing.T) {
	pages, err := parsePages(web.Templates(), "")
	if err != nil {
		t.Fatal(err)
	}
	render := func(fragment string, p *FunctionPage) string {
		var b strings.Builder
		if err := pages["function.html"].ExecuteTemplate(&b, fragment, Page{Data: p}); err != nil {
			t.Fatalf("%s: %v", fragment, err)
		}
		return b.String()
	}
	p := newFunctionPage(FunctionForm{Namespace: "ns", Name: "f", Runtime: "javascript"})
	p.Save = &SaveResult{Problems: []Problem{{Line: 3, Column: 20, Message: "Unexpected token ;"}, {Message: "Env variable A is given twice."}}}
	saved := render("save-result", p)
	for _, want := range []string{`role="alert"`, `<li data-line="3" data-column="20"><strong>Line 3, column 20:</strong> Unexpected token ;</li>`, `<li>Env variable A is given twice.</li>`, "2 problems"} {
		if !strings.Contains(saved, want) {
			t.Errorf("save-result lacks %q:\n%s", want, saved)
		}
	}
	req := func(name string) json.RawMessage {
		return json.RawMessage(`{"parent": {"kind": "ConfigMap", "metadata": {"name": "` + name + `", "namespace": "default"}}}`)
	}
	p.Replay = &ReplayView{Enabled: true, Changed: 1, Items: []ReplayedCall{
		{Time: time.Unix(2, 0), Source: "hook", Request: req("b"), Old: CallOutcome{Status: 200}, New: &CallOutcome{Status: 200}, Changed: true,
			Diff: "--- recorded\n+++ candidate\n@@ -1 +1 @@\n-\"hello\"\n+\"bonjour\"\n"},
		{Time: time.Unix(1, 0), Source: "invoke", Request: req("a"), Old: CallOutcome{Status: 200}, New: &CallOutcome{Status: 200}},
		{Time: time.Unix(0, 0), Source: "hook", Request: json.RawMessage(`{"truncated": true, "bytes": 20000}`), Old: CallOutcome{Status: 200}, Error: "not run: too big"},
	}}
	replayed := render("replay-result", p)
	for _, want := range []string{"1 of 3", `data-changed="true"`, "ConfigMap default/b", `<span class="del">-&#34;hello&#34;</span>`, `<span class="add">&#43;&#34;bonjour&#34;</span>`, `<span class="warn">not run: too big</span>`} {
		if !strings.Contains(replayed, want) {
			t.Errorf("replay-result lacks %q:\n%s", want, replayed)
		}
	}
	if n := strings.Count(replayed, `data-changed="true"`); n != 1 {
		t.Errorf("%d rows marked changed, want 1", n)
	}
	p.Replay = &ReplayView{Problems: []Problem{{Line: 2, Column: 13, Message: "Unexpected token ;"}}}
	if got := render("replay-result", p); !strings.Contains(got, `data-line="2" data-column="13"`) {
		t.Errorf("a replay's compile error has no position:\n%s", got)
	}
}

// TestCallAPIFromARoutedPage: a page's handler, itself routed by chi, calls the
// API's own chi router in process; the API sees the session's token and the client's
// address, and its error answers become *httpapi.Error with their position.
func TestCallAPIFromARoutedPage(t *testing.T) {
	api := chi.NewRouter()
	api.Route("/v1/namespaces/{namespace}/functions", func(r chi.Router) {
		r.Post("/", func(w http.ResponseWriter, r *http.Request) {
			if r.Header.Get("Authorization") != "Bearer user-token" || r.RemoteAddr != "192.0.2.1:1234" {
				w.WriteHeader(http.StatusUnauthorized)
				return
			}
			w.WriteHeader(http.StatusUnprocessableEntity)
			_, _ = w.Write([]byte(`{"error": "compile_error", "message": "line 3", "line": 3, "column": 20}`))
		})
	})
	d := &Dashboard{opts: Options{FunctionsAPI: api}}
	var got error
	pages := chi.NewRouter()
	pages.Route("/ui", func(r chi.Router) {
		r.Post("/functions/{namespace}/{name}", func(w http.ResponseWriter, r *http.Request) {
			ctx := context.WithValue(r.Context(), sessionKey{}, &Session{Token: "user-token"})
			got = d.callAPI(r.WithContext(ctx), http.MethodPost, functionsPath(chi.URLParam(r, "namespace")), map[string]any{}, nil)
		})
	})
	req := httptest.NewRequest(http.MethodPost, "/ui/functions/ns/f", nil)
	req.RemoteAddr = "192.0.2.1:1234"
	pages.ServeHTTP(httptest.NewRecorder(), req)
	want := &httpapi.Error{Status: http.StatusUnprocessableEntity, Code: "compile_error", Message: "line 3", Line: 3, Column: 20}
	if diff := cmp.Diff(error(want), got); diff != "" {
		t.Errorf("callAPI (-want +got):\n%s", diff)
	}
}
