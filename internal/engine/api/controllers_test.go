package api

import (
	"io"
	"net/http"
	"strings"
	"testing"
)

// A controller path is refused before any review when its kind is on the wrong side:
// a namespaced kind on the cluster-scoped paths, a cluster-scoped one under
// /namespaces/, or a name no object can have; the message names the right path.
func TestControllerPathsRefuseTheWrongScope(t *testing.T) {
	api, h := testServer(t, nil, nil)
	for _, c := range []struct{ method, path, want string }{
		{http.MethodGet, "/api/v1/controllers/ncc/greeter", "/api/v1/namespaces/NAMESPACE/controllers/NamespacedCompositeController/NAME"},
		{http.MethodGet, "/api/v1/parents/ndc/greeter/ns/p", "is namespaced"},
		{http.MethodPost, "/api/v1/controllers/NamespacedCompositeController/greeter/sync", "is namespaced"},
		{http.MethodGet, "/api/v1/namespaces/team-a/controllers/cc/web", "/api/v1/controllers/CompositeController/NAME"},
		{http.MethodPost, "/api/v1/namespaces/team-a/controllers/dec/web/sync", "is cluster-scoped"},
		{http.MethodGet, "/api/v1/namespaces/Team_A/controllers", "Team_A"},
		{http.MethodGet, "/api/v1/namespaces/team-a/controllers/job/web", "the controller kind must be"},
		{http.MethodGet, "/api/v1/controllers?namespace=a.b", "a.b"},
	} {
		var w interface {
			Result() *http.Response
		}
		if c.method == http.MethodGet {
			w = get(h, c.path)
		} else {
			w = post(h, c.path, `{"all": true}`)
		}
		resp := w.Result()
		body := new(strings.Builder)
		_, _ = io.Copy(body, resp.Body)
		if resp.StatusCode != http.StatusBadRequest || !strings.Contains(body.String(), c.want) {
			t.Errorf("%s %s: %d %s, want 400 naming %q", c.method, c.path, resp.StatusCode, body, c.want)
		}
	}
	if n := api.AccessReviews.Load(); n != 0 {
		t.Errorf("%d reviews asked for requests refused by their path", n)
	}
}
