package lambda

import (
	"cmp"
	"context"
	"maps"
	"math/rand/v2"
	"slices"
	"sync"
	"testing"
	"time"
)

// The budget stops idle items, least recently used first, across the pools of
// every set that shares it, until the items' memory is back within it; busy
// items are never stopped.
func TestMemoryBudgetStopsTheLeastRecentlyUsedIdleItems(t *testing.T) {
	budget := NewMemoryBudget(250)
	var mu sync.Mutex
	var destroyed []int
	next := 0
	newIntPool := func(set *poolSet) *pool[int] {
		p := newPool(4, set, func() (int, error) {
			mu.Lock()
			defer mu.Unlock()
			next++
			return next, nil
		}, func(i int) {
			mu.Lock()
			defer mu.Unlock()
			destroyed = append(destroyed, i)
		}, nil)
		p.memory = func(int) int64 { return 100 }
		return p
	}
	sets := []*poolSet{newPoolSet(budget), newPoolSet(budget)}
	a, b, c := newIntPool(sets[0]), newIntPool(sets[1]), newIntPool(sets[0])
	defer a.close()
	defer b.close()
	defer c.close()
	ctx := context.Background()
	use := func(p *pool[int]) int {
		t.Helper()
		item, err := p.get(ctx)
		if err != nil {
			t.Fatal(err)
		}
		p.put(item, true)
		time.Sleep(time.Millisecond) // distinct idle times
		return item
	}
	first, second := use(a), use(b)
	busy, err := c.get(ctx) // the third item: 300 bytes in all, over the budget
	if err != nil {
		t.Fatal(err)
	}
	// Before the third started, two items (200 bytes) were within the budget.
	if len(destroyed) != 0 {
		t.Fatalf("stopped %v before the budget was passed", destroyed)
	}
	budget.enforce(true)
	if !slices.Equal(destroyed, []int{first}) {
		t.Errorf("stopped %v, want only the least recently used idle item %d", destroyed, first)
	}
	if got := budget.Used(); got != 200 {
		t.Errorf("Used = %d, want 200", got)
	}
	// Past the budget with only a busy item and one idle: the idle one goes,
	// the busy one stays.
	budget.limit = 50
	budget.enforce(true)
	if !slices.Equal(destroyed, []int{first, second}) || budget.Used() != 100 {
		t.Errorf("stopped %v (used %d), want %d and %d stopped and the busy %d kept", destroyed, budget.Used(), first, second, busy)
	}
	c.put(busy, true)
	if s := sets[0].Stats(); s.Evictions != 1 || s.Starts != 2 {
		t.Errorf("first set: %+v, want 2 starts and 1 eviction", s)
	}
	if s := sets[1].Stats(); s.Evictions != 1 || s.Starts != 1 {
		t.Errorf("second set: %+v, want 1 start and 1 eviction", s)
	}
}

// A start that must look reads only the memory of items never read before,
// and chooses what to stop by the last readings; the sweep reads every item
// again.
func TestMemoryBudgetStartReadsNoKnownItem(t *testing.T) {
	budget := NewMemoryBudget(1000)
	mem := &readCounter{size: 100}
	next := 0
	p := newPool(8, newPoolSet(budget), func() (int, error) { next++; return next, nil }, func(int) {}, nil)
	p.memory = mem.memory
	defer p.close()
	ctx := context.Background()
	var items []int
	for range 4 {
		budget.largest.Store(0) // no look has seen a worker: each start looks
		item, err := p.get(ctx)
		if err != nil {
			t.Fatal(err)
		}
		items = append(items, item)
	}
	for _, i := range items[:3] {
		if mem.reads(i) != 1 {
			t.Errorf("item %d read %d times by the starts after it, want once", i, mem.reads(i))
		}
	}
	budget.enforce(true)
	if mem.reads(items[0]) != 2 || budget.Used() != 400 {
		t.Errorf("after a sweep: item %d read %d times, used %d; want 2 reads and 400", items[0], mem.reads(items[0]), budget.Used())
	}
	for _, i := range items {
		p.put(i, true)
	}
	// A start that finds the last readings (100 each) over the budget stops
	// idle items by them, reading none again; growth between sweeps (300 each
	// now) shows at the next sweep, which stops more.
	mem.setSize(300)
	budget.limit = 350
	budget.enforce(false)
	if mem.reads(items[0]) != 2 || budget.Used() != 300 {
		t.Errorf("a start over the budget: item %d read %d times, used %d; want no fresh read and 300 left by the last readings", items[0], mem.reads(items[0]), budget.Used())
	}
	budget.enforce(true)
	if budget.Used() != 300 {
		t.Errorf("after the sweep: used %d, want 300 (one item of 300 left)", budget.Used())
	}
}

// While the last look leaves room for every start since, each counted at the
// size of the largest worker that look saw, a start looks at nothing; the
// start that would pass the limit so counted looks, and stops what it must.
func TestMemoryBudgetStartWithinTheLastLookLooksAtNothing(t *testing.T) {
	defer func(d time.Duration) { sweepInterval = d }(sweepInterval)
	sweepInterval = time.Hour // no sweep's look but the test's
	budget := NewMemoryBudget(1000)
	var mu sync.Mutex
	reads := map[int]int{}
	var destroyed []int
	sizes := map[int]int64{}
	next := 0
	p := newPool(16, newPoolSet(budget), func() (int, error) { next++; return next, nil }, func(i int) {
		mu.Lock()
		defer mu.Unlock()
		destroyed = append(destroyed, i)
	}, nil)
	p.memory = func(i int) int64 {
		mu.Lock()
		defer mu.Unlock()
		reads[i]++
		return cmp.Or(sizes[i], 100)
	}
	defer p.close()
	ctx := context.Background()
	var held []int
	start := func() int { // a new item: every other one is lent
		t.Helper()
		item, err := p.get(ctx)
		if err != nil {
			t.Fatal(err)
		}
		held = append(held, item)
		return item
	}
	giveBack := func() {
		for _, i := range held {
			p.put(i, true)
			time.Sleep(time.Millisecond) // distinct idle times
		}
		held = nil
	}
	first, second := start(), start()
	mu.Lock()
	sizes[second] = 200 // the largest
	mu.Unlock()
	giveBack()
	budget.enforce(true)
	if budget.Used() != 300 {
		t.Fatalf("used %d after the look, want 300", budget.Used())
	}
	readsAfterLook := maps.Clone(reads)
	held = []int{first, second} // lent again, so that the starts below make new items
	for range held {
		if got, err := p.get(ctx); err != nil || (got != first && got != second) {
			t.Fatalf("get = %d, %v; want an idle item", got, err)
		}
	}
	// 300 + 3 starts of up to 200 each = 900: within 1000, no look.
	started := []int{start(), start(), start()}
	if !maps.Equal(reads, readsAfterLook) || len(destroyed) != 0 {
		t.Fatalf("starts within the room the last look left read %v (before them %v) and stopped %v; want nothing read or stopped", reads, readsAfterLook, destroyed)
	}
	// The fourth would make 1100 so counted: it looks. Its look reads the
	// three items never read (100 each: 600 in all) and stops nothing.
	start()
	for _, i := range started {
		if reads[i] != 1 {
			t.Errorf("item %d read %d times by the start that looked, want once", i, reads[i])
		}
	}
	if reads[first] != readsAfterLook[first] || len(destroyed) != 0 || budget.Used() != 600 {
		t.Errorf("the start that looked: read the first item %d times (before %d), stopped %v, used %d; want it not read again, nothing stopped, 600", reads[first], readsAfterLook[first], destroyed, budget.Used())
	}
	giveBack()
	// Under a smaller limit, a start (of another function: this one has idle
	// items to lend) that looks stops the least recently used idle item.
	budget.limit = 650
	budget.largest.Store(100)
	budget.startsSince.Store(0)
	other := newPool(1, p.stats, func() (int, error) { return 1000, nil }, func(int) {}, nil)
	defer other.close()
	if _, err := other.get(ctx); err != nil { // 700 (the last readings, and the one never read) + 100 > 650
		t.Fatal(err)
	}
	if len(destroyed) != 1 || budget.Used() > 650 {
		t.Errorf("a start past the limit stopped %v, leaving %d; want one idle item stopped, 650 at most", destroyed, budget.Used())
	}
}

// A registered function holds no worker until it is called: the worker that
// checked its source is stopped.
func TestCompilingKeepsNoWorker(t *testing.T) {
	for _, tt := range []struct {
		rt      Runtime
		fn      Function
		workers func(string) []int
	}{
		{NewSandboxedJavaScript(sandboxed(t, Options{})), jsFn("kept-js", jsEcho), scriptWorkers},
		{NewPython(sandboxed(t, Options{})), pyFn("kept-python", pyEcho), workerProcesses},
	} {
		t.Run(tt.fn.Runtime, func(t *testing.T) {
			c := mustCompile(t, tt.rt, tt.fn)
			if got := tt.workers(tt.fn.Name); len(got) != 0 {
				t.Errorf("workers after Compile: %v, want none", got)
			}
			stats := tt.rt.(StatsReporter).Stats()
			if stats.Idle != 0 || stats.Starts != 1 {
				t.Errorf("stats after Compile: %+v, want one start and no idle worker", stats)
			}
			assertEcho(t, c, "p")
			if got := tt.workers(tt.fn.Name); len(got) != 1 {
				t.Errorf("workers after a call: %v, want one", got)
			}
		})
	}
}

// With a budget smaller than any worker, starting a worker for one function
// first stops another function's idle worker (so its memory was counted), and
// the runtime's counters say so.
func TestMemoryBudgetStopsIdleWorkers(t *testing.T) {
	budget := NewMemoryBudget(1)
	rt := NewSandboxedJavaScript(sandboxed(t, Options{MemoryBudget: budget}))
	first := mustCompile(t, rt, jsFn("budget-first", jsEcho))
	second := mustCompile(t, rt, jsFn("budget-second", jsEcho))
	assertEcho(t, first, "a")
	if got := scriptWorkers("test/budget-first"); len(got) != 1 {
		t.Fatalf("workers of the first function: %v, want one", got)
	}
	assertEcho(t, second, "b")
	if got := scriptWorkers("test/budget-first"); len(got) != 0 {
		t.Errorf("the first function's idle worker %v outlived the second's start", got)
	}
	if s := rt.(StatsReporter).Stats(); s.Evictions < 1 {
		t.Errorf("stats: %+v, want an eviction", s)
	}
}

// TestSampledEviction: of as many idle items as the sample or fewer, an
// eviction takes the least recently used; of more, the least recently used of
// the sample. Called in turn, 1000 functions under a budget for 900 workers
// find most of their workers warm from the second round on, where exact LRU
// would have stopped every one just before its call.
func TestSampledEviction(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	base := time.Now()
	items := func(ages ...int) []idleItem {
		var out []idleItem
		for _, a := range ages {
			out = append(out, idleItem{since: base.Add(time.Duration(a) * time.Second), bytes: int64(a)})
		}
		return out
	}
	idle := items(4, 2, 5, 1, 3)
	for want := 1; want <= 5; want++ {
		var it idleItem
		it, idle = takeEvictee(idle, rng.IntN)
		if it.bytes != int64(want) {
			t.Fatalf("took the item idle since %d, want the least recently used, %d", it.bytes, want)
		}
	}

	const functions, room = 1000, 900
	lastCall := map[int]int{} // warm workers by function: the round-robin step of their last call
	hits, calls := 0, 0
	for step := range 5 * functions {
		fn := step % functions
		if _, warm := lastCall[fn]; warm {
			if step >= functions {
				hits++
			}
		} else if len(lastCall) == room {
			idle := make([]idleItem, 0, room)
			for f, at := range lastCall {
				idle = append(idle, idleItem{since: base.Add(time.Duration(at)), bytes: int64(f)})
			}
			it, _ := takeEvictee(idle, rng.IntN)
			delete(lastCall, int(it.bytes))
		}
		if step >= functions {
			calls++
		}
		lastCall[fn] = step
	}
	if rate := float64(hits) / float64(calls); rate < 0.5 {
		t.Errorf("%.0f%% of calls after the first round found their worker warm, want at least half", 100*rate)
	}
	t.Logf("%d of %d calls after the first round found their worker warm", hits, calls)
}

// TestEvictionSparesTheMostRecentlyUsed: whatever the sample, an eviction
// takes an item older than the evictionSample-1 most recently used while more
// items are idle, and the least recently used of all has a chance of about
// evictionSample/n at each: no tenant, by the order of its calls, gets
// another's worker that was just used stopped before its own older ones.
func TestEvictionSparesTheMostRecentlyUsed(t *testing.T) {
	rng := rand.New(rand.NewPCG(3, 4))
	base := time.Now()
	const n, trials = 50, 20000
	oldestTaken := 0
	for range trials {
		idle := make([]idleItem, n)
		for i := range idle { // bytes: how recently used, 0 the least
			idle[i] = idleItem{since: base.Add(time.Duration(i) * time.Second), bytes: int64(i)}
		}
		rng.Shuffle(n, func(i, j int) { idle[i], idle[j] = idle[j], idle[i] })
		it, rest := takeEvictee(idle, rng.IntN)
		if it.bytes > n-evictionSample {
			t.Fatalf("took the item %d of %d by recency, one of the %d most recently used", it.bytes, n, evictionSample-1)
		}
		if len(rest) != n-1 {
			t.Fatalf("%d items left of %d", len(rest), n)
		}
		if it.bytes == 0 {
			oldestTaken++
		}
	}
	if share, want := float64(oldestTaken)/trials, float64(evictionSample)/n; share < want*0.8 || share > want*1.2 {
		t.Errorf("took the least recently used in %.3f of evictions, want about %.3f", share, want)
	}
}

// TestMemoryBudgetLookThatReadsNothingNewKeepsTheLargest: a start's look
// that reads no worker it had not read before still knows the largest worker,
// so that the starts after it, within the room it left, look at nothing. It
// took the largest for 0 before, and every start looked until the next sweep.
func TestMemoryBudgetLookThatReadsNothingNewKeepsTheLargest(t *testing.T) {
	defer func(d time.Duration) { sweepInterval = d }(sweepInterval)
	sweepInterval = time.Hour // no sweep's look but the test's
	const items, size, room = 64, 100, 4
	budget := NewMemoryBudget((items + room) * size)
	mem := &readCounter{size: size}
	next := 0
	p := newPool(items, newPoolSet(budget), func() (int, error) { next++; return next, nil }, func(int) {}, nil)
	p.memory = mem.memory
	defer p.close()
	ctx := context.Background()
	var held []int
	for range items {
		item, err := p.get(ctx)
		if err != nil {
			t.Fatal(err)
		}
		held = append(held, item)
	}
	for _, i := range held {
		p.put(i, true)
	}
	budget.enforce(true)
	budget.enforce(false) // a start's look: every item known, none read
	if got := budget.largest.Load(); got != size {
		t.Fatalf("largest after a look that read nothing new: %d, want %d", got, size)
	}
	// Another function's pool starts the items below: p's stay idle.
	q := newPool(room, p.stats, func() (int, error) { next++; return next, nil }, func(int) {}, nil)
	q.memory = p.memory
	defer q.close()
	var started []int
	for range room - 1 { // the look counted a start too
		item, err := q.get(ctx)
		if err != nil {
			t.Fatal(err)
		}
		started = append(started, item)
	}
	for _, i := range started {
		if n := mem.reads(i); n != 0 {
			t.Errorf("item %d read %d times: a start within the room looked", i, n)
		}
	}
}

// readCounter is every item's memory, size bytes, for a pool's memory, and
// counts how often each item was read.
type readCounter struct {
	mu    sync.Mutex
	size  int64
	count map[int]int
}

func (c *readCounter) memory(item int) int64 {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.count == nil {
		c.count = map[int]int{}
	}
	c.count[item]++
	return c.size
}

func (c *readCounter) reads(item int) int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.count[item]
}

func (c *readCounter) setSize(size int64) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.size = size
}
