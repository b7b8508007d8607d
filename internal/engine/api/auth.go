package api

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
)

// Defaults of the API's authorizer.
const (
	// apiAuthTTL is how long an answer of TokenReview or SubjectAccessReview is reused:
	// short, so that a revoked token or role stops working within seconds.
	apiAuthTTL = 10 * time.Second
	// apiAuthCacheSize bounds each cache of answers.
	apiAuthCacheSize = 4096
)

// apiAuth asks the Kubernetes API who a bearer token belongs to (TokenReview) and
// what that user may get (SubjectAccessReview), keeping answers for a short TTL in
// bounded LRU caches keyed by a hash of the token.
type apiAuth struct {
	kube      kubernetes.Interface
	ttl       time.Duration
	users     *lru.Cache // [32]byte -> cachedAPIUser
	decisions *lru.Cache // [32]byte -> cachedAPIDecision
	now       func() time.Time
}

type cachedAPIUser struct {
	user    *authenticationv1.UserInfo // nil: the token is not accepted
	expires time.Time
}

type cachedAPIDecision struct {
	allowed bool
	expires time.Time
}

func newAPIAuth(kube kubernetes.Interface) *apiAuth {
	return &apiAuth{kube: kube, ttl: apiAuthTTL, users: lru.New(apiAuthCacheSize), decisions: lru.New(apiAuthCacheSize), now: time.Now}
}

// caller is an authenticated user of one request; may answers what it may get.
type caller struct {
	auth  *apiAuth
	token string
	user  *authenticationv1.UserInfo
}

// authenticate returns the caller of r, or a 401 without a token or with one the
// Kubernetes API does not accept.
func (a *apiAuth) authenticate(ctx context.Context, r *http.Request) (*caller, error) {
	token, ok := bearerToken(r)
	if !ok {
		return nil, apiErrorf(http.StatusUnauthorized, "unauthorized", "a bearer token is required (Authorization: Bearer <token>), e.g. from `kubectl create token`")
	}
	key := sha256.Sum256([]byte(token))
	if v, ok := a.users.Get(key); ok && a.now().Before(v.(cachedAPIUser).expires) {
		return a.callerOf(token, v.(cachedAPIUser).user)
	}
	tr, err := a.kube.AuthenticationV1().TokenReviews().Create(ctx, &authenticationv1.TokenReview{Spec: authenticationv1.TokenReviewSpec{Token: token}}, metav1.CreateOptions{})
	if err != nil {
		return nil, apiErrorf(http.StatusBadGateway, "kubernetes_unavailable", "token review: "+err.Error())
	}
	entry := cachedAPIUser{expires: a.now().Add(a.ttl)}
	if tr.Status.Authenticated {
		entry.user = &tr.Status.User
	}
	a.users.Add(key, entry)
	return a.callerOf(token, entry.user)
}

func (a *apiAuth) callerOf(token string, u *authenticationv1.UserInfo) (*caller, error) {
	if u == nil {
		return nil, apiErrorf(http.StatusUnauthorized, "unauthorized", "the Kubernetes API does not accept this token")
	}
	return &caller{auth: a, token: token, user: u}, nil
}

// access is what one SubjectAccessReview asks: may the caller get this object (or,
// with an empty name, every object of the resource in the namespace)?
type access struct {
	group, resource, namespace, name string
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

// may reports whether the caller may get x: it may when it may get every object of
// the resource in the namespace, else when it may get the object by name.
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

// allowed asks one SubjectAccessReview for the verb get, or reuses its answer.
func (c *caller) allowed(ctx context.Context, x access) (bool, error) {
	key := sha256.Sum256([]byte(strings.Join([]string{c.token, x.group, x.resource, x.namespace, x.name}, "\x00")))
	a := c.auth
	if v, ok := a.decisions.Get(key); ok && a.now().Before(v.(cachedAPIDecision).expires) {
		return v.(cachedAPIDecision).allowed, nil
	}
	extra := map[string]authorizationv1.ExtraValue{}
	for k, v := range c.user.Extra {
		extra[k] = authorizationv1.ExtraValue(v)
	}
	sar := &authorizationv1.SubjectAccessReview{Spec: authorizationv1.SubjectAccessReviewSpec{
		User: c.user.Username, UID: c.user.UID, Groups: c.user.Groups, Extra: extra,
		ResourceAttributes: &authorizationv1.ResourceAttributes{Verb: "get", Group: x.group, Resource: x.resource, Namespace: x.namespace, Name: x.name},
	}}
	res, err := a.kube.AuthorizationV1().SubjectAccessReviews().Create(ctx, sar, metav1.CreateOptions{})
	if err != nil {
		return false, apiErrorf(http.StatusBadGateway, "kubernetes_unavailable", "subject access review: "+err.Error())
	}
	a.decisions.Add(key, cachedAPIDecision{allowed: res.Status.Allowed, expires: a.now().Add(a.ttl)})
	return res.Status.Allowed, nil
}

// forbidden is the 403 of a caller that may not get x.
func (c *caller) forbidden(x access) error {
	return apiErrorf(http.StatusForbidden, "forbidden", fmt.Sprintf("user %q may not get %s", c.user.Username, x))
}

func bearerToken(r *http.Request) (string, bool) {
	scheme, token, ok := strings.Cut(r.Header.Get("Authorization"), " ")
	token = strings.TrimSpace(token)
	if !ok || !strings.EqualFold(scheme, "Bearer") || token == "" {
		return "", false
	}
	return token, true
}
