package gateway

import (
	"context"
	"crypto/sha256"
	"fmt"
	"net/http"
	"strings"
	"time"

	authenticationv1 "k8s.io/api/authentication/v1"
	authorizationv1 "k8s.io/api/authorization/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/utils/lru"

	fnv1 "github.com/metalambda/metalambda/internal/apis/metalambda/v1alpha1"
	"github.com/metalambda/metalambda/internal/gateway/dashboard"
	"github.com/metalambda/metalambda/internal/httpapi"
)

// verbInvoke is the RBAC verb on functions.metalambda.dev that test calls and the
// invocation history need: both run code or show what it was given, more than get.
const verbInvoke = "invoke"

// authorizer asks the Kubernetes API who a bearer token belongs to (TokenReview) and
// whether that user may act on Function objects in a namespace (SubjectAccessReview),
// so RBAC decides who may register code.
//
// Answers are kept in two bounded LRU caches keyed by a hash of the token: who a token
// is (for the TTL when the API accepts it, for the negative TTL when it does not) and
// what that token may do where. Failed authentications are rate limited per client
// address, so that random tokens cost neither TokenReviews nor memory without bound.
type authorizer struct {
	kube        kubernetes.Interface
	ttl         time.Duration
	negativeTTL time.Duration
	users       *lru.Cache // [32]byte → cachedUser
	decisions   *lru.Cache // [32]byte → cachedDecision
	failures    *failureLimiter
	now         func() time.Time
}

// authOptions bound the authorizer's caches and its failure limit.
type authOptions struct {
	ttl, negativeTTL time.Duration
	cacheSize        int
	failures         failureLimits
}

type cachedUser struct {
	user    *authenticationv1.UserInfo // nil: the API does not accept the token
	expires time.Time
}

type cachedDecision struct {
	err     *httpapi.Error
	expires time.Time
}

func newAuthorizer(kube kubernetes.Interface, o authOptions) *authorizer {
	return &authorizer{
		kube: kube, ttl: o.ttl, negativeTTL: o.negativeTTL,
		users: lru.New(o.cacheSize), decisions: lru.New(o.cacheSize),
		failures: newFailureLimiter(o.failures, o.cacheSize),
		now:      time.Now,
	}
}

// authorize returns the user when the request's bearer token may do verb on
// functions in namespace, else a 401, 403 or 429.
func (a *authorizer) authorize(ctx context.Context, r *http.Request, verb, namespace string) (*authenticationv1.UserInfo, *httpapi.Error) {
	token, ok := bearer(r)
	user, err := a.identify(ctx, r, token, ok)
	if err != nil {
		return nil, err
	}
	return user, a.allowed(ctx, token, user, verb, namespace)
}

// identify is the user token belongs to, or a 401; present is false when the request
// carried no token. Clients with too many failures get a 429 instead.
func (a *authorizer) identify(ctx context.Context, r *http.Request, token string, present bool) (*authenticationv1.UserInfo, *httpapi.Error) {
	client := clientAddress(r)
	if retry := a.failures.blocked(client); retry > 0 && !a.knownGood(token) {
		return nil, tooManyFailures(retry)
	}
	if !present {
		a.failures.record(client)
		return nil, httpapi.NewError(http.StatusUnauthorized, "unauthorized", "a bearer token is required (Authorization: Bearer <token>), e.g. from `kubectl create token`")
	}
	user, err := a.authenticate(ctx, token)
	if err != nil {
		if err.Status == http.StatusUnauthorized {
			a.failures.record(client)
		}
		return nil, err
	}
	return user, nil
}

// login is the dashboard's check of a pasted token: identify, with the same cache and
// failure limit as the API.
func (a *authorizer) login(r *http.Request, token string) (*authenticationv1.UserInfo, error) {
	user, err := a.identify(r.Context(), r, token, token != "")
	if err != nil {
		return nil, &dashboard.AuthError{Status: err.Status, Message: err.Message}
	}
	return user, nil
}

// knownGood reports whether the API accepted token recently: a client held back for
// its failures may still use a token that works.
func (a *authorizer) knownGood(token string) bool {
	v, ok := a.users.Get(sha256.Sum256([]byte(token)))
	return ok && v.(cachedUser).user != nil && a.now().Before(v.(cachedUser).expires)
}

// authenticate is the user a token belongs to (TokenReview), or a 401.
func (a *authorizer) authenticate(ctx context.Context, token string) (*authenticationv1.UserInfo, *httpapi.Error) {
	key := sha256.Sum256([]byte(token))
	if v, ok := a.users.Get(key); ok && a.now().Before(v.(cachedUser).expires) {
		return userOrUnauthorized(v.(cachedUser).user)
	}
	tr, err := a.kube.AuthenticationV1().TokenReviews().Create(ctx, &authenticationv1.TokenReview{Spec: authenticationv1.TokenReviewSpec{Token: token}}, metav1.CreateOptions{})
	if err != nil {
		return nil, httpapi.NewError(http.StatusInternalServerError, "internal", "token review: "+err.Error())
	}
	entry := cachedUser{expires: a.now().Add(a.negativeTTL)}
	if tr.Status.Authenticated {
		entry = cachedUser{user: &tr.Status.User, expires: a.now().Add(a.ttl)}
	}
	a.users.Add(key, entry)
	return userOrUnauthorized(entry.user)
}

func userOrUnauthorized(u *authenticationv1.UserInfo) (*authenticationv1.UserInfo, *httpapi.Error) {
	if u == nil {
		return nil, httpapi.NewError(http.StatusUnauthorized, "unauthorized", "the Kubernetes API does not accept this token")
	}
	return u, nil
}

// allowed asks whether u may do verb on functions in namespace (SubjectAccessReview).
func (a *authorizer) allowed(ctx context.Context, token string, u *authenticationv1.UserInfo, verb, namespace string) *httpapi.Error {
	attrs := authorizationv1.ResourceAttributes{Namespace: namespace, Verb: verb, Group: fnv1.Group, Resource: fnv1.Resource}
	return a.review(ctx, token, u, attrs, func() string {
		return fmt.Sprintf("user %q may not %s functions.%s in namespace %q", u.Username, verb, fnv1.Group, namespace)
	})
}

// mayGet asks whether the caller of r, as authorized (callerFrom), may get one
// object of a core resource (secrets, configmaps) in namespace; denied says why
// not, for the 403.
func (a *authorizer) mayGet(ctx context.Context, r *http.Request, resource, namespace, name string, denied func(user string) string) *httpapi.Error {
	u := callerFrom(ctx)
	if u == nil {
		return httpapi.NewError(http.StatusInternalServerError, "internal", "no authorized caller to check "+resource+" access for")
	}
	token, _ := bearer(r)
	attrs := authorizationv1.ResourceAttributes{Namespace: namespace, Verb: "get", Resource: resource, Name: name}
	return a.review(ctx, token, u, attrs, func() string { return denied(u.Username) })
}

// mayGetPath returns the user when the request's bearer token may get a path
// that is no resource (SubjectAccessReview with nonResourceAttributes, as a
// Kubernetes component guards its /metrics), else a 401, 403 or 429.
func (a *authorizer) mayGetPath(ctx context.Context, r *http.Request, path string) *httpapi.Error {
	token, ok := bearer(r)
	u, err := a.identify(ctx, r, token, ok)
	if err != nil {
		return err
	}
	spec := authorizationv1.SubjectAccessReviewSpec{NonResourceAttributes: &authorizationv1.NonResourceAttributes{Path: path, Verb: "get"}}
	return a.reviewSpec(ctx, token, u, spec, []string{token, "get", "nonResourceURL", path}, func() string {
		return fmt.Sprintf("user %q may not get %s (grant the ClusterRole metalambda-metrics-reader)", u.Username, path)
	})
}

// review asks whether u may do what attrs say (SubjectAccessReview), remembering
// the answer for the TTL by token and attributes; denied is the 403's message.
func (a *authorizer) review(ctx context.Context, token string, u *authenticationv1.UserInfo, attrs authorizationv1.ResourceAttributes, denied func() string) *httpapi.Error {
	spec := authorizationv1.SubjectAccessReviewSpec{ResourceAttributes: &attrs}
	return a.reviewSpec(ctx, token, u, spec, []string{token, attrs.Verb, attrs.Namespace, attrs.Group, attrs.Resource, attrs.Name}, denied)
}

// reviewSpec asks whether u may do what spec's attributes say, remembering the
// answer for the TTL under key, which names the token and the attributes.
func (a *authorizer) reviewSpec(ctx context.Context, token string, u *authenticationv1.UserInfo, spec authorizationv1.SubjectAccessReviewSpec, key []string, denied func() string) *httpapi.Error {
	cacheKey := sha256.Sum256([]byte(strings.Join(key, "\x00")))
	if v, ok := a.decisions.Get(cacheKey); ok && a.now().Before(v.(cachedDecision).expires) {
		return v.(cachedDecision).err
	}
	extra := map[string]authorizationv1.ExtraValue{}
	for k, v := range u.Extra {
		extra[k] = authorizationv1.ExtraValue(v)
	}
	spec.User, spec.UID, spec.Groups, spec.Extra = u.Username, u.UID, u.Groups, extra
	res, err := a.kube.AuthorizationV1().SubjectAccessReviews().Create(ctx, &authorizationv1.SubjectAccessReview{Spec: spec}, metav1.CreateOptions{})
	if err != nil {
		return httpapi.NewError(http.StatusInternalServerError, "internal", "subject access review: "+err.Error())
	}
	var refused *httpapi.Error
	if !res.Status.Allowed {
		refused = httpapi.NewError(http.StatusForbidden, "forbidden", denied())
	}
	a.decisions.Add(cacheKey, cachedDecision{err: refused, expires: a.now().Add(a.ttl)})
	return refused
}

func bearer(r *http.Request) (string, bool) {
	scheme, token, ok := strings.Cut(r.Header.Get("Authorization"), " ")
	if !ok || !strings.EqualFold(scheme, "Bearer") || strings.TrimSpace(token) == "" {
		return "", false
	}
	return strings.TrimSpace(token), true
}
