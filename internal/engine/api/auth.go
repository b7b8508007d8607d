package api

import (
	"context"
	"fmt"
	"net/http"

	"k8s.io/client-go/kubernetes"

	"github.com/metalambda/metalambda/internal/httpapi"
)

// apiAuth is the API's use of the shared authentication kit (package httpapi):
// TokenReview for who a bearer token belongs to, SubjectAccessReview for what that
// user may get, both cached for a short TTL in bounded caches, failed logins limited
// per client address.
type apiAuth struct {
	kit *httpapi.Auth
}

// newAPIAuth asks kube with the kit's options o (the API's are the defaults; tests
// pass a short retry backoff).
func newAPIAuth(kube kubernetes.Interface, o httpapi.AuthOptions) (*apiAuth, error) {
	kit, err := httpapi.NewAuth(kube, o)
	if err != nil {
		return nil, err
	}
	return &apiAuth{kit: kit}, nil
}

// maxChecksPerRequest bounds the objects one request asks about (SubjectAccessReviews
// or cached answers): past it, the objects a list would show are left out, so that no
// single request (a hook call list over many parents, a parent with many children)
// has the API review without bound.
const maxChecksPerRequest = 256

// caller is an authenticated user of one request; may answers what it may get,
// remembering each answer for the rest of the request.
type caller struct {
	kit *httpapi.Auth
	*httpapi.Caller
	seen map[access]bool
}

// authenticate returns the caller of r, or a 401 without a token or with one the
// Kubernetes API does not accept (429 after too many, 502 or 503 when the API does
// not answer or was not asked).
func (a *apiAuth) authenticate(r *http.Request) (*caller, error) {
	c, err := a.kit.Authenticate(r)
	if err != nil {
		return nil, err
	}
	return &caller{kit: a.kit, Caller: c, seen: map[access]bool{}}, nil
}

// access is what one SubjectAccessReview asks: may the caller get (or verb, when
// set) this object (or, with an empty name, every object of the resource in the
// namespace)?
type access struct {
	verb                             string // "" is get
	group, resource, namespace, name string
}

func (x access) verbOrGet() string {
	if x.verb == "" {
		return "get"
	}
	return x.verb
}

func (x access) String() string {
	what := x.resource
	if x.group != "" {
		what += "." + x.group
	}
	if x.name != "" {
		what += " " + x.name
	}
	if x.namespace != "" {
		what += " in namespace " + x.namespace
	}
	return what
}

// may reports whether the caller may get (or x.verb) x: it may when it may do so on
// every object of the resource in the namespace, else when it may on the object by
// name.
func (c *caller) may(ctx context.Context, x access) (bool, error) {
	if x.name != "" {
		all := x
		all.name = ""
		if ok, err := c.allowed(ctx, all); ok || err != nil {
			return ok, err
		}
	}
	return c.allowed(ctx, x)
}

// allowed asks one SubjectAccessReview for x's verb, or reuses its answer; false past
// maxChecksPerRequest objects.
func (c *caller) allowed(ctx context.Context, x access) (bool, error) {
	if ok, asked := c.seen[x]; asked {
		return ok, nil
	}
	if len(c.seen) >= maxChecksPerRequest {
		return false, nil
	}
	err := c.kit.Authorize(ctx, c.Caller, httpapi.Access{Verb: x.verbOrGet(), Group: x.group, Resource: x.resource, Namespace: x.namespace, Name: x.name})
	switch {
	case err == nil:
		c.seen[x] = true
		return true, nil
	case err.Status == http.StatusForbidden:
		c.seen[x] = false
		return false, nil
	default:
		return false, err
	}
}

// forbidden is the 403 of a caller that may not get (or x.verb) x.
func (c *caller) forbidden(x access) error {
	return httpapi.NewError(http.StatusForbidden, "forbidden", fmt.Sprintf("user %q may not %s %s", c.User.Username, x.verbOrGet(), x))
}
