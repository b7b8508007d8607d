package api

import (
	"net/http"
	"net/http/httptest"
	"strconv"
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	"github.com/metalambda/metalambda/internal/engine/hook"
	"github.com/metalambda/metalambda/internal/httpapi/httpapitest"
)

// fakeEngine runs one CompositeController "web" whose parents are apps.example.com
// (kind App) and, as a decorator may have, widgets.example.com (kind Widget).
type fakeEngine struct {
	ctl *fakeController
	// leader, when set, makes the engine a standby replica that names it.
	leader string
}

func (e fakeEngine) Ready() bool                               { return e.leader == "" }
func (e fakeEngine) Standby() (string, bool)                   { return e.leader, e.leader != "" }
func (e fakeEngine) Controllers() []*unstructured.Unstructured { return nil }
func (e fakeEngine) Controller(kind, namespace, name string) Controller {
	if kind != CompositeKind || namespace != "" || name != "web" {
		return nil
	}
	return e.ctl
}
func (e fakeEngine) Resource(string, string) (Resource, error) { return apps, nil }

var (
	apps    = Resource{Group: "example.com", Resource: "apps"}
	widgets = Resource{Group: "example.com", Resource: "widgets"}
)

type fakeController struct {
	parents []Parent
	queued  []string // namespace/name of each parent Enqueue was given
	held    time.Duration
}

func (c *fakeController) Overview() Overview                            { return Overview{} }
func (c *fakeController) ParentResources() []Resource                   { return []Resource{apps, widgets} }
func (c *fakeController) ParentState(Parent) ParentState                { return ParentState{} }
func (c *fakeController) ChildResource(string, string) (Resource, bool) { return Resource{}, false }
func (c *fakeController) Parents(namespace, name, kind string) []Parent {
	var out []Parent
	for _, p := range c.parents {
		if p.Object.GetNamespace() == namespace && p.Object.GetName() == name && (kind == "" || p.Object.GetKind() == kind) {
			out = append(out, p)
		}
	}
	return out
}

func (c *fakeController) AllParents() []Parent { return c.parents }
func (c *fakeController) Enqueue(p Parent) time.Duration {
	c.queued = append(c.queued, p.Object.GetNamespace()+"/"+p.Object.GetName())
	return c.held
}

func parentOf(res Resource, kind, namespace, name string) Parent {
	obj := &unstructured.Unstructured{}
	obj.SetAPIVersion(res.Group + "/v1")
	obj.SetKind(kind)
	obj.SetNamespace(namespace)
	obj.SetName(name)
	return Parent{Object: obj, Resource: res}
}

// testServer serves the API of fakeEngine, with the stand-in API allowing allowed.
func testServer(t *testing.T, allowed map[access]bool, calls *History) (*httpapitest.Reviews, http.Handler) {
	api, auth := reviews(t, allowed)
	ctl := &fakeController{parents: []Parent{
		parentOf(apps, "App", "ns", "a"),
		parentOf(apps, "App", "ns", "both"),
		parentOf(widgets, "Widget", "ns", "both"),
	}}
	return api, (&server{engine: fakeEngine{ctl: ctl}, calls: calls, auth: auth}).routes()
}

func get(h http.Handler, path string) *httptest.ResponseRecorder {
	r := httptest.NewRequest(http.MethodGet, path, nil)
	r.Header.Set("Authorization", "Bearer "+httpapitest.GoodToken)
	w := httptest.NewRecorder()
	h.ServeHTTP(w, r)
	return w
}

// F5: a caller that may get the controller but not the parent gets 403 whether the
// parent exists, does not, or is ambiguous: the answer tells nothing of the objects.
func TestParentIsAuthorizedBeforeItIsLookedUp(t *testing.T) {
	_, h := testServer(t, map[access]bool{controllerAccess(CompositeKind, "", "web"): true}, nil)
	for _, parent := range []string{"a", "missing", "both"} {
		if w := get(h, "/api/v1/parents/cc/web/ns/"+parent); w.Code != http.StatusForbidden {
			t.Errorf("parent %s: %d %s, want 403", parent, w.Code, w.Body)
		}
	}
	if w := get(h, "/api/v1/parents/cc/other/ns/a"); w.Code != http.StatusForbidden {
		t.Errorf("a controller the caller may not get: %d, want 403", w.Code)
	}
	// Allowed on apps only: the Widget of the same name is not looked at, so "both"
	// is not ambiguous.
	_, h = testServer(t, map[access]bool{
		controllerAccess(CompositeKind, "", "web"):                true,
		{group: "example.com", resource: "apps", namespace: "ns"}: true,
	}, nil)
	for parent, want := range map[string]int{"a": http.StatusOK, "missing": http.StatusNotFound, "both": http.StatusOK} {
		if w := get(h, "/api/v1/parents/cc/web/ns/"+parent); w.Code != want {
			t.Errorf("allowed, parent %s: %d %s, want %d", parent, w.Code, w.Body, want)
		}
	}
}

// F4: a path or query no object can match is a 400 before any review.
func TestNamesAreCheckedBeforeAnyReview(t *testing.T) {
	api, h := testServer(t, nil, NewHistory(10))
	for _, path := range []string{
		"/api/v1/parents/Deployment/web/ns/a",
		"/api/v1/parents/cc/Web_1/ns/a",
		"/api/v1/parents/cc/web/Not.A.Namespace/a",
		"/api/v1/parents/cc/web/ns/a%20b",
		"/api/v1/hookcalls?namespace=NS",
		"/api/v1/hookcalls?parent=a/b",
		"/api/v1/hookcalls?controller=cc/Web_1",
	} {
		if w := get(h, path); w.Code != http.StatusBadRequest {
			t.Errorf("%s: %d %s, want 400", path, w.Code, w.Body)
		}
	}
	if tr, sar := api.TokenReviews.Load(), api.AccessReviews.Load(); tr != 0 || sar != 0 {
		t.Errorf("%d TokenReviews and %d SubjectAccessReviews, want none", tr, sar)
	}
}

// F4: a hook call list over many parents asks about at most maxChecksPerRequest
// objects, each once, however many calls it scans.
func TestHookCallsCheckABoundedNumberOfObjects(t *testing.T) {
	calls := NewHistory(1000)
	for i := range 1000 {
		calls.RecordCall(hookCall("p-"+strconv.Itoa(i), func(c *hook.Call) { c.Info.Parent.Namespace = "ns-" + strconv.Itoa(i%500) }))
	}
	api, h := testServer(t, map[access]bool{controllerAccess(CompositeKind, "", "web"): true}, calls)
	if w := get(h, "/api/v1/hookcalls?limit=1000"); w.Code != http.StatusOK {
		t.Fatalf("%d %s", w.Code, w.Body)
	}
	if n := api.AccessReviews.Load(); n > maxChecksPerRequest {
		t.Errorf("one request cost %d SubjectAccessReviews, want at most %d", n, maxChecksPerRequest)
	}
}
