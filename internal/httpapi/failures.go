package httpapi

import (
	"math"
	"net"
	"net/http"
	"sync"
	"time"

	"golang.org/x/time/rate"
	"k8s.io/utils/lru"
)

// FailureLimits bound failed authentications per client address: a burst, then a
// steady rate per second.
type FailureLimits struct {
	Burst int
	Rate  float64
}

// failureLimiter counts failed authentications per client address in token buckets
// kept in a bounded LRU cache. A client whose bucket is empty is held back until it
// refills; successful requests cost nothing.
type failureLimiter struct {
	limits  FailureLimits
	mu      sync.Mutex
	clients *lru.Cache // address → *rate.Limiter
	now     func() time.Time
}

func newFailureLimiter(limits FailureLimits, size int) *failureLimiter {
	return &failureLimiter{limits: limits, clients: lru.New(size), now: time.Now}
}

func (f *failureLimiter) limiter(client string) *rate.Limiter {
	f.mu.Lock()
	defer f.mu.Unlock()
	if v, ok := f.clients.Get(client); ok {
		return v.(*rate.Limiter)
	}
	l := rate.NewLimiter(rate.Limit(f.limits.Rate), f.limits.Burst)
	f.clients.Add(client, l)
	return l
}

// blocked is how long client must wait before its next attempt, 0 when it may try.
func (f *failureLimiter) blocked(client string) time.Duration {
	now := f.now()
	tokens := f.limiter(client).TokensAt(now)
	if tokens >= 1 {
		return 0
	}
	return time.Duration((1 - tokens) / f.limits.Rate * float64(time.Second))
}

// record takes one failure from client's bucket.
func (f *failureLimiter) record(client string) { f.limiter(client).AllowN(f.now(), 1) }

// clientAddress is the request's remote IP. Forwarding headers are not trusted: behind
// a proxy every client shares the proxy's budget.
func clientAddress(r *http.Request) string {
	host, _, err := net.SplitHostPort(r.RemoteAddr)
	if err != nil {
		return r.RemoteAddr
	}
	return host
}

// tooManyFailures is the 429 of a client held back, with Retry-After in whole seconds.
func tooManyFailures(retry time.Duration) *Error {
	e := NewError(http.StatusTooManyRequests, "too_many_failures", "too many failed authentications from this address; retry after "+retry.Round(time.Second).String())
	e.RetryAfter = retryAfterSeconds(retry)
	return e
}

// retryAfterSeconds rounds d up to whole seconds, at least 1.
func retryAfterSeconds(d time.Duration) int {
	return max(1, int(math.Ceil(d.Seconds())))
}
