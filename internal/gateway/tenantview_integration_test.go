//go:build integration

package gateway

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/cookiejar"
	"net/http/httptest"
	"net/url"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	rbacv1 "k8s.io/api/rbac/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/labels"

	"github.com/metalambda/metalambda/internal/engine"
	"github.com/metalambda/metalambda/internal/engineapi"
	"github.com/metalambda/metalambda/internal/kubetest"
)

// viewerRole lets ServiceAccount ns/viewer read the namespaced controllers, the
// Functions and the ConfigMaps (the controllers' children) of ns and read and update
// its greetings, but not list its events: a tenant's developer.
func viewerRole(t *testing.T, ns string) string {
	t.Helper()
	env.ServiceAccount(t, ns, "viewer")
	accountRole(t, ns, "viewer",
		rbacv1.PolicyRule{APIGroups: []string{"metalambda.dev"}, Resources: []string{"namespacedcompositecontrollers", "namespaceddecoratorcontrollers"}, Verbs: []string{"get", "list"}},
		rbacv1.PolicyRule{APIGroups: []string{tenantParents.Group}, Resources: []string{"greetings"}, Verbs: []string{"get", "list", "update"}},
		rbacv1.PolicyRule{APIGroups: []string{"metalambda.dev"}, Resources: []string{"functions"}, Verbs: []string{"get", "list"}},
		// The engine API shows a parent's children the caller may get.
		rbacv1.PolicyRule{APIGroups: []string{""}, Resources: []string{"configmaps"}, Verbs: []string{"get"}},
	)
	return env.Token(t, ns, "viewer")
}

// apiCall sends method path (body JSON, "" for none) to the engine API at base with
// token, and returns the status and body.
func apiCall(t *testing.T, method, base, path, token, body string) (int, string) {
	t.Helper()
	req, err := http.NewRequestWithContext(kubetest.Context(t), method, base+path, strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Authorization", "Bearer "+token)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	data, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	return resp.StatusCode, string(data)
}

// dashboardUser is a browser logged in to a gateway's dashboard.
type dashboardUser struct {
	t    *testing.T
	base string
	c    *http.Client
}

// dashboardSession logs in to the dashboard of the gateway at base with token.
func dashboardSession(t *testing.T, base, token string) *dashboardUser {
	t.Helper()
	jar, err := cookiejar.New(nil)
	if err != nil {
		t.Fatal(err)
	}
	u, err := url.Parse(base)
	if err != nil {
		t.Fatal(err)
	}
	jar.SetCookies(u, []*http.Cookie{{Name: "metalambda_login", Value: "csrf-value", Path: "/"}})
	c := &http.Client{Jar: jar}
	resp, err := c.PostForm(base+"/ui/login", url.Values{"csrf": {"csrf-value"}, "token": {token}, "next": {"/ui/"}})
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("logging in to the dashboard: %s", resp.Status)
	}
	return &dashboardUser{t: t, base: base, c: c}
}

// get GETs a page under /ui, and returns the status and body.
func (u *dashboardUser) get(page string) (int, string) {
	u.t.Helper()
	resp, err := u.c.Get(u.base + "/ui" + page)
	return u.read(resp, err)
}

// post posts form to a page under /ui, with the session's CSRF token (read from the
// page csrfFrom, as a browser's form has it), and returns the status and body.
func (u *dashboardUser) post(csrfFrom, page string, form url.Values) (int, string) {
	u.t.Helper()
	_, body := u.get(csrfFrom)
	m := regexp.MustCompile(`<meta name="csrf-token" content="([^"]+)">`).FindStringSubmatch(body)
	if m == nil {
		u.t.Fatalf("no CSRF token in %s: %s", csrfFrom, body)
	}
	form.Set("csrf", m[1])
	resp, err := u.c.PostForm(u.base+"/ui"+page, form)
	return u.read(resp, err)
}

func (u *dashboardUser) read(resp *http.Response, err error) (int, string) {
	u.t.Helper()
	if err != nil {
		u.t.Fatal(err)
	}
	defer resp.Body.Close()
	data, err := io.ReadAll(resp.Body)
	if err != nil {
		u.t.Fatal(err)
	}
	return resp.StatusCode, string(data)
}

// tenantView is two tenants a and b, each with a Function greeter, a namespaced
// controller greeter whose sync hook it is, a Greeting g-NS it has converged, and a
// developer (tokens[NS]) who may read the namespace's controllers, Functions and
// Greetings and update its Greetings; an engine (its API at api) and a gateway
// whose dashboard reads it.
type tenantView struct {
	g      *testGateway
	api    string
	a, b   string
	tokens map[string]string
	client *engineapi.Client
	label  string
}

func startTenantView(t *testing.T) *tenantView {
	t.Helper()
	// The engine's API listens before the gateway starts, whose dashboard reads it.
	engineAPI := http.NotFoundHandler()
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { engineAPI.ServeHTTP(w, r) }))
	t.Cleanup(srv.Close)
	g := startGateway(t, func(o *Options) { o.EngineURL = srv.URL })
	env.InstallCRDs(t, kubetest.SchemalessCRD(tenantParents.Group, "Greeting", "greetings", "greeting"))
	v := &tenantView{g: g, api: srv.URL, tokens: map[string]string{}, client: &engineapi.Client{BaseURL: srv.URL}}
	v.a, v.b = tenant(t, g), tenant(t, g)
	// The engine's label names neither namespace: every body is searched for them.
	v.label = fmt.Sprintf("tview-%d", time.Now().UnixNano())
	o := engine.Defaults()
	o.TargetSelector = labels.SelectorFromSet(labels.Set{"test": v.label})
	o.TenantGateways = []string{g.url}
	o.RightsRecheckInterval = time.Second
	mgr, err := engine.New(env.Config, o, prometheus.NewRegistry())
	if err != nil {
		t.Fatal(err)
	}
	kubetest.Run(t, "the engine", mgr.Run, func(context.Context) (bool, error) { return mgr.Ready(), nil })
	if engineAPI, err = mgr.API(env.Kube); err != nil {
		t.Fatal(err)
	}
	ctx := kubetest.Context(t)
	for _, ns := range []string{v.a, v.b} {
		tenantRole(t, ns)
		createNCC(t, ns, "greeter", v.label, map[string]any{"url": g.url + "/hooks/" + ns + "/greeter"})
		if err := createGreeting(ctx, ns, "g-"+ns, map[string]any{"who": ns}); err != nil {
			t.Fatal(err)
		}
		v.tokens[ns] = viewerRole(t, ns)
	}
	return v
}

// TestTenantViewOfTheEngineAPI: two tenants, each with a namespaced controller and a
// developer who may read its controllers and parents. Each sees, through the engine's
// API and the dashboard's pages, its own controller
// (its ServiceAccount, Running), its parents, its hook calls, and syncs its parents
// on demand; it gets 403 for the other's, whether the name exists or not, and no body
// it gets names the other namespace unless its request did. A controller whose
// ServiceAccount lacks rights shows MissingRights with the missing grant.
func TestTenantViewOfTheEngineAPI(t *testing.T) {
	v := startTenantView(t)
	g, a, b, tokens, client, label := v.g, v.a, v.b, v.tokens, v.client, v.label
	ctx := kubetest.Context(t)
	// In a, a controller whose ServiceAccount has no rights at all.
	env.ServiceAccount(t, a, "nobody")
	env.Create(t, nccGVR, a, &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": "metalambda.dev/v1alpha1", "kind": "NamespacedCompositeController",
		"metadata": map[string]any{"name": "unprivileged", "labels": map[string]any{"test": label}},
		"spec": map[string]any{
			"serviceAccountName": "nobody", "generateSelector": true,
			"parentResource": map[string]any{"apiVersion": tenantParents.GroupVersion().String(), "resource": "greetings"},
			"hooks":          map[string]any{"sync": map[string]any{"webhook": map[string]any{"url": g.url + "/hooks/" + a + "/greeter"}}},
		},
	}})
	for _, ns := range []string{a, b} {
		waitReady(t, ns, "greeter", "True", "Running")
		waitConfigMap(t, ns, "g-"+ns, ns)
	}
	waitReady(t, a, "unprivileged", "False", "MissingRights")

	for me, other := range map[string]string{a: b, b: a} {
		token := tokens[me]
		// No body answered to a request that does not name the other namespace
		// names it.
		clean := func(what string, status int, body string, want int) {
			t.Helper()
			if status != want {
				t.Errorf("%s as %s: %d %s, want %d", what, me, status, body, want)
			}
			if strings.Contains(body, other) {
				t.Errorf("%s as %s names the other namespace %s: %s", what, me, other, body)
			}
		}
		for _, path := range []string{"/api/v1/controllers", "/api/v1/namespaces/" + me + "/controllers", "/api/v1/hookcalls"} {
			status, body := apiCall(t, http.MethodGet, v.api, path, token, "")
			clean("GET "+path, status, body, http.StatusOK)
		}
		list, err := client.Controllers(ctx, token)
		if err != nil {
			t.Fatal(err)
		}
		var mine []string
		for _, c := range list.Items {
			mine = append(mine, c.String())
		}
		want := []string{engineapi.KindNamespacedComposite + "/" + me + "/greeter"}
		if me == a {
			want = append(want, engineapi.KindNamespacedComposite+"/"+a+"/unprivileged")
		}
		if strings.Join(mine, ",") != strings.Join(want, ",") {
			t.Errorf("controllers as %s: %v, want %v", me, mine, want)
		}
		ref := engineapi.ControllerRef{Kind: engineapi.KindNamespacedComposite, Namespace: me, Name: "greeter"}
		sum, err := client.Controller(ctx, token, ref)
		if err != nil {
			t.Fatal(err)
		}
		if !sum.Running || sum.ServiceAccountName != "ctl" || sum.Parents != 1 {
			t.Errorf("greeter of %s: %+v, want running as ctl with 1 parent", me, sum)
		}
		parents, err := client.ControllerParents(ctx, token, ref)
		if err != nil {
			t.Fatal(err)
		}
		if len(parents.Items) != 1 || parents.Items[0].Name != "g-"+me {
			t.Errorf("parents of %s's greeter: %+v", me, parents.Items)
		}
		status, body := apiCall(t, http.MethodGet, v.api, engineapi.ControllerPath(ref)+"/parents/g-"+me, token, "")
		clean("the parent", status, body, http.StatusOK)
		calls, err := client.HookCalls(ctx, token, engineapi.HookCallQuery{Controller: ref.String()})
		if err != nil {
			t.Fatal(err)
		}
		if len(calls.Items) == 0 || calls.Items[0].Controller != ref {
			t.Errorf("hook calls of %s's greeter: %+v", me, calls.Items)
		}
		status, body = apiCall(t, http.MethodPost, v.api, engineapi.ControllerPath(ref)+"/sync", token, `{"name": "g-`+me+`"}`)
		clean("a sync", status, body, http.StatusOK)
		status, body = apiCall(t, http.MethodPost, v.api, engineapi.ControllerPath(ref)+"/sync", token, `{"all": true}`)
		clean("a sync of all", status, body, http.StatusOK)

		// The other's: an empty list, and 403 whether the controller exists or not.
		status, body = apiCall(t, http.MethodGet, v.api, "/api/v1/controllers?namespace="+other, token, "")
		var empty engineapi.ControllerList
		if err := json.Unmarshal([]byte(body), &empty); status != http.StatusOK || err != nil || len(empty.Items) != 0 {
			t.Errorf("the other's list as %s: %d %s", me, status, body)
		}
		theirs := engineapi.ControllerRef{Kind: engineapi.KindNamespacedComposite, Namespace: other, Name: "greeter"}
		missing := theirs
		missing.Name = "no-such-controller"
		for _, r := range []engineapi.ControllerRef{theirs, missing} {
			for _, req := range [][3]string{
				{http.MethodGet, engineapi.ControllerPath(r), ""},
				{http.MethodGet, engineapi.ControllerPath(r) + "/parents", ""},
				{http.MethodGet, engineapi.ControllerPath(r) + "/parents/g-" + other, ""},
				{http.MethodPost, engineapi.ControllerPath(r) + "/sync", `{"all": true}`},
			} {
				if status, body := apiCall(t, req[0], v.api, req[1], token, req[2]); status != http.StatusForbidden {
					t.Errorf("%s %s as %s: %d %s, want 403", req[0], req[1], me, status, body)
				}
			}
		}
		status, body = apiCall(t, http.MethodGet, v.api, "/api/v1/hookcalls?controller="+theirs.String(), token, "")
		var none engineapi.HookCallList
		if err := json.Unmarshal([]byte(body), &none); status != http.StatusOK || err != nil || len(none.Items) != 0 {
			t.Errorf("the other's hook calls as %s: %d %s", me, status, body)
		}

		// The dashboard, logged in with the same token, shows the same.
		ui := dashboardSession(t, g.url, token)
		status, body = ui.get(engineapi.ControllerPath(ref)[len("/api/v1"):])
		clean("the dashboard's controller page", status, body, http.StatusOK)
		if !strings.Contains(body, "g-"+me) || !strings.Contains(body, "<code>ctl</code>") {
			t.Errorf("the dashboard's page of %s's greeter shows no parent g-%s or service account: %s", me, me, body)
		}
		status, body = ui.get("/")
		clean("the dashboard's overview", status, body, http.StatusOK)
		if !strings.Contains(body, "/ui/namespaces/"+me+"/controllers/"+engineapi.KindNamespacedComposite+"/greeter") {
			t.Errorf("the dashboard's overview as %s does not link its greeter: %s", me, body)
		}
		if me == a && !strings.Contains(body, "data-missing-rights") {
			t.Errorf("the dashboard's overview as %s does not show the missing rights of unprivileged: %s", me, body)
		}
		if status, body := ui.get(engineapi.ControllerPath(theirs)[len("/api/v1"):]); status != http.StatusForbidden {
			t.Errorf("the dashboard's page of the other's greeter as %s: %d %s, want 403", me, status, body)
		}
	}

	// The controller without rights shows MissingRights, naming the grant it lacks.
	sum, err := client.Controller(ctx, tokens[a], engineapi.ControllerRef{Kind: engineapi.KindNamespacedComposite, Namespace: a, Name: "unprivileged"})
	if err != nil {
		t.Fatal(err)
	}
	var missingRights bool
	for _, c := range sum.Conditions {
		missingRights = missingRights || (c.Type == "Ready" && c.Reason == "MissingRights" && strings.Contains(c.Message, "greetings"))
	}
	if sum.Running || sum.ServiceAccountName != "nobody" || !missingRights || sum.Error == "" {
		t.Errorf("unprivileged: %+v, want not running, MissingRights naming greetings", sum)
	}
}
