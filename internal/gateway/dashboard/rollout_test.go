package dashboard

import (
	"context"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/go-chi/chi/v5"
	"github.com/google/go-cmp/cmp"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	fnv1 "github.com/metalambda/metalambda/internal/apis/metalambda/v1alpha1"
	"github.com/metalambda/metalambda/internal/httpapi"
	"github.com/metalambda/metalambda/internal/jsonvalue"
	"github.com/metalambda/metalambda/web"
)

// rollingFunction is Function ns/f rolling out f-b from f-a, at step 2 of 3 (50%),
// in phase, with a failing parent.
func rollingFunction(t *testing.T, phase string, paused bool) *unstructured.Unstructured {
	t.Helper()
	start := metav1.NewTime(time.Date(2026, 11, 27, 9, 0, 0, 0, time.UTC))
	f := fnv1.Function{
		ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "f"},
		Spec:       fnv1.FunctionSpec{Runtime: "javascript", Source: "x", Rollout: &fnv1.RolloutPolicy{MaxFailures: 2, Paused: paused}},
		Status: fnv1.FunctionStatus{
			Revisions: []fnv1.RevisionShare{{Name: "f-a", Revision: 1, Share: 50}, {Name: "f-b", Revision: 2, Share: 50}},
			Rollout: &fnv1.RolloutStatus{Revision: "f-b", From: "f-a", Step: 1, Phase: phase, Failures: 1, Reason: "HookFailed", Message: "1 parent failed",
				FailingParents: []string{"CompositeController/web ns/p1", "not a parent"}, StepStartTime: &start},
		},
	}
	u := &unstructured.Unstructured{}
	if err := jsonvalue.Convert(f, &u.Object); err != nil {
		t.Fatal(err)
	}
	return u
}

func actions(p RolloutPanel) []string {
	var out []string
	for _, b := range p.Actions {
		out = append(out, b.Action)
	}
	return out
}

func TestRolloutPanel(t *testing.T) {
	p := rolloutPanel(rollingFunction(t, fnv1.RolloutProgressing, false))
	want := []LiveRevision{{Name: "f-a", Revision: 1, Share: 50}, {Name: "f-b", Revision: 2, Share: 50, New: true}}
	if diff := cmp.Diff(want, p.Revisions); diff != "" {
		t.Errorf("revisions (-want +got):\n%s", diff)
	}
	if p.Step != 2 || p.Steps != 3 || p.StepShare != 50 || p.MaxFailures != 2 || p.StepStart.IsZero() {
		t.Errorf("step %d of %d at %d%%, maxFailures %d, since %v", p.Step, p.Steps, p.StepShare, p.MaxFailures, p.StepStart)
	}
	wantParents := []FailingParent{{Text: "CompositeController/web ns/p1", URL: "/ui/controllers/CompositeController/web/parents/ns/p1"}, {Text: "not a parent"}}
	if diff := cmp.Diff(wantParents, p.FailingParents); diff != "" {
		t.Errorf("failing parents (-want +got):\n%s", diff)
	}
	for _, tc := range []struct {
		phase  string
		paused bool
		want   []string
	}{
		{fnv1.RolloutProgressing, false, []string{"pause", "promote", "abort"}},
		{fnv1.RolloutPaused, true, []string{"resume", "promote", "abort"}},
		{fnv1.RolloutHalted, false, nil},
		{fnv1.RolloutComplete, false, nil},
	} {
		if got := actions(rolloutPanel(rollingFunction(t, tc.phase, tc.paused))); !cmp.Equal(tc.want, got) {
			t.Errorf("%s (paused %v): buttons %v, want %v", tc.phase, tc.paused, got, tc.want)
		}
	}
}

func TestParentURL(t *testing.T) {
	for text, want := range map[string]string{
		"CompositeController/web ns/p1":       "/ui/controllers/CompositeController/web/parents/ns/p1",
		"DecoratorController/dec cluster-obj": "/ui/controllers/DecoratorController/dec/parents/-/cluster-obj",
		"web ns/p1":                           "",
		"CompositeController/web":             "",
		"CompositeController/web ns/p1/x":     "",
	} {
		if got := parentURL(text); got != want {
			t.Errorf("parentURL(%q) = %q, want %q", text, got, want)
		}
	}
}

func TestRolloutBadge(t *testing.T) {
	if b := rolloutBadge(rollingFunction(t, fnv1.RolloutPaused, true)); b == nil || b.Phase != "Paused" || b.Share != 50 {
		t.Errorf("badge of a paused rollout = %+v", b)
	}
	if b := rolloutBadge(rollingFunction(t, fnv1.RolloutComplete, false)); b != nil {
		t.Errorf("a complete rollout has the badge %+v", b)
	}
	u := rollingFunction(t, fnv1.RolloutProgressing, false)
	unstructured.RemoveNestedField(u.Object, "status", "rollout")
	if b := rolloutBadge(u); b != nil {
		t.Errorf("a function without a rollout has the badge %+v", b)
	}
}

// TestRolloutFragments renders the panel: the share bar, the phase, step and
// failures, a failing parent linked to its page, the buttons the phase takes with a
// question before promote and abort, and the outcome of a click.
func TestRolloutFragments(t *testing.T) {
	pages, err := parsePages(web.Templates())
	if err != nil {
		t.Fatal(err)
	}
	render := func(fragment string, p *FunctionPage) string {
		var b strings.Builder
		now := time.Date(2026, 11, 27, 9, 5, 0, 0, time.UTC)
		if err := pages["function.html"].ExecuteTemplate(&b, fragment, Page{Data: p, Now: now, Session: &Session{CSRF: "tok"}}); err != nil {
			t.Fatalf("%s: %v", fragment, err)
		}
		return b.String()
	}
	p := newFunctionPage(FunctionForm{Namespace: "ns", Name: "f"})
	p.Rollout = rolloutPanel(rollingFunction(t, fnv1.RolloutProgressing, false))
	panel := render("rollout", p)
	for _, want := range []string{
		`<span class="new" style="width: 50%" title="f-b">2 · 50%</span>`,
		`data-testid="rollout-phase"><span class="">Progressing</span>`,
		`2 of 3 (50%), began <time datetime="2026-11-27T09:00:00Z">5m ago</time>`,
		`<span class="bad">1</span> of 2 tolerated`,
		`<a href="/ui/controllers/CompositeController/web/parents/ns/p1">CompositeController/web ns/p1</a>`,
		`<li>not a parent</li>`,
		`hx-post="/ui/functions/ns/f/rollout/pause"`,
		`hx-confirm="Abort the rollout of f-b? The previous revision serves every parent again."`,
		`hx-confirm="Promote f-b to 100% of the parents now?"`,
		`<input type="hidden" name="csrf" value="tok">`,
	} {
		if !strings.Contains(panel, want) {
			t.Errorf("the panel lacks %q:\n%s", want, panel)
		}
	}
	if strings.Contains(panel, "rollout-resume") {
		t.Errorf("a progressing rollout offers resume:\n%s", panel)
	}
	p.Rollout = rolloutPanel(rollingFunction(t, fnv1.RolloutHalted, false))
	if halted := render("rollout", p); strings.Contains(halted, "<button") || !strings.Contains(halted, `<span class="bad">Halted</span>`) {
		t.Errorf("a halted rollout's panel:\n%s", halted)
	}
	p.RolloutResult = &RolloutOutcome{Error: "the rollout of f-b (function ns/f) is Halted"}
	if got := render("rollout-result", p); !strings.Contains(got, `role="alert">the rollout of f-b (function ns/f) is Halted`) {
		t.Errorf("rollout-result:\n%s", got)
	}
}

// TestRolloutActionHandler: a button's post goes to the API's rollout route as the
// session's user, and htmx gets what was asked, or the API's refusal, as a fragment.
func TestRolloutActionHandler(t *testing.T) {
	pages, err := parsePages(web.Templates())
	if err != nil {
		t.Fatal(err)
	}
	api := chi.NewRouter()
	api.Post("/v1/namespaces/{namespace}/functions/{name}/rollout/{action}", func(w http.ResponseWriter, r *http.Request) {
		switch {
		case r.Header.Get("Authorization") != "Bearer user-token":
			w.WriteHeader(http.StatusUnauthorized)
		case chi.URLParam(r, "action") == "abort":
			httpapi.WriteError(w, httpapi.NewError(http.StatusConflict, "rollout_halted", "the rollout of f-b (function ns/f) is Halted"))
		default:
			httpapi.WriteJSON(w, http.StatusOK, map[string]any{"metadata": map[string]any{"name": chi.URLParam(r, "name")}})
		}
	})
	d := &Dashboard{opts: Options{FunctionsAPI: api, Now: time.Now}, pages: pages}
	t.Cleanup(func() { _ = d.Close() })
	routes := chi.NewRouter()
	routes.Post("/ui/functions/{namespace}/{name}/rollout/{action}", func(w http.ResponseWriter, r *http.Request) {
		d.rolloutAction(w, r.WithContext(context.WithValue(r.Context(), sessionKey{}, &Session{Token: "user-token"})))
	})
	for action, want := range map[string]string{
		"pause": `<p class="ok" role="status">Paused: the shares stay until you resume.</p>`,
		"abort": `<p class="alert" role="alert">the rollout of f-b (function ns/f) is Halted</p>`,
	} {
		req := httptest.NewRequest(http.MethodPost, "/ui/functions/ns/f/rollout/"+action, nil)
		req.Header.Set("HX-Request", "true")
		w := httptest.NewRecorder()
		routes.ServeHTTP(w, req)
		if w.Code != http.StatusOK || !strings.Contains(w.Body.String(), want) {
			t.Errorf("%s: %d %s, want %s", action, w.Code, w.Body, want)
		}
	}
}
