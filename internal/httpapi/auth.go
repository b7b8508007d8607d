package httpapi

import (
	"context"
	"crypto/sha256"
	"errors"
	"net/http"
	"strings"
	"time"

	authenticationv1 "k8s.io/api/authentication/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/kubernetes"
	"k8s.io/utils/lru"
)

// AuthOptions configure an Auth; zero fields take the defaults.
type AuthOptions struct {
	// TTL is how long an accepted token and an authorization answer are reused:
	// short, so that a revoked token or role stops working within seconds. Default 10s.
	TTL time.Duration
	// NegativeTTL is how long a token the Kubernetes API refused is remembered: shorter
	// than TTL, so that a token just created works at once. Default 2s.
	NegativeTTL time.Duration
	// CacheSize bounds each cache (tokens, decisions, clients with failures), least
	// recently used first out. Default 4096.
	CacheSize int
	// Failures bound failed authentications per client address; more answer 429 with
	// Retry-After. Default a burst of 20, then 1 per second.
	Failures FailureLimits
	// ReviewTimeout bounds one TokenReview. Default 10s.
	ReviewTimeout time.Duration
	// RetryBackoff is how a TokenReview or SubjectAccessReview the API failed is
	// retried. Default k8s.io/apiserver's: 500ms, ×1.5, 5 tries.
	RetryBackoff *wait.Backoff
}

func (o *AuthOptions) setDefaults() {
	if o.TTL <= 0 {
		o.TTL = 10 * time.Second
	}
	if o.NegativeTTL <= 0 {
		o.NegativeTTL = 2 * time.Second
	}
	if o.CacheSize <= 0 {
		o.CacheSize = 4096
	}
	if o.Failures.Burst <= 0 {
		o.Failures.Burst = 20
	}
	if o.Failures.Rate <= 0 {
		o.Failures.Rate = 1
	}
	if o.ReviewTimeout <= 0 {
		o.ReviewTimeout = 10 * time.Second
	}
	if o.RetryBackoff == nil {
		// k8s.io/apiserver/pkg/server/options.DefaultAuthWebhookRetryBackoff, which
		// that package would bring the whole server along to import.
		o.RetryBackoff = &wait.Backoff{Duration: 500 * time.Millisecond, Factor: 1.5, Jitter: 0.2, Steps: 5}
	}
}

// Auth authenticates a request's bearer token through the Kubernetes API
// (TokenReview) and authorizes what it asks (SubjectAccessReview), so that RBAC
// decides who may use an API. It asks as k8s.io/apiserver's delegating authenticator
// and authorizer ask (what a Kubernetes component or controller-runtime's metrics
// filter uses): the same reviews, a timeout, and the same retries with backoff. It
// does not import them: their webhook packages bring gRPC, CEL and OpenTelemetry
// along, which cost the engine 41 MB of binary and each process 19 MB of resident
// memory at start, for two API calls and a retry loop.
//
// The answers are kept in two bounded LRU caches keyed by a hash of the token (the
// apiserver's token cache grows with every distinct token until its TTL, so random
// tokens from many addresses would cost memory without bound), with a shorter TTL
// for a refused token. Failed authentications are rate limited per client address,
// so that random tokens cost neither TokenReviews nor memory without bound either.
type Auth struct {
	kube             kubernetes.Interface
	reviewTimeout    time.Duration
	backoff          wait.Backoff
	ttl, negativeTTL time.Duration
	users            *lru.Cache // [32]byte → cachedUser
	decisions        *lru.Cache // [32]byte → cachedDecision
	failures         *failureLimiter
	now              func() time.Time
}

type cachedUser struct {
	user    *authenticationv1.UserInfo // nil: the API does not accept the token
	expires time.Time
}

type cachedDecision struct {
	allowed bool
	expires time.Time
}

// NewAuth builds an Auth that asks the API server kube reaches.
func NewAuth(kube kubernetes.Interface, o AuthOptions) (*Auth, error) {
	o.setDefaults()
	if kube == nil {
		return nil, errors.New("authentication needs a Kubernetes client")
	}
	return &Auth{
		kube: kube, reviewTimeout: o.ReviewTimeout, backoff: *o.RetryBackoff,
		ttl: o.TTL, negativeTTL: o.NegativeTTL,
		users: lru.New(o.CacheSize), decisions: lru.New(o.CacheSize),
		failures: newFailureLimiter(o.Failures, o.CacheSize),
		now:      time.Now,
	}, nil
}

// Caller is who a request acts for: the user the API server named for its bearer
// token, and that token (to pass on, so that writes are made as the user).
type Caller struct {
	User  *authenticationv1.UserInfo
	Token string
}

type callerKey struct{}

// WithCaller marks ctx as acting for c.
func WithCaller(ctx context.Context, c *Caller) context.Context {
	return context.WithValue(ctx, callerKey{}, c)
}

// CallerFrom is the caller Require authorized the request of ctx for, nil if none.
func CallerFrom(ctx context.Context) *Caller {
	c, _ := ctx.Value(callerKey{}).(*Caller)
	return c
}

// Authenticate returns the caller of r, or a 401 (no token, or one the API refuses),
// a 429 (a client with too many failures) or a 502 (the API failed to answer).
func (a *Auth) Authenticate(r *http.Request) (*Caller, *Error) {
	token, ok := Bearer(r)
	u, err := a.identify(r, token, ok)
	if err != nil {
		return nil, err
	}
	return &Caller{User: u, Token: token}, nil
}

// Login is the check of a pasted token (the dashboard's login): Authenticate's, with
// the same cache and failure limit.
func (a *Auth) Login(r *http.Request, token string) (*authenticationv1.UserInfo, *Error) {
	return a.identify(r, token, token != "")
}

// identify is the user token belongs to; present is false when the request carried
// no token. Clients with too many failures get a 429 before any TokenReview.
func (a *Auth) identify(r *http.Request, token string, present bool) (*authenticationv1.UserInfo, *Error) {
	client := clientAddress(r)
	if retry := a.failures.blocked(client); retry > 0 && !a.knownGood(token) {
		return nil, tooManyFailures(retry)
	}
	if !present {
		a.failures.record(client)
		return nil, NewError(http.StatusUnauthorized, "unauthorized", "a bearer token is required (Authorization: Bearer <token>), e.g. from `kubectl create token`")
	}
	u, err := a.authenticate(r.Context(), token)
	if err != nil && err.Status == http.StatusUnauthorized {
		a.failures.record(client)
	}
	return u, err
}

// knownGood reports whether the API accepted token recently: a client held back for
// its failures may still use a token that works.
func (a *Auth) knownGood(token string) bool {
	v, ok := a.users.Get(sha256.Sum256([]byte(token)))
	return ok && v.(cachedUser).user != nil && a.now().Before(v.(cachedUser).expires)
}

// authenticate is the user a token belongs to (TokenReview), or a 401 or 502.
func (a *Auth) authenticate(ctx context.Context, token string) (*authenticationv1.UserInfo, *Error) {
	key := sha256.Sum256([]byte(token))
	if v, ok := a.users.Get(key); ok && a.now().Before(v.(cachedUser).expires) {
		return userOrUnauthorized(v.(cachedUser).user)
	}
	u, err := a.review(ctx, token)
	if err != nil {
		return nil, NewError(http.StatusBadGateway, "kubernetes_unavailable", "token review: "+err.Error())
	}
	entry := cachedUser{user: u, expires: a.now().Add(a.negativeTTL)}
	if u != nil {
		entry.expires = a.now().Add(a.ttl)
	}
	a.users.Add(key, entry)
	return userOrUnauthorized(entry.user)
}

// review asks the API who token belongs to (TokenReview): the user, nil when the API
// refuses the token, or an error when the API did not answer.
func (a *Auth) review(ctx context.Context, token string) (*authenticationv1.UserInfo, error) {
	var tr *authenticationv1.TokenReview
	err := a.retry(ctx, func(ctx context.Context) (err error) {
		ctx, cancel := context.WithTimeout(ctx, a.reviewTimeout)
		defer cancel()
		tr, err = a.kube.AuthenticationV1().TokenReviews().Create(ctx, &authenticationv1.TokenReview{Spec: authenticationv1.TokenReviewSpec{Token: token}}, metav1.CreateOptions{})
		return err
	})
	if err != nil {
		return nil, err
	}
	if !tr.Status.Authenticated {
		return nil, nil
	}
	return &tr.Status.User, nil
}

// retry calls f until it succeeds, fails for good, or the backoff runs out, as
// k8s.io/apiserver's webhooks retry a review: again after an error of the transport,
// a 429 or a 5xx; at once out on any other answer.
func (a *Auth) retry(ctx context.Context, f func(context.Context) error) error {
	var last error
	err := wait.ExponentialBackoffWithContext(ctx, a.backoff, func(ctx context.Context) (bool, error) {
		last = f(ctx)
		switch {
		case last == nil:
			return true, nil
		case retriable(last):
			return false, nil
		}
		return false, last
	})
	if last != nil && (err == nil || wait.Interrupted(err)) {
		return last
	}
	return err
}

// retriable tells a review error worth another try: no answer, or an answer that
// says the API server is busy or in trouble.
func retriable(err error) bool {
	var status apierrors.APIStatus
	if errors.As(err, &status) {
		code := status.Status().Code
		return code == http.StatusTooManyRequests || code >= 500
	}
	return true // the transport's: no connection, a reset, a timeout
}

func userOrUnauthorized(u *authenticationv1.UserInfo) (*authenticationv1.UserInfo, *Error) {
	if u == nil {
		return nil, NewError(http.StatusUnauthorized, "unauthorized", "the Kubernetes API does not accept this token")
	}
	return u, nil
}

// Bearer is the request's bearer token; false when it has none.
func Bearer(r *http.Request) (string, bool) {
	scheme, token, ok := strings.Cut(r.Header.Get("Authorization"), " ")
	token = strings.TrimSpace(token)
	if !ok || !strings.EqualFold(scheme, "Bearer") || token == "" {
		return "", false
	}
	return token, true
}
