package httpapi

import (
	"math"
	"net"
	"net/http"
	"net/netip"
	"strings"
	"sync"
	"time"

	"golang.org/x/time/rate"
	"k8s.io/utils/lru"
)

// FailureLimits are a token bucket: a burst, then a steady rate per second. They
// bound failed authentications per client address, TokenReviews of unknown tokens
// over all clients, and SubjectAccessReviews per user.
type FailureLimits struct {
	Burst int
	Rate  float64
}

// buckets are token buckets by key (a client address, a user) in a bounded LRU cache.
type buckets struct {
	limits FailureLimits
	mu     sync.Mutex
	lru    *lru.Cache // key → *rate.Limiter
}

func newBuckets(limits FailureLimits, size int) *buckets {
	return &buckets{limits: limits, lru: lru.New(size)}
}

func (b *buckets) limiter(key string) *rate.Limiter {
	b.mu.Lock()
	defer b.mu.Unlock()
	if v, ok := b.lru.Get(key); ok {
		return v.(*rate.Limiter)
	}
	l := rate.NewLimiter(rate.Limit(b.limits.Rate), b.limits.Burst)
	b.lru.Add(key, l)
	return l
}

// take takes one token of l at now, at once or not at all: the refund that gives it
// back, or how long until there is one.
func take(l *rate.Limiter, now time.Time) (refund func(), wait time.Duration) {
	r := l.ReserveN(now, 1)
	if !r.OK() {
		return nil, time.Second
	}
	if d := r.DelayFrom(now); d > 0 {
		r.CancelAt(now)
		return nil, d
	}
	return func() { r.CancelAt(now) }, 0
}

// failureLimiter counts failed authentications per client address, and the
// TokenReviews of tokens no cache knows over all clients (so that clients that change
// addresses cannot have the API review tokens without bound). A token is taken
// before the attempt, so that concurrent attempts cannot all pass a check made before
// any of them failed, and given back when the API accepted the token or was not asked.
type failureLimiter struct {
	clients *buckets
	global  *rate.Limiter // TokenReviews of unknown tokens
	now     func() time.Time
}

func newFailureLimiter(perClient, global FailureLimits, size int) *failureLimiter {
	return &failureLimiter{
		clients: newBuckets(perClient, size),
		global:  rate.NewLimiter(rate.Limit(global.Rate), global.Burst),
		now:     time.Now,
	}
}

// reserve takes one attempt of client and, when review is true (the token is unknown
// and a TokenReview follows), one of the global bucket: the refund, or the 429 when
// either is empty (nothing taken then).
func (f *failureLimiter) reserve(client string, review bool) (refund func(), err *Error) {
	now := f.now()
	refundClient, wait := take(f.clients.limiter(client), now)
	if refundClient == nil {
		return nil, tooManyFailures(wait, "from this address")
	}
	if !review {
		return refundClient, nil
	}
	refundGlobal, wait := take(f.global, now)
	if refundGlobal == nil {
		refundClient()
		return nil, tooManyFailures(wait, "over all clients")
	}
	return func() { refundClient(); refundGlobal() }, nil
}

// clientAddress is the key of the request's client: its remote IP, an IPv6 address by
// its /64 (a client commonly holds a whole /64, and would else change address at
// will). Forwarding headers (X-Forwarded-For) count only from a trusted proxy: the
// nearest hop that is not one is the client. Without trusted proxies, every client
// behind a proxy shares the proxy's budget.
func clientAddress(r *http.Request, trusted []netip.Prefix) string {
	host, _, err := net.SplitHostPort(r.RemoteAddr)
	if err != nil {
		host = r.RemoteAddr
	}
	addr, err := netip.ParseAddr(host)
	if err != nil {
		return host
	}
	addr = addr.Unmap()
	if isTrusted(addr, trusted) {
		hops := strings.Split(strings.Join(r.Header.Values("X-Forwarded-For"), ","), ",")
		for i := len(hops) - 1; i >= 0 && isTrusted(addr, trusted); i-- {
			hop, err := netip.ParseAddr(strings.TrimSpace(hops[i]))
			if err != nil {
				break
			}
			addr = hop.Unmap()
		}
	}
	if addr.Is6() {
		return netip.PrefixFrom(addr, 64).Masked().String()
	}
	return addr.String()
}

func isTrusted(addr netip.Addr, trusted []netip.Prefix) bool {
	for _, p := range trusted {
		if p.Contains(addr) {
			return true
		}
	}
	return false
}

// tooManyFailures is the 429 of a client held back, with Retry-After in whole seconds.
func tooManyFailures(retry time.Duration, what string) *Error {
	e := NewError(http.StatusTooManyRequests, "too_many_failures", "too many failed authentications "+what+"; retry after "+retry.Round(time.Second).String())
	e.RetryAfter = retryAfterSeconds(retry)
	return e
}

// retryAfterSeconds rounds d up to whole seconds, at least 1.
func retryAfterSeconds(d time.Duration) int {
	return max(1, int(math.Ceil(d.Seconds())))
}
