package gateway

import (
	"context"
	"fmt"
	"net/http"

	authenticationv1 "k8s.io/api/authentication/v1"

	fnv1 "github.com/metalambda/metalambda/internal/apis/metalambda/v1alpha1"
	"github.com/metalambda/metalambda/internal/gateway/dashboard"
	"github.com/metalambda/metalambda/internal/httpapi"
)

// verbInvoke is the RBAC verb on functions.metalambda.dev that test calls and the
// invocation history need: both run code or show what it was given, more than get.
const verbInvoke = "invoke"

// Who may register and call code is RBAC's decision: g.auth (httpapi.Auth) asks the
// Kubernetes API who a bearer token belongs to and what that user may do.

// functionAccess is what a management request needs: verb on the functions of
// namespace.
func functionAccess(verb, namespace string) httpapi.Access {
	return httpapi.Access{Verb: verb, Group: fnv1.Group, Resource: fnv1.Resource, Namespace: namespace}
}

// mayGet asks whether the caller of ctx, as authorized (httpapi.CallerFrom), may get
// one object of a core resource (secrets, configmaps) in namespace; denied says why
// not, for the 403.
func (g *Gateway) mayGet(ctx context.Context, resource, namespace, name string, denied func(user string) string) *httpapi.Error {
	c := httpapi.CallerFrom(ctx)
	if c == nil {
		return httpapi.NewError(http.StatusInternalServerError, "internal", "no authorized caller to check "+resource+" access for")
	}
	return g.auth.Authorize(ctx, c, httpapi.Access{Verb: "get", Resource: resource, Namespace: namespace, Name: name, Denied: denied})
}

// pathAccess is what a get of a path that is no resource needs (nonResourceURLs, as
// for a Kubernetes component's /metrics; the ClusterRole metalambda-metrics-reader
// grants it for /metrics).
func pathAccess(path string) httpapi.Access {
	return httpapi.Access{Verb: "get", Path: path, Denied: func(user string) string {
		return fmt.Sprintf("user %q may not get %s (grant the ClusterRole metalambda-metrics-reader)", user, path)
	}}
}

// login is the dashboard's check of a pasted token: the API's authentication, with
// the same cache and failure limit (and its 429's Retry-After).
func (g *Gateway) login(r *http.Request, token string) (*authenticationv1.UserInfo, error) {
	u, err := g.auth.Login(r, token)
	if err != nil {
		return nil, &dashboard.AuthError{Status: err.Status, Message: err.Message, RetryAfter: err.RetryAfter}
	}
	return u, nil
}
