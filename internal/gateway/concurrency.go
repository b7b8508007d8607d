package gateway

import (
	"net/http"
	"strconv"
	"sync"

	"github.com/go-chi/chi/v5"

	"github.com/metalambda/metalambda/internal/httpapi"
)

// callLimiter caps the calls that run at once per function. It counts calls in
// flight by function key and forgets a function when its count falls to zero, so it
// holds nothing for idle or deleted functions.
type callLimiter struct {
	max  int
	mu   sync.Mutex
	busy map[string]int
}

func newCallLimiter(limit int) *callLimiter {
	return &callLimiter{max: limit, busy: map[string]int{}}
}

// acquire takes a slot of key, false when all are taken; release gives it back.
func (l *callLimiter) acquire(key string) bool {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.busy[key] >= l.max {
		return false
	}
	l.busy[key]++
	return true
}

func (l *callLimiter) release(key string) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.busy[key]--; l.busy[key] <= 0 {
		delete(l.busy, key)
	}
}

// callRetryAfter is the Retry-After, in seconds, of a call refused because its function
// is full: calls last milliseconds, so a second later there is room again.
const callRetryAfter = 1

// limitCalls answers 429 with Retry-After when the function named in the URL already
// runs as many calls as it may, or its namespace does (when the gateway has a
// namespace limit).
func (g *Gateway) limitCalls(next http.HandlerFunc) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		ns := chi.URLParam(r, "namespace")
		key := ns + "/" + chi.URLParam(r, "name")
		if g.nsCalls != nil {
			if !g.nsCalls.acquire(ns) {
				tooManyCalls(w, "namespace "+strconv.Quote(ns)+" already runs "+strconv.Itoa(g.nsCalls.max)+" calls, the most this gateway runs per namespace (--max-calls-per-namespace); retry in a moment")
				return
			}
			defer g.nsCalls.release(ns)
		}
		if !g.calls.acquire(key) {
			tooManyCalls(w, "function "+key+" already runs "+strconv.Itoa(g.calls.max)+" calls, its limit; retry in a moment")
			return
		}
		defer g.calls.release(key)
		next(w, r)
	}
}

func tooManyCalls(w http.ResponseWriter, message string) {
	w.Header().Set("Retry-After", strconv.Itoa(callRetryAfter))
	httpapi.WriteError(w, httpapi.NewError(http.StatusTooManyRequests, "too_many_calls", message))
}
