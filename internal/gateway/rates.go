package gateway

import (
	"sync"
	"time"

	"github.com/metalambda/metalambda/internal/gateway/dashboard"
)

// rateWindow is how far back call rates look: long enough to show a function called
// now and then, short enough to follow a change.
const rateWindow = 5 * time.Minute

// rateBucketSpan is the span of one bucket of callRates: the window ends in
// steps of it, and a gateway with thousands of functions keeps 30 buckets
// (480 bytes) for each function called, rather than 300 (4.7 KiB).
const rateBucketSpan = 10 * time.Second

// callRates counts one function's calls and failed calls per rateBucketSpan of
// the last rateWindow, in a ring of buckets made at its first call: a function
// never called holds none.
type callRates struct {
	mu      sync.Mutex
	now     func() time.Time
	buckets *[int(rateWindow / rateBucketSpan)]rateBucket
}

type rateBucket struct {
	span          int64 // the bucket's span: Unix time / rateBucketSpan
	calls, errors int32
}

// span is the number of the bucket span t falls in.
func span(t time.Time) int64 { return t.Unix() / int64(rateBucketSpan/time.Second) }

func newCallRates(now func() time.Time) *callRates { return &callRates{now: now} }

func (c *callRates) observe(failed bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.buckets == nil {
		c.buckets = new([int(rateWindow / rateBucketSpan)]rateBucket)
	}
	n := span(c.now())
	b := &c.buckets[n%int64(len(c.buckets))]
	if b.span != n {
		b.span, b.calls, b.errors = n, 0, 0
	}
	b.calls++
	if failed {
		b.errors++
	}
}

// perMinute is the calls and failed calls per minute over the last rateWindow
// (the current bucket's span and the spans before it that make the window).
func (c *callRates) perMinute() dashboard.Rates {
	c.mu.Lock()
	defer c.mu.Unlock()
	now := span(c.now())
	var calls, errs int
	if c.buckets != nil {
		for _, b := range c.buckets {
			if b.span > now-int64(len(c.buckets)) && b.span <= now {
				calls, errs = calls+int(b.calls), errs+int(b.errors)
			}
		}
	}
	minutes := rateWindow.Minutes()
	return dashboard.Rates{CallsPerMinute: float64(calls) / minutes, ErrorsPerMinute: float64(errs) / minutes, Window: rateWindow}
}

// rates are a loaded function's call rates; false when the gateway has not loaded it.
func (s *store) rates(namespace, name string) (dashboard.Rates, bool) {
	e := s.get(namespace, name)
	if e == nil || e.metrics == nil {
		return dashboard.Rates{}, false
	}
	return e.metrics.rates.perMinute(), true
}
