package gateway

import (
	"context"
	"crypto/sha256"
	"fmt"
	"net/http"
	"strings"
	"sync"
	"time"

	authenticationv1 "k8s.io/api/authentication/v1"
	authorizationv1 "k8s.io/api/authorization/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"

	fnv1 "github.com/metalambda/metalambda/internal/apis/metalambda/v1alpha1"
)

// authorizer asks the Kubernetes API who a bearer token belongs to (TokenReview) and
// whether that user may act on Function objects in a namespace (SubjectAccessReview),
// so RBAC decides who may register code. Answers are cached briefly.
type authorizer struct {
	kube kubernetes.Interface
	ttl  time.Duration

	mu    sync.Mutex
	cache map[[32]byte]cachedDecision
}

type cachedDecision struct {
	err     *apiError
	expires time.Time
}

func newAuthorizer(kube kubernetes.Interface, ttl time.Duration) *authorizer {
	return &authorizer{kube: kube, ttl: ttl, cache: map[[32]byte]cachedDecision{}}
}

// authorize returns nil when the request's bearer token may do verb on functions in
// namespace, else a 401 or 403.
func (a *authorizer) authorize(ctx context.Context, r *http.Request, verb, namespace string) *apiError {
	token, ok := bearer(r)
	if !ok {
		return errorf(http.StatusUnauthorized, "unauthorized", "a bearer token is required (Authorization: Bearer <token>), e.g. from `kubectl create token`")
	}
	key := sha256.Sum256([]byte(token + "\x00" + verb + "\x00" + namespace))
	a.mu.Lock()
	if d, ok := a.cache[key]; ok && time.Now().Before(d.expires) {
		a.mu.Unlock()
		return d.err
	}
	a.mu.Unlock()
	err := a.review(ctx, token, verb, namespace)
	if err == nil || err.Status != http.StatusInternalServerError {
		a.mu.Lock()
		a.cache[key] = cachedDecision{err: err, expires: time.Now().Add(a.ttl)}
		a.mu.Unlock()
	}
	return err
}

func (a *authorizer) review(ctx context.Context, token, verb, namespace string) *apiError {
	tr, err := a.kube.AuthenticationV1().TokenReviews().Create(ctx, &authenticationv1.TokenReview{Spec: authenticationv1.TokenReviewSpec{Token: token}}, metav1.CreateOptions{})
	if err != nil {
		return errorf(http.StatusInternalServerError, "internal", "token review: "+err.Error())
	}
	if !tr.Status.Authenticated {
		return errorf(http.StatusUnauthorized, "unauthorized", "the Kubernetes API does not accept this token")
	}
	u := tr.Status.User
	extra := map[string]authorizationv1.ExtraValue{}
	for k, v := range u.Extra {
		extra[k] = authorizationv1.ExtraValue(v)
	}
	sar := &authorizationv1.SubjectAccessReview{Spec: authorizationv1.SubjectAccessReviewSpec{
		User: u.Username, UID: u.UID, Groups: u.Groups, Extra: extra,
		ResourceAttributes: &authorizationv1.ResourceAttributes{Namespace: namespace, Verb: verb, Group: fnv1.Group, Resource: fnv1.Resource},
	}}
	res, err := a.kube.AuthorizationV1().SubjectAccessReviews().Create(ctx, sar, metav1.CreateOptions{})
	if err != nil {
		return errorf(http.StatusInternalServerError, "internal", "subject access review: "+err.Error())
	}
	if !res.Status.Allowed {
		return errorf(http.StatusForbidden, "forbidden", fmt.Sprintf("user %q may not %s functions.%s in namespace %q", u.Username, verb, fnv1.Group, namespace))
	}
	return nil
}

func bearer(r *http.Request) (string, bool) {
	scheme, token, ok := strings.Cut(r.Header.Get("Authorization"), " ")
	if !ok || !strings.EqualFold(scheme, "Bearer") || strings.TrimSpace(token) == "" {
		return "", false
	}
	return strings.TrimSpace(token), true
}
