package gateway

import (
	"testing"

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

// newAuthorizer asks api, with the gateway's default TTLs and limits.
func newAuthorizer(t *testing.T, api *httpapitest.Reviews) *httpapi.Auth {
	t.Helper()
	a, err := httpapi.NewAuth(api.Kube, httpapi.AuthOptions{})
	if err != nil {
		t.Fatal(err)
	}
	return a
}
