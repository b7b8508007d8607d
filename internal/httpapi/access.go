package httpapi

import (
	"context"
	"crypto/sha256"
	"fmt"
	"net/http"
	"strings"

	authorizationv1 "k8s.io/api/authorization/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/validation"
)

// Access is what a request needs, as a SubjectAccessReview asks it: a verb on a
// resource (Group, Resource, Subresource, Namespace, Name), or, with no Resource, a
// verb on a path that is no resource (as a Kubernetes component guards its /metrics).
type Access struct {
	Verb                                          string
	Group, Resource, Subresource, Namespace, Name string
	Path                                          string
	// Denied is the message of the 403, given the user's name; nil says
	// `user "u" may not <verb> <what Access names>`.
	Denied func(user string) string
}

// String names what a is about: "functions.metalambda.dev f in namespace "ns"", or
// the path.
func (a Access) String() string {
	if a.Resource == "" {
		return a.Path
	}
	what := a.Resource
	if a.Group != "" {
		what += "." + a.Group
	}
	if a.Subresource != "" {
		what += "/" + a.Subresource
	}
	if a.Name != "" {
		what += fmt.Sprintf(" %q", a.Name)
	}
	if a.Namespace != "" {
		what += fmt.Sprintf(" in namespace %q", a.Namespace)
	}
	return what
}

func (a Access) denied(user string) string {
	if a.Denied != nil {
		return a.Denied(user)
	}
	return fmt.Sprintf("user %q may not %s %s", user, a.Verb, a)
}

// review is the SubjectAccessReview that asks whether c may do what a says.
func (a Access) review(c *Caller) *authorizationv1.SubjectAccessReview {
	extra := map[string]authorizationv1.ExtraValue{}
	for k, v := range c.User.Extra {
		extra[k] = authorizationv1.ExtraValue(v)
	}
	spec := authorizationv1.SubjectAccessReviewSpec{User: c.User.Username, UID: c.User.UID, Groups: c.User.Groups, Extra: extra}
	if a.Resource == "" {
		spec.NonResourceAttributes = &authorizationv1.NonResourceAttributes{Verb: a.Verb, Path: a.Path}
	} else {
		spec.ResourceAttributes = &authorizationv1.ResourceAttributes{
			Verb: a.Verb, Group: a.Group, Resource: a.Resource, Subresource: a.Subresource, Namespace: a.Namespace, Name: a.Name,
		}
	}
	return &authorizationv1.SubjectAccessReview{Spec: spec}
}

// Authorize answers nil when c may do what x says (SubjectAccessReview), else a 403
// with x's message, a 429 when the user's reviews beyond the cache are spent, or a
// 502 or 503 when the API did not answer or was not asked. Answers are reused for the
// TTL, by token and access.
func (a *Auth) Authorize(ctx context.Context, c *Caller, x Access) *Error {
	allowed, err := a.allowed(ctx, c, x)
	if err != nil {
		return err
	}
	if !allowed {
		return NewError(http.StatusForbidden, "forbidden", x.denied(c.User.Username))
	}
	return nil
}

func (a *Auth) allowed(ctx context.Context, c *Caller, x Access) (bool, *Error) {
	key := sha256.Sum256([]byte(strings.Join([]string{c.Token, x.Verb, x.Group, x.Resource, x.Subresource, x.Namespace, x.Name, x.Path}, "\x00")))
	if v, ok := a.decisions.Get(key); ok && a.now().Before(v.(cachedDecision).expires) {
		return v.(cachedDecision).allowed, nil
	}
	if _, wait := take(a.accessReviews.limiter(c.User.Username+"\x00"+c.User.UID), a.now()); wait > 0 {
		e := NewError(http.StatusTooManyRequests, "too_many_reviews", fmt.Sprintf("user %q asked too many access reviews; retry after %ds", c.User.Username, retryAfterSeconds(wait)))
		e.RetryAfter = retryAfterSeconds(wait)
		return false, e
	}
	v, err := a.gate.do(ctx, a.now, "access\x00"+string(key[:]), "subject access review", func(ctx context.Context) (any, error) {
		var res *authorizationv1.SubjectAccessReview
		err := a.retry(ctx, func(ctx context.Context) (err error) {
			res, err = a.kube.AuthorizationV1().SubjectAccessReviews().Create(ctx, x.review(c), metav1.CreateOptions{})
			return err
		})
		if err != nil {
			return false, err
		}
		a.decisions.Add(key, cachedDecision{allowed: res.Status.Allowed, expires: a.now().Add(a.ttl)})
		return res.Status.Allowed, nil
	})
	if err != nil {
		return false, err
	}
	return v.(bool), nil
}

// Require is middleware in chi's shape: it lets through a request whose bearer
// token the API accepts and whose user may do what access(r) says, with its Caller in
// the context (CallerFrom); others get 400 (a namespace or name that no object can
// have, before any review), 401, 403, 429, 502 or 503 in the error shape.
func (a *Auth) Require(access func(r *http.Request) Access) func(http.Handler) http.Handler {
	return func(next http.Handler) http.Handler {
		return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			c, err := a.Check(r, access(r))
			if err != nil {
				WriteError(w, err)
				return
			}
			next.ServeHTTP(w, r.WithContext(WithCaller(r.Context(), c)))
		})
	}
}

// Check is Require's test of one request: its caller, or why it may not. x's
// Namespace and Name come from the request, and are checked first (CheckNames).
func (a *Auth) Check(r *http.Request, x Access) (*Caller, *Error) {
	if err := CheckNames(x.Namespace, x.Name); err != nil {
		return nil, err
	}
	c, err := a.Authenticate(r)
	if err != nil {
		return nil, err
	}
	if err := a.Authorize(r.Context(), c, x); err != nil {
		return nil, err
	}
	return c, nil
}

// CheckNames answers a 400 when namespace is not a DNS-1123 label or name not a
// DNS-1123 subdomain (either may be empty): names from a request's path, checked
// before any review, so that no request can have the API review names no object
// can have.
func CheckNames(namespace, name string) *Error {
	if namespace != "" {
		if errs := validation.IsDNS1123Label(namespace); len(errs) > 0 {
			return NewError(http.StatusBadRequest, "bad_request", fmt.Sprintf("namespace %q: %s", namespace, strings.Join(errs, "; ")))
		}
	}
	if name != "" {
		if errs := validation.IsDNS1123Subdomain(name); len(errs) > 0 {
			return NewError(http.StatusBadRequest, "bad_request", fmt.Sprintf("name %q: %s", name, strings.Join(errs, "; ")))
		}
	}
	return nil
}
