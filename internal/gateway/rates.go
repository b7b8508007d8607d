package gateway

import (
	"sync"
	"time"

	"github.com/metalambda/metalambda/internal/gateway/dashboard"
)

// rateWindow is how far back call rates look: long enough to show a function called
// now and then, short enough to follow a change.
const rateWindow = 5 * time.Minute

// callRates counts one function's calls and failed calls per second of the last
// rateWindow, in a ring of one-second buckets made at its first call: a
// function never called holds none.
type callRates struct {
	mu      sync.Mutex
	now     func() time.Time
	buckets *[int(rateWindow / time.Second)]rateBucket
}

type rateBucket struct {
	second        int64
	calls, errors int32
}

func newCallRates(now func() time.Time) *callRates { return &callRates{now: now} }

func (c *callRates) observe(failed bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.buckets == nil {
		c.buckets = new([int(rateWindow / time.Second)]rateBucket)
	}
	sec := c.now().Unix()
	b := &c.buckets[sec%int64(len(c.buckets))]
	if b.second != sec {
		b.second, b.calls, b.errors = sec, 0, 0
	}
	b.calls++
	if failed {
		b.errors++
	}
}

// perMinute is the calls and failed calls per minute over the last rateWindow.
func (c *callRates) perMinute() dashboard.Rates {
	c.mu.Lock()
	defer c.mu.Unlock()
	now := c.now().Unix()
	var calls, errs int
	if c.buckets != nil {
		for _, b := range c.buckets {
			if b.second > now-int64(len(c.buckets)) && b.second <= now {
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
