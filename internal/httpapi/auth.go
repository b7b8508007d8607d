package httpapi

import (
	"context"
	"crypto/sha256"
	"errors"
	"fmt"
	"net"
	"net/http"
	"net/url"
	"slices"
	"strings"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	utilerrors "k8s.io/apimachinery/pkg/util/errors"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/apiserver/pkg/authentication/authenticator"
	"k8s.io/apiserver/pkg/authentication/authenticatorfactory"
	"k8s.io/apiserver/pkg/authentication/user"
	"k8s.io/apiserver/pkg/authorization/authorizer"
	"k8s.io/apiserver/pkg/authorization/authorizerfactory"
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
// decides who may use an API. The reviews are k8s.io/apiserver's delegating
// authenticator and authorizer (what a Kubernetes component or controller-runtime's
// metrics filter uses: retries with backoff, timeouts, the apiserver's metrics).
//
// Their answers are kept here, not in the apiserver's caches: in two bounded LRU
// caches keyed by a hash of the token (the apiserver's token cache grows with every
// distinct token until its TTL, so random tokens from many addresses would cost
// memory without bound), with a shorter TTL for a refused token. Failed
// authentications are rate limited per client address, so that random tokens cost
// neither TokenReviews nor memory without bound either.
type Auth struct {
	authn            authenticator.Request
	authz            authorizer.Authorizer
	ttl, negativeTTL time.Duration
	users            *lru.Cache // [32]byte → cachedUser
	decisions        *lru.Cache // [32]byte → cachedDecision
	failures         *failureLimiter
	now              func() time.Time
}

type cachedUser struct {
	user    user.Info // nil: the API does not accept the token
	expires time.Time
}

type cachedDecision struct {
	allowed bool
	expires time.Time
}

// NewAuth builds an Auth that asks the API server kube reaches.
func NewAuth(kube kubernetes.Interface, o AuthOptions) (*Auth, error) {
	o.setDefaults()
	authn, _, err := authenticatorfactory.DelegatingAuthenticatorConfig{
		TokenAccessReviewClient:  kube.AuthenticationV1(),
		TokenAccessReviewTimeout: o.ReviewTimeout,
		WebhookRetryBackoff:      o.RetryBackoff,
		// No cache there: the answers are cached here, bounded (see Auth).
		CacheTTL: 0,
	}.New()
	if err != nil {
		return nil, fmt.Errorf("token review authenticator: %w", err)
	}
	authz, err := authorizerfactory.DelegatingAuthorizerConfig{
		SubjectAccessReviewClient: kube.AuthorizationV1(),
		WebhookRetryBackoff:       o.RetryBackoff,
		// Zero TTLs: the answers are cached here, on the same clock as the tokens'.
	}.New()
	if err != nil {
		return nil, fmt.Errorf("subject access review authorizer: %w", err)
	}
	return &Auth{
		authn: authn, authz: authz, ttl: o.TTL, negativeTTL: o.NegativeTTL,
		users: lru.New(o.CacheSize), decisions: lru.New(o.CacheSize),
		failures: newFailureLimiter(o.Failures, o.CacheSize),
		now:      time.Now,
	}, nil
}

// Caller is who a request acts for: the user the API server named for its bearer
// token, and that token (to pass on, so that writes are made as the user).
type Caller struct {
	User  user.Info
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
func (a *Auth) Login(r *http.Request, token string) (user.Info, *Error) {
	return a.identify(r, token, token != "")
}

// identify is the user token belongs to; present is false when the request carried
// no token. Clients with too many failures get a 429 before any TokenReview.
func (a *Auth) identify(r *http.Request, token string, present bool) (user.Info, *Error) {
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
func (a *Auth) authenticate(ctx context.Context, token string) (user.Info, *Error) {
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

// review asks the delegating authenticator about token alone: the user, nil when the
// API refuses the token, or an error when the API did not answer.
func (a *Auth) review(ctx context.Context, token string) (user.Info, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, "/", nil)
	if err != nil {
		return nil, err
	}
	req.Header.Set("Authorization", "Bearer "+token)
	res, ok, err := a.authn.AuthenticateRequest(req)
	switch {
	case ok:
		return res.User, nil
	case unanswered(err):
		return nil, err
	}
	return nil, nil // refused, with or without the TokenReview's reason
}

// unanswered tells an API that did not answer a TokenReview (an error status, no
// connection, a timeout) from a refusal: the authenticator answers both as errors,
// a refusal as the plain text of the TokenReview's status.error (or its own "invalid
// bearer token"), gathered in an aggregate with its other authenticators' errors.
func unanswered(err error) bool {
	if err == nil {
		return false
	}
	var agg utilerrors.Aggregate
	if errors.As(err, &agg) {
		return slices.ContainsFunc(agg.Errors(), unanswered)
	}
	var status apierrors.APIStatus
	var urlErr *url.Error
	var netErr net.Error
	return errors.As(err, &status) || errors.As(err, &urlErr) || errors.As(err, &netErr) ||
		errors.Is(err, context.DeadlineExceeded) || errors.Is(err, context.Canceled)
}

func userOrUnauthorized(u user.Info) (user.Info, *Error) {
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
