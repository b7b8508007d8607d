package runtime

import (
	"context"
	"errors"
	"maps"
	"slices"
	"sync"
	"time"
)

// ErrClosed is returned by Invoke after Close.
var ErrClosed = errors.New("function is closed")

// pool holds up to size items (goja VMs, Python workers) of one compiled function,
// created lazily. An item is either idle or lent to one caller.
type pool[T comparable] struct {
	create  func() (T, error)
	destroy func(T) // must be idempotent and safe while the item is in use
	// keep, when set, tells whether an item idle since the time given may stay
	// idle; the pool set's sweep destroys those it may not.
	keep  func(T, time.Time) bool
	slots chan struct{}
	stats *poolSet

	mu        sync.Mutex
	idle      []T
	idleSince map[T]time.Time
	busy      map[T]struct{}
	closed    bool
}

func newPool[T comparable](size int, stats *poolSet, create func() (T, error), destroy func(T), keep func(T, time.Time) bool) *pool[T] {
	p := &pool[T]{
		create:  create,
		destroy: destroy,
		keep:    keep,
		slots:   make(chan struct{}, size),
		stats:   stats,
		busy:    map[T]struct{}{},

		idleSince: map[T]time.Time{},
	}
	stats.add(p)
	return p
}

// get lends an idle item, creating one if none is idle and the pool is not full; it
// waits for a free slot until ctx is done.
func (p *pool[T]) get(ctx context.Context) (T, error) {
	var zero T
	select {
	case p.slots <- struct{}{}:
	case <-ctx.Done():
		return zero, ctx.Err()
	}
	item, err := p.takeIdleOrCreate()
	if err != nil {
		<-p.slots
		return zero, err
	}
	return item, nil
}

func (p *pool[T]) takeIdleOrCreate() (T, error) {
	var zero T
	p.mu.Lock()
	if p.closed {
		p.mu.Unlock()
		return zero, ErrClosed
	}
	if n := len(p.idle); n > 0 {
		item := p.idle[n-1]
		p.idle = p.idle[:n-1]
		delete(p.idleSince, item)
		p.busy[item] = struct{}{}
		p.mu.Unlock()
		return item, nil
	}
	p.mu.Unlock()
	item, err := p.create()
	if err != nil {
		return zero, err
	}
	return item, p.markBusy(item)
}

// markBusy records a new item, destroying it if the pool closed meanwhile.
func (p *pool[T]) markBusy(item T) error {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.closed {
		p.destroy(item)
		return ErrClosed
	}
	p.busy[item] = struct{}{}
	return nil
}

// put returns a lent item; an unhealthy one is destroyed and its slot freed for a
// fresh item.
func (p *pool[T]) put(item T, healthy bool) {
	defer func() { <-p.slots }()
	p.mu.Lock()
	delete(p.busy, item)
	if healthy && !p.closed {
		p.idle = append(p.idle, item)
		p.idleSince[item] = time.Now()
		p.mu.Unlock()
		return
	}
	p.mu.Unlock()
	p.destroy(item)
}

// close destroys every item, idle or lent; get fails from then on.
func (p *pool[T]) close() {
	p.mu.Lock()
	if p.closed {
		p.mu.Unlock()
		return
	}
	p.closed = true
	items := append([]T(nil), p.idle...)
	for item := range p.busy {
		items = append(items, item)
	}
	p.idle = nil
	clear(p.idleSince)
	p.mu.Unlock()
	p.stats.remove(p)
	destroyAll(items, p.destroy)
}

func destroyAll[T any](items []T, destroy func(T)) {
	var wg sync.WaitGroup
	for _, item := range items {
		wg.Add(1)
		go func() {
			defer wg.Done()
			destroy(item)
		}()
	}
	wg.Wait()
}

// sweep destroys the idle items that keep says may not stay. Items are checked
// outside the lock; one lent and given back meanwhile is left alone.
func (p *pool[T]) sweep() {
	if p.keep == nil {
		return
	}
	p.mu.Lock()
	since := maps.Clone(p.idleSince)
	p.mu.Unlock()
	var gone []T
	for item, t := range since {
		if p.keep(item, t) {
			continue
		}
		p.mu.Lock()
		if i := slices.Index(p.idle, item); i >= 0 && p.idleSince[item] == t {
			p.idle = slices.Delete(p.idle, i, i+1)
			delete(p.idleSince, item)
			gone = append(gone, item)
		}
		p.mu.Unlock()
	}
	destroyAll(gone, p.destroy)
}

func (p *pool[T]) counts() PoolStats {
	p.mu.Lock()
	defer p.mu.Unlock()
	return PoolStats{Idle: len(p.idle), Busy: len(p.busy)}
}

// counter is anything that reports pool counts and sweeps its idle items.
type counter interface {
	counts() PoolStats
	sweep()
}

// sweepInterval is how often a pool set sweeps its pools' idle items.
var sweepInterval = time.Second

// poolSet is the live pools of one runtime, for Stats; while it has pools, it
// sweeps their idle items every sweepInterval.
type poolSet struct {
	mu       sync.Mutex
	pools    map[counter]struct{}
	sweeping chan struct{} // closed to stop the sweep; nil when none runs
}

func newPoolSet() *poolSet {
	return &poolSet{pools: map[counter]struct{}{}}
}

func (s *poolSet) add(c counter) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.pools[c] = struct{}{}
	if s.sweeping == nil {
		s.sweeping = make(chan struct{})
		go s.sweepEvery(sweepInterval, s.sweeping)
	}
}

func (s *poolSet) remove(c counter) {
	s.mu.Lock()
	defer s.mu.Unlock()
	delete(s.pools, c)
	if len(s.pools) == 0 && s.sweeping != nil {
		close(s.sweeping)
		s.sweeping = nil
	}
}

func (s *poolSet) sweepEvery(interval time.Duration, stop <-chan struct{}) {
	t := time.NewTicker(interval)
	defer t.Stop()
	for {
		select {
		case <-stop:
			return
		case <-t.C:
		}
		s.mu.Lock()
		pools := make([]counter, 0, len(s.pools))
		for c := range s.pools {
			pools = append(pools, c)
		}
		s.mu.Unlock()
		for _, c := range pools {
			c.sweep()
		}
	}
}

// Stats sums the counts of the live pools.
func (s *poolSet) Stats() PoolStats {
	s.mu.Lock()
	defer s.mu.Unlock()
	var total PoolStats
	for c := range s.pools {
		n := c.counts()
		total.Idle += n.Idle
		total.Busy += n.Busy
	}
	return total
}
