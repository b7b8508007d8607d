package api

import (
	"context"
	"errors"
	"net/http"
	"net/url"
	"testing"
	"time"

	authorizationv1 "k8s.io/api/authorization/v1"
	"k8s.io/apimachinery/pkg/util/wait"

	"github.com/metalambda/metalambda/internal/httpapi"
	"github.com/metalambda/metalambda/internal/httpapi/httpapitest"
)

// reviews is the stand-in API of the tests: it accepts httpapitest.GoodToken (user
// "dev") and allows the accesses in allowed, counting the reviews.
func reviews(t *testing.T, allowed map[access]bool) (*httpapitest.Reviews, *apiAuth) {
	t.Helper()
	api := httpapitest.NewReviews(t)
	api.Allow = func(sar *authorizationv1.SubjectAccessReview) bool {
		ra := sar.Spec.ResourceAttributes
		if ra == nil || sar.Spec.User != "dev" {
			return false
		}
		verb := ra.Verb
		if verb == "get" {
			verb = ""
		}
		return allowed[access{verb: verb, group: ra.Group, resource: ra.Resource, namespace: ra.Namespace, name: ra.Name}]
	}
	// A short retry backoff: a failing API is not waited for 5 tries of real backoff.
	a, err := newAPIAuth(api.Kube, httpapi.AuthOptions{RetryBackoff: &wait.Backoff{Duration: time.Millisecond, Steps: 2}})
	if err != nil {
		t.Fatal(err)
	}
	return api, a
}

func requestWith(authorization string) *http.Request {
	r := &http.Request{Header: http.Header{}, URL: &url.URL{Path: "/api/v1/controllers"}, RemoteAddr: "10.0.0.1:1"}
	if authorization != "" {
		r.Header.Set("Authorization", authorization)
	}
	return r
}

// The API authenticates bearer tokens and reuses the answers within the TTL (the
// kit's TTL and caches are tested in package httpapi).
func TestAPIAuthenticatesBearerTokens(t *testing.T) {
	api, a := reviews(t, nil)
	for _, h := range []string{"", "Basic Zm9vOmJhcg==", "Bearer ", "Bearer bad"} {
		_, err := a.authenticate(requestWith(h))
		var e *httpapi.Error
		if !errors.As(err, &e) || e.Status != http.StatusUnauthorized {
			t.Errorf("Authorization %q: %v, want a 401", h, err)
		}
	}
	c, err := a.authenticate(requestWith("bearer " + httpapitest.GoodToken))
	if err != nil || c.User.Username != "dev" {
		t.Fatalf("good token: %v, %v", c, err)
	}
	before := api.TokenReviews.Load()
	if _, err := a.authenticate(requestWith("Bearer bad")); err == nil {
		t.Error("the bad token was accepted the second time")
	}
	if _, err := a.authenticate(requestWith("Bearer " + httpapitest.GoodToken)); err != nil {
		t.Error(err)
	}
	if n := api.TokenReviews.Load() - before; n != 0 {
		t.Errorf("%d more token reviews within the TTL, want the answers reused", n)
	}
}

func TestAPIAccessByNameOrNamespace(t *testing.T) {
	web := controllerAccess(CompositeKind, "", "web")
	apps := access{group: "example.com", resource: "apps", namespace: "team-a"}
	named := access{group: "example.com", resource: "apps", namespace: "team-b", name: "one"}
	api, a := reviews(t, map[access]bool{web: true, apps: true, named: true})
	ctx := context.Background()
	c, err := a.authenticate(requestWith("Bearer " + httpapitest.GoodToken))
	if err != nil {
		t.Fatal(err)
	}
	for _, tt := range []struct {
		x    access
		want bool
	}{
		{web, true},
		{controllerAccess(CompositeKind, "", "other"), false},
		{controllerAccess(DecoratorKind, "", "web"), false},
		{access{group: "example.com", resource: "apps", namespace: "team-a", name: "any"}, true}, // namespace-wide
		{named, true},
		{access{group: "example.com", resource: "apps", namespace: "team-b", name: "two"}, false},
		{access{group: "example.com", resource: "apps", namespace: "team-c", name: "one"}, false},
	} {
		got, err := c.may(ctx, tt.x)
		if err != nil || got != tt.want {
			t.Errorf("may get %s = %v, %v; want %v", tt.x, got, err, tt.want)
		}
	}
	before := api.AccessReviews.Load()
	if ok, _ := c.may(ctx, named); !ok || api.AccessReviews.Load() != before {
		t.Errorf("asking again made %d reviews, want the answers reused", api.AccessReviews.Load()-before)
	}
	if err := c.forbidden(named); err == nil || err.Error() != `user "dev" may not get apps.example.com one in namespace team-b` {
		t.Errorf("forbidden: %v", err)
	}
}

// An API server that does not answer the reviews is a 502, not a refusal.
func TestAPIAuthWhenKubernetesFails(t *testing.T) {
	api, a := reviews(t, nil)
	api.Failing.Store(true)
	_, err := a.authenticate(requestWith("Bearer " + httpapitest.GoodToken))
	var e *httpapi.Error
	if !errors.As(err, &e) || e.Status != http.StatusBadGateway {
		t.Errorf("authenticate with the API failing: %v, want a 502", err)
	}
}

func TestHookCallQuery(t *testing.T) {
	parse := func(q string) (hookCallQuery, error) {
		return parseHookCallQuery(&http.Request{URL: &url.URL{RawQuery: q}})
	}
	for _, bad := range []string{"controller=web", "controller=Deployment/web", "controller=CompositeController/", "since=-1", "limit=0", "limit=1001", "limit=x"} {
		if _, err := parse(bad); err == nil {
			t.Errorf("%s: no error", bad)
		}
	}
	q, err := parse("controller=compositecontrollers/web&namespace=ns&parent=a&since=2&limit=5")
	if err != nil {
		t.Fatal(err)
	}
	if q.kind != CompositeKind || q.name != "web" || q.since != 2 || q.limit != 5 {
		t.Errorf("query %+v", q)
	}
	for _, tt := range []struct {
		call hookCallOpt
		want bool
	}{
		{func(*recordedCall) {}, true},
		{func(c *recordedCall) { c.call.Info.Controller = "other" }, false},
		{func(c *recordedCall) { c.call.Info.ControllerType = DecoratorKind }, false},
		{func(c *recordedCall) { c.call.Info.Parent.Namespace = "other" }, false},
		{func(c *recordedCall) { c.call.Info.Parent.Name = "b" }, false},
	} {
		rc := recordedCall{call: hookCall("a")}
		tt.call(&rc)
		if got := q.matches(&rc); got != tt.want {
			t.Errorf("%+v matches = %v, want %v", rc.call.Info, got, tt.want)
		}
	}
}

type hookCallOpt func(*recordedCall)
