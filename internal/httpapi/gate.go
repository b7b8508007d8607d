package httpapi

import (
	"context"
	"errors"
	"net/http"
	"sync"
	"time"

	"golang.org/x/sync/singleflight"
)

// reviewGate is the one way Auth's reviews reach the API, so that no load of requests
// multiplies the load on an API server in trouble:
//
//   - identical reviews asked at once are sent once, and share the answer
//     (singleflight, keyed by what the review asks);
//   - at most a fixed number are in flight; more answer 503 with Retry-After at once;
//   - after a review the API failed (every retry spent), the gate stays open for a
//     cooldown: reviews answer 503 with Retry-After without asking the API, rather
//     than each retrying with backoff. A cached answer still serves meanwhile.
type reviewGate struct {
	slots    chan struct{}
	flights  singleflight.Group
	cooldown time.Duration

	mu        sync.Mutex
	openUntil time.Time
}

var errBusy = errors.New("too many reviews in flight")

func newReviewGate(inFlight int, cooldown time.Duration) *reviewGate {
	return &reviewGate{slots: make(chan struct{}, inFlight), cooldown: cooldown}
}

// do runs review (named by key) unless the gate is open or full, and maps its failure
// to the answer of the request (what says which review, for the message). review
// runs detached from ctx's cancellation, since others may wait for its answer; it is
// bounded by its timeout and backoff. The waiter for it leaves when ctx ends.
func (g *reviewGate) do(ctx context.Context, now func() time.Time, key, what string, review func(context.Context) (any, error)) (any, *Error) {
	if wait := g.open(now()); wait > 0 {
		return nil, unavailable(http.StatusServiceUnavailable, what+": the Kubernetes API failed recently; not asked again before its cooldown", wait)
	}
	ch := g.flights.DoChan(key, func() (any, error) {
		select {
		case g.slots <- struct{}{}:
			defer func() { <-g.slots }()
		default:
			return nil, errBusy
		}
		v, err := review(context.WithoutCancel(ctx))
		if err != nil && retriable(err) {
			g.trip(now())
		}
		return v, err
	})
	select {
	case <-ctx.Done():
		return nil, unavailable(http.StatusServiceUnavailable, what+": "+ctx.Err().Error(), time.Second)
	case res := <-ch:
		switch {
		case res.Err == nil:
			return res.Val, nil
		case errors.Is(res.Err, errBusy):
			e := unavailable(http.StatusServiceUnavailable, what+": too many reviews in flight", time.Second)
			e.Code = "too_many_reviews"
			return nil, e
		}
		return nil, unavailable(http.StatusBadGateway, what+": "+res.Err.Error(), g.cooldown)
	}
}

// open is how long the gate stays open, 0 when it is closed.
func (g *reviewGate) open(now time.Time) time.Duration {
	g.mu.Lock()
	defer g.mu.Unlock()
	return g.openUntil.Sub(now)
}

// trip opens the gate for the cooldown from now.
func (g *reviewGate) trip(now time.Time) {
	g.mu.Lock()
	defer g.mu.Unlock()
	g.openUntil = now.Add(g.cooldown)
}

// unavailable is the answer of a review that was not made or failed: 502 when the
// API failed to answer, 503 when it was not asked, with Retry-After.
func unavailable(status int, message string, retry time.Duration) *Error {
	e := NewError(status, "kubernetes_unavailable", message)
	e.RetryAfter = retryAfterSeconds(retry)
	return e
}
