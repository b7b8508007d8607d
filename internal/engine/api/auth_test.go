package api

import (
	"context"
	"errors"
	"net/http"
	"net/url"
	"testing"
	"time"

	authenticationv1 "k8s.io/api/authentication/v1"
	authorizationv1 "k8s.io/api/authorization/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/kubernetes/fake"
	k8stesting "k8s.io/client-go/testing"
)

// fakeReviews answers TokenReviews for the token "good" (user alice) and
// SubjectAccessReviews from allowed, counting the reviews.
type fakeReviews struct {
	allowed            map[access]bool
	tokenReviews, sars int
}

func (f *fakeReviews) client() *fake.Clientset {
	kube := fake.NewClientset()
	kube.PrependReactor("create", "tokenreviews", func(a k8stesting.Action) (bool, runtime.Object, error) {
		f.tokenReviews++
		tr := a.(k8stesting.CreateAction).GetObject().(*authenticationv1.TokenReview)
		if tr.Spec.Token == "good" {
			tr.Status = authenticationv1.TokenReviewStatus{Authenticated: true, User: authenticationv1.UserInfo{Username: "alice", Groups: []string{"devs"}}}
		}
		return true, tr, nil
	})
	kube.PrependReactor("create", "subjectaccessreviews", func(a k8stesting.Action) (bool, runtime.Object, error) {
		f.sars++
		sar := a.(k8stesting.CreateAction).GetObject().(*authorizationv1.SubjectAccessReview)
		ra := sar.Spec.ResourceAttributes
		if sar.Spec.User != "alice" || ra.Verb != "get" {
			return true, nil, errors.New("unexpected review")
		}
		sar.Status.Allowed = f.allowed[access{group: ra.Group, resource: ra.Resource, namespace: ra.Namespace, name: ra.Name}]
		return true, sar, nil
	})
	return kube
}

func requestWith(authorization string) *http.Request {
	r := &http.Request{Header: http.Header{}, URL: &url.URL{Path: "/api/v1/controllers"}}
	if authorization != "" {
		r.Header.Set("Authorization", authorization)
	}
	return r
}

func TestAPIAuthenticatesBearerTokens(t *testing.T) {
	f := &fakeReviews{}
	a := newAPIAuth(f.client())
	ctx := context.Background()
	for _, h := range []string{"", "Basic Zm9vOmJhcg==", "Bearer ", "Bearer bad"} {
		_, err := a.authenticate(ctx, requestWith(h))
		var e *apiError
		if !errors.As(err, &e) || e.status != http.StatusUnauthorized {
			t.Errorf("Authorization %q: %v, want a 401", h, err)
		}
	}
	c, err := a.authenticate(ctx, requestWith("bearer good"))
	if err != nil || c.user.Username != "alice" {
		t.Fatalf("good token: %v, %v", c, err)
	}
	before := f.tokenReviews
	if _, err := a.authenticate(ctx, requestWith("Bearer bad")); err == nil {
		t.Error("the bad token was accepted the second time")
	}
	if _, err := a.authenticate(ctx, requestWith("Bearer good")); err != nil {
		t.Error(err)
	}
	if f.tokenReviews != before {
		t.Errorf("%d more token reviews within the TTL, want the answers reused", f.tokenReviews-before)
	}
	a.now = func() time.Time { return time.Now().Add(apiAuthTTL + time.Second) }
	if _, err := a.authenticate(ctx, requestWith("Bearer good")); err != nil || f.tokenReviews != before+1 {
		t.Errorf("after the TTL: %v, %d token reviews, want one more", err, f.tokenReviews-before)
	}
}

func TestAPIAccessByNameOrNamespace(t *testing.T) {
	web := controllerAccess(CompositeKind, "web")
	apps := access{group: "example.com", resource: "apps", namespace: "team-a"}
	named := access{group: "example.com", resource: "apps", namespace: "team-b", name: "one"}
	f := &fakeReviews{allowed: map[access]bool{web: true, apps: true, named: true}}
	a := newAPIAuth(f.client())
	ctx := context.Background()
	c, err := a.authenticate(ctx, requestWith("Bearer good"))
	if err != nil {
		t.Fatal(err)
	}
	for _, tt := range []struct {
		x    access
		want bool
	}{
		{web, true},
		{controllerAccess(CompositeKind, "other"), false},
		{controllerAccess(DecoratorKind, "web"), false},
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
	before := f.sars
	if ok, _ := c.may(ctx, named); !ok || f.sars != before {
		t.Errorf("asking again made %d reviews, want the answers reused", f.sars-before)
	}
	if err := c.forbidden(named); err == nil || err.Error() != `user "alice" may not get apps.example.com one in namespace team-b` {
		t.Errorf("forbidden: %v", err)
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
