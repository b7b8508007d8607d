package httpapi

import (
	"context"
	"crypto/sha256"
	"errors"
	"net/http"
	"net/netip"
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
	// CacheSize bounds each cache (tokens, decisions, clients with failures, users
	// with access reviews), least recently used first out. Default 4096.
	CacheSize int
	// Failures bound failed authentications per client address; more answer 429 with
	// Retry-After. Default a burst of 20, then 1 per second.
	Failures FailureLimits
	// ReviewTimeout bounds one TokenReview. Default 10s.
	ReviewTimeout time.Duration
	// RetryBackoff is how a TokenReview or SubjectAccessReview the API failed is
	// retried. Default k8s.io/apiserver's: 500ms, ×1.5, 5 tries.
	RetryBackoff *wait.Backoff
	// UnknownTokens bound the TokenReviews of tokens no cache knows, over all clients:
	// a review that accepts the token is not counted. More answer 429. Default a
	// burst of 100, then 10 per second.
	UnknownTokens FailureLimits
	// AccessReviews bound the SubjectAccessReviews per user that no cached answer
	// saves; more answer 429. Default a burst of 300, then 30 per second.
	AccessReviews FailureLimits
	// MaxInFlightReviews bounds the reviews sent at once (identical ones are sent
	// once); more answer 503 with Retry-After. Default 64.
	MaxInFlightReviews int
	// FailureCooldown is how long after a review the API failed (its retries spent)
	// the reviews of tokens and accesses not cached answer 503 with Retry-After
	// without asking the API. Default 5s.
	FailureCooldown time.Duration
	// TrustedProxies are the addresses of proxies whose X-Forwarded-For names the
	// client, for the failure limit. Default none: the remote address is the client.
	TrustedProxies []netip.Prefix
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
	o.Failures = limitsOr(o.Failures, FailureLimits{Burst: 20, Rate: 1})
	if o.ReviewTimeout <= 0 {
		o.ReviewTimeout = 10 * time.Second
	}
	o.UnknownTokens = limitsOr(o.UnknownTokens, FailureLimits{Burst: 100, Rate: 10})
	o.AccessReviews = limitsOr(o.AccessReviews, FailureLimits{Burst: 300, Rate: 30})
	if o.MaxInFlightReviews <= 0 {
		o.MaxInFlightReviews = 64
	}
	if o.FailureCooldown <= 0 {
		o.FailureCooldown = 5 * time.Second
	}
	if o.RetryBackoff == nil {
		// k8s.io/apiserver/pkg/server/options.DefaultAuthWebhookRetryBackoff, which
		// that package would bring the whole server along to import.
		o.RetryBackoff = &wait.Backoff{Duration: 500 * time.Millisecond, Factor: 1.5, Jitter: 0.2, Steps: 5}
	}
}

// limitsOr is l with each field that is not positive taken from d.
func limitsOr(l, d FailureLimits) FailureLimits {
	if l.Burst <= 0 {
		l.Burst = d.Burst
	}
	if l.Rate <= 0 {
		l.Rate = d.Rate
	}
	return l
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
// for a refused token. Failed authentications are rate limited per client address
// (an IPv6 client per /64), and the reviews of unknown tokens over all clients, so
// that random tokens cost neither TokenReviews nor memory without bound either; the
// SubjectAccessReviews a user's requests cost beyond the cache are rate limited per
// user. The reviews go through a reviewGate: identical ones coalesced, a bounded
// number in flight, none for a cooldown after the API failed one.
type Auth struct {
	kube             kubernetes.Interface
	reviewTimeout    time.Duration
	backoff          wait.Backoff
	ttl, negativeTTL time.Duration
	users            *lru.Cache // [32]byte → cachedUser
	// accepted remembers the tokens the API accepted within acceptedFor ([32]byte →
	// time), past their cache entry: their next review does not take from the
	// global budget of unknown tokens, so that clients spraying unknown tokens
	// cannot keep the engine's or a user's token from being reviewed again.
	accepted       *lru.Cache
	decisions      *lru.Cache // [32]byte → cachedDecision
	failures       *failureLimiter
	accessReviews  *buckets // by user
	gate           *reviewGate
	trustedProxies []netip.Prefix
	now            func() time.Time
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
		users: lru.New(o.CacheSize), decisions: lru.New(o.CacheSize), accepted: lru.New(o.CacheSize),
		failures:       newFailureLimiter(o.Failures, o.UnknownTokens, o.CacheSize),
		accessReviews:  newBuckets(o.AccessReviews, o.CacheSize),
		gate:           newReviewGate(o.MaxInFlightReviews, o.FailureCooldown),
		trustedProxies: o.TrustedProxies,
		now:            time.Now,
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
// a 429 (a client with too many failures), a 502 (the API failed to answer) or a 503
// (the API not asked: too many reviews in flight, or one failed just before).
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
// no token. A token the API accepted recently is served from the cache; any other
// attempt first takes one failure from the client's budget (and, for a token to
// review, one from the global budget of unknown tokens), or gets a 429 without a
// TokenReview, and gives it back when the API accepts the token or was not asked.
func (a *Auth) identify(r *http.Request, token string, present bool) (*authenticationv1.UserInfo, *Error) {
	cached, known := a.cached(token)
	if known && cached != nil {
		return cached, nil
	}
	refund, err := a.failures.reserve(clientAddress(r, a.trustedProxies), present && !known && !a.acceptedRecently(token))
	if err != nil {
		return nil, err
	}
	if !present {
		return nil, NewError(http.StatusUnauthorized, "unauthorized", "a bearer token is required (Authorization: Bearer <token>), e.g. from `kubectl create token`")
	}
	if known {
		return userOrUnauthorized(nil)
	}
	u, err := a.authenticate(r.Context(), token)
	if err == nil || err.Status == http.StatusServiceUnavailable {
		refund()
	}
	return u, err
}

// acceptedFor is how long a token the API accepted is not taken for unknown.
const acceptedFor = time.Hour

// acceptedRecently reports whether the API accepted token within acceptedFor.
func (a *Auth) acceptedRecently(token string) bool {
	v, ok := a.accepted.Get(sha256.Sum256([]byte(token)))
	return ok && a.now().Sub(v.(time.Time)) < acceptedFor
}

// cached is the cache's answer for token: known is false when it has none.
func (a *Auth) cached(token string) (u *authenticationv1.UserInfo, known bool) {
	v, ok := a.users.Get(sha256.Sum256([]byte(token)))
	if !ok || !a.now().Before(v.(cachedUser).expires) {
		return nil, false
	}
	return v.(cachedUser).user, true
}

// authenticate is the user a token belongs to (TokenReview), or a 401, 502 or 503.
func (a *Auth) authenticate(ctx context.Context, token string) (*authenticationv1.UserInfo, *Error) {
	key := sha256.Sum256([]byte(token))
	v, err := a.gate.do(ctx, a.now, "token\x00"+string(key[:]), "token review", func(ctx context.Context) (any, error) {
		u, err := a.review(ctx, token)
		if err != nil {
			return nil, err
		}
		entry := cachedUser{user: u, expires: a.now().Add(a.negativeTTL)}
		if u != nil {
			entry.expires = a.now().Add(a.ttl)
			a.accepted.Add(key, a.now())
		}
		a.users.Add(key, entry)
		return u, nil
	})
	if err != nil {
		return nil, err
	}
	return userOrUnauthorized(v.(*authenticationv1.UserInfo))
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
