package lambda

import (
	"context"
	"errors"
	"maps"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/metalambda/metalambda/internal/tracing"
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
	keep func(T, time.Time) bool
	// memory, when set, is an item's memory, which the pool set's budget counts.
	memory func(T) int64
	// recycle, when set, tells whether a healthy item given back is to be
	// destroyed all the same (in the background: its caller is answered);
	// the next get creates a fresh one.
	recycle func(T) bool
	slots   chan struct{}
	stats   *poolSet
	ending  sync.WaitGroup // the recycled items being destroyed

	mu        sync.Mutex
	idle      []T
	idleSince map[T]time.Time
	busy      map[T]struct{}
	// starting are the items being created that create has handed over
	// (starting): a worker loading its function runs the function's code and
	// holds memory before it is lent, which the budget counts.
	starting map[T]struct{}
	closed   bool
	// read is each item's memory when last read: a start adds up these readings
	// instead of reading every worker of the gateway; the sweep reads afresh.
	read map[T]int64
}

func newPool[T comparable](size int, stats *poolSet, create func() (T, error), destroy func(T), keep func(T, time.Time) bool) *pool[T] {
	p := &pool[T]{
		create:   create,
		destroy:  destroy,
		keep:     keep,
		slots:    make(chan struct{}, size),
		stats:    stats,
		busy:     map[T]struct{}{},
		starting: map[T]struct{}{},
		read:     map[T]int64{},

		idleSince: map[T]time.Time{},
	}
	stats.add(p)
	return p
}

// get lends an idle item, creating one if none is idle and the pool is not full; it
// waits for a free slot until ctx is done. A traced call sees the wait as the span
// "queue wait" and the start of an item as "worker start".
func (p *pool[T]) get(ctx context.Context) (T, error) {
	var zero T
	if err := p.wait(ctx); err != nil {
		return zero, err
	}
	item, err := p.takeIdleOrCreate(ctx)
	if err != nil {
		<-p.slots
		return zero, err
	}
	return item, nil
}

// wait takes a slot, in the span "queue wait".
func (p *pool[T]) wait(ctx context.Context) error {
	_, span := tracing.Child(ctx, "queue wait")
	select {
	case p.slots <- struct{}{}:
		span.End()
		return nil
	case <-ctx.Done():
		tracing.End(span, ctx.Err())
		return ctx.Err()
	}
}

func (p *pool[T]) takeIdleOrCreate(ctx context.Context) (T, error) {
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
	_, span := tracing.Child(ctx, "worker start")
	p.stats.budget.beforeStart() // make room first
	item, err := p.create()
	tracing.End(span, err)
	if err != nil {
		return zero, err
	}
	p.stats.starts.Add(1)
	return item, p.markBusy(item)
}

// start records item, not yet made, as starting, so that its memory counts
// until it is lent (markBusy) or given up (started).
func (p *pool[T]) start(item T) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.starting[item] = struct{}{}
}

// started forgets item as starting: it failed to start, and is destroyed.
func (p *pool[T]) started(item T) {
	p.mu.Lock()
	defer p.mu.Unlock()
	delete(p.starting, item)
	delete(p.read, item)
}

// markBusy records a new item, destroying it if the pool closed meanwhile.
func (p *pool[T]) markBusy(item T) error {
	p.mu.Lock()
	defer p.mu.Unlock()
	delete(p.starting, item)
	if p.closed {
		p.destroy(item)
		return ErrClosed
	}
	p.busy[item] = struct{}{}
	return nil
}

// put returns a lent item; an unhealthy one, or one to recycle, is destroyed
// and its slot freed for a fresh item.
func (p *pool[T]) put(item T, healthy bool) {
	defer func() { <-p.slots }()
	recycle := healthy && p.recycle != nil && p.recycle(item)
	p.mu.Lock()
	delete(p.busy, item)
	if healthy && !recycle && !p.closed {
		p.idle = append(p.idle, item)
		p.idleSince[item] = time.Now()
		p.mu.Unlock()
		return
	}
	delete(p.read, item)
	if recycle && !p.closed {
		p.ending.Add(1)
		p.mu.Unlock()
		go func() {
			defer p.ending.Done()
			p.destroy(item)
		}()
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
	clear(p.read)
	p.mu.Unlock()
	p.stats.remove(p)
	destroyAll(items, p.destroy)
	p.ending.Wait()
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
		if !p.keep(item, t) && p.takeIdle(item, t) {
			gone = append(gone, item)
		}
	}
	p.stats.reaps.Add(uint64(len(gone)))
	destroyAll(gone, p.destroy)
}

// takeIdle removes item from the idle ones if it has been idle since since.
func (p *pool[T]) takeIdle(item T, since time.Time) bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	i := slices.Index(p.idle, item)
	if i < 0 || !p.idleSince[item].Equal(since) {
		return false
	}
	p.idle = slices.Delete(p.idle, i, i+1)
	delete(p.idleSince, item)
	delete(p.read, item)
	return true
}

// memoryUse is the memory of every item (busy, idle or starting), the largest
// item's, and the idle ones a budget may stop.
// Unless fresh, an item read before counts with its last reading.
func (p *pool[T]) memoryUse(fresh bool) (total, largest int64, idle []idleItem) {
	if p.memory == nil {
		return 0, 0, nil
	}
	p.mu.Lock()
	idleSince := maps.Clone(p.idleSince)
	busy := slices.Collect(maps.Keys(p.busy))
	busy = slices.AppendSeq(busy, maps.Keys(p.starting))
	read := maps.Clone(p.read)
	p.mu.Unlock()
	measure := func(item T) int64 {
		if m, ok := read[item]; ok && !fresh {
			// A look that reads nothing new still knows the largest: without
			// it, the budget took none for known, and every start looked
			// until the next sweep.
			largest = max(largest, m)
			return m
		}
		m := p.memory(item)
		p.mu.Lock()
		_, idle := p.idleSince[item]
		_, busy := p.busy[item]
		_, starting := p.starting[item]
		if idle || busy || starting { // not if the item went meanwhile
			p.read[item] = m
		}
		p.mu.Unlock()
		largest = max(largest, m)
		return m
	}
	for _, item := range busy {
		total += measure(item)
	}
	idle = make([]idleItem, 0, len(idleSince))
	for item, since := range idleSince {
		m := measure(item)
		total += m
		idle = append(idle, idleItem{since: since, bytes: m, set: p.stats, evict: func() bool {
			if !p.takeIdle(item, since) {
				return false
			}
			p.destroy(item)
			return true
		}})
	}
	return total, largest, idle
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
	memoryUse(fresh bool) (total, largest int64, idle []idleItem)
}

// sweepInterval is how often a pool set sweeps its pools' idle items.
var sweepInterval = time.Second

// poolSet is the live pools of one runtime, for Stats; while it has pools, it
// sweeps their idle items and its spares every sweepInterval, then keeps its
// budget.
type poolSet struct {
	budget *MemoryBudget // nil: none

	mu       sync.Mutex
	pools    map[counter]struct{}
	sweeping chan struct{} // closed to stop the sweep; nil when none runs
	spares   []*spares
	// others are memory that counts with the set's items and that no budget
	// stops (the Python runtime's zygotes), each read as spares are.
	others []func(fresh bool) int64

	// Items started, stopped for the budget and stopped by the sweep, since the
	// set was made.
	starts, evictions, reaps atomic.Uint64
}

func newPoolSet(budget *MemoryBudget) *poolSet {
	s := &poolSet{pools: map[counter]struct{}{}, budget: budget}
	budget.add(s)
	return s
}

// memory is the memory of the items of every pool with the set's spares and
// others, the largest item's, and the idle items.
func (s *poolSet) memory(fresh bool) (total, largest int64, idle []idleItem) {
	for _, c := range s.live() {
		t, l, items := c.memoryUse(fresh)
		total += t
		largest = max(largest, l)
		idle = append(idle, items...)
	}
	s.mu.Lock()
	spares := slices.Clone(s.spares)
	others := slices.Clone(s.others)
	s.mu.Unlock()
	for _, sp := range spares {
		total += sp.memory(fresh)
	}
	for _, m := range others {
		total += m(fresh)
	}
	return total, largest, idle
}

func (s *poolSet) live() []counter {
	s.mu.Lock()
	defer s.mu.Unlock()
	return slices.Collect(maps.Keys(s.pools))
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

// addMemory adds memory that counts with the pools' and that the budget does
// not stop: it makes room by stopping idle workers instead.
func (s *poolSet) addMemory(m func(fresh bool) int64) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.others = append(s.others, m)
}

// addSpares adds a runtime's spares, whose memory counts with the pools'.
func (s *poolSet) addSpares(sp *spares) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.spares = append(s.spares, sp)
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
		for _, c := range s.live() {
			c.sweep()
		}
		s.mu.Lock()
		spares := slices.Clone(s.spares)
		s.mu.Unlock()
		for _, sp := range spares {
			sp.sweep()
		}
		s.budget.enforce(true)
	}
}

// Stats sums the counts of the live pools.
func (s *poolSet) Stats() PoolStats {
	s.mu.Lock()
	defer s.mu.Unlock()
	total := PoolStats{Starts: s.starts.Load(), Evictions: s.evictions.Load(), Reaps: s.reaps.Load()}
	for c := range s.pools {
		n := c.counts()
		total.Idle += n.Idle
		total.Busy += n.Busy
	}
	for _, sp := range s.spares {
		total.Spares += sp.count()
		total.SpareMisses += sp.misses.Load()
	}
	return total
}
