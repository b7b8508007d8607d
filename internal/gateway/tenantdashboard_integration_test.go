//go:build integration

package gateway

import (
	"context"
	"net/http"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/metalambda/metalambda/internal/engineapi"
	"github.com/metalambda/metalambda/internal/kubetest"
)

// TestTenantDashboard: two tenants' developers, each logged in to the dashboard, see
// their own namespaced controller's parents linked to the parent's page (its
// children and recent hook calls), sync their own parent with the page's buttons
// (the hook is called again), and see their own namespace's Functions on the
// overview and the Functions page, though they may not list Functions cluster-wide.
// The other tenant's controller, parent, sync and Functions are refused, and no page
// body names the other namespace unless the request did.
func TestTenantDashboard(t *testing.T) {
	v := startTenantView(t)
	for _, ns := range []string{v.a, v.b} {
		waitReady(t, ns, "greeter", "True", "Running")
		waitConfigMap(t, ns, "g-"+ns, ns)
	}
	ctx := kubetest.Context(t)
	for me, other := range map[string]string{v.a: v.b, v.b: v.a} {
		ui := dashboardSession(t, v.g.url, v.tokens[me])
		clean := func(what string, status int, body string, want int, has ...string) {
			t.Helper()
			if status != want {
				t.Errorf("%s as %s: %d, want %d: %s", what, me, status, want, body)
			}
			if strings.Contains(body, other) {
				t.Errorf("%s as %s names the other namespace %s: %s", what, me, other, body)
			}
			for _, h := range has {
				if !strings.Contains(body, h) {
					t.Errorf("%s as %s has no %q: %s", what, me, h, body)
				}
			}
		}
		ref := engineapi.ControllerRef{Kind: engineapi.KindNamespacedComposite, Namespace: me, Name: "greeter"}
		page := "/namespaces/" + me + "/controllers/" + ref.Kind + "/greeter"
		parentPage := page + "/parents/g-" + me

		status, body := ui.get(page)
		clean("the controller page", status, body, http.StatusOK,
			`href="/ui`+parentPage+`"`, `hx-post="/ui`+page+`/sync"`, `data-testid="sync-all"`)
		status, body = ui.get(parentPage)
		clean("the parent page", status, body, http.StatusOK,
			`data-child="ConfigMap/g-`+me+`"`, `data-testid="sync-now"`, `name="parent" value="g-`+me+`"`, `href="/ui`+page+`"`, `data-call="`,
			"you may not list events in namespace "+me)

		// Sync now: the engine queues the parent and calls the hook again.
		calls, err := v.client.HookCalls(ctx, v.tokens[me], engineapi.HookCallQuery{Controller: ref.String()})
		if err != nil {
			t.Fatal(err)
		}
		status, body = ui.post(parentPage, page+"/sync", url.Values{"namespace": {me}, "parent": {"g-" + me}, "kind": {"Greeting"}})
		clean("Sync now", status, body, http.StatusOK, "Queued 1 parent", me+"/g-"+me)
		kubetest.Eventually(t, 30*time.Second, "the hook of "+me+"'s greeter is called after Sync now", func(ctx context.Context) (bool, error) {
			l, err := v.client.HookCalls(ctx, v.tokens[me], engineapi.HookCallQuery{Controller: ref.String(), Parent: "g-" + me, Since: calls.LatestID})
			return err == nil && len(l.Items) > 0, err
		})
		status, body = ui.post(page, page+"/sync", url.Values{"all": {"1"}})
		clean("Sync all", status, body, http.StatusOK, "Queued 1 parent")

		// Functions: its own namespace's, on the overview and the Functions page.
		mine := `data-function="` + me + `/greeter"`
		status, body = ui.get("/")
		clean("the overview", status, body, http.StatusOK, mine)
		status, body = ui.get("/functions")
		clean("the Functions page", status, body, http.StatusOK, mine)
		status, body = ui.get("/functions?namespace=" + me)
		clean("the Functions page of its namespace", status, body, http.StatusOK, mine)

		// The other's: refused, whether it exists or not.
		theirs := "/namespaces/" + other + "/controllers/" + ref.Kind + "/greeter"
		for _, p := range []string{theirs + "/parents/g-" + other, "/namespaces/" + other + "/controllers/" + ref.Kind + "/no-such/parents/g-" + other} {
			if status, body := ui.get(p); status != http.StatusForbidden {
				t.Errorf("GET %s as %s: %d, want 403: %s", p, me, status, body)
			}
		}
		for _, form := range []url.Values{{"all": {"1"}}, {"parent": {"g-" + other}}} {
			status, body := ui.post(page, theirs+"/sync", form)
			if status != http.StatusForbidden || !strings.Contains(body, "Refused") {
				t.Errorf("a sync of the other's greeter (%v) as %s: %d, want 403 with the refusal: %s", form, me, status, body)
			}
		}
		status, body = ui.get("/functions?namespace=" + other)
		if status != http.StatusForbidden || strings.Contains(body, `data-function="`+other+`/`) {
			t.Errorf("the Functions page of the other's namespace as %s: %d, want 403 listing nothing: %s", me, status, body)
		}
	}
}
