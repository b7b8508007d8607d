package gateway

import (
	"errors"
	"net/http"
	"net/http/httptest"
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/util/wait"

	"github.com/metalambda/metalambda/internal/gateway/dashboard"
	"github.com/metalambda/metalambda/internal/httpapi"
	"github.com/metalambda/metalambda/internal/httpapi/httpapitest"
)

// The authorizer's own tests (caches, TTLs, the failed-login limiter) are
// internal/httpapi's; these are the stand-in API and authorizer the gateway's tests
// of its guarded routes share.

const (
	goodToken   = httpapitest.GoodToken
	viewerToken = httpapitest.ViewerToken // user "viewer": what Refused names is refused
)

func newReviewAPI(t *testing.T) *httpapitest.Reviews { return httpapitest.NewReviews(t) }

// newAuthorizer asks api, with the gateway's default TTLs and limits and a short
// retry backoff (a failing API is not waited for 5 tries of real backoff).
func newAuthorizer(t *testing.T, api *httpapitest.Reviews) *httpapi.Auth {
	t.Helper()
	a, err := httpapi.NewAuth(api.Kube, httpapi.AuthOptions{RetryBackoff: &wait.Backoff{Duration: time.Millisecond, Steps: 2}})
	if err != nil {
		t.Fatal(err)
	}
	return a
}

// F6: the dashboard's login passes on the 429's Retry-After of the failure limit.
func TestLoginPassesOnRetryAfter(t *testing.T) {
	g := &Gateway{auth: newAuthorizer(t, newReviewAPI(t))}
	r := httptest.NewRequest(http.MethodPost, "/ui/login", nil)
	var err error
	for range 21 { // the default burst of 20, then one more
		_, err = g.login(r, "bad")
	}
	var ae *dashboard.AuthError
	if !errors.As(err, &ae) || ae.Status != http.StatusTooManyRequests || ae.RetryAfter < 1 {
		t.Errorf("login past the burst: %#v, want a 429 with RetryAfter", err)
	}
}
