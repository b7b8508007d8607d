package lambda

import (
	"math/rand/v2"
	"os"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/metalambda/metalambda/internal/gateway/sandbox"
)

// MemoryBudget bounds the memory of every worker of the runtimes that share it
// (a gateway's): before a worker starts (when the last look leaves no room for
// it: beforeStart), and at every sweep, idle workers are stopped, the least
// recently used first (of a sample, takeEvictee), until the workers' memory is
// back within the budget. Busy workers are never stopped for it; a call that
// needs a worker gets one. A worker's memory is its cgroup's (pages, page
// cache, tmpfs, shared memory), or the resident memory of its processes where
// it has no cgroup.
type MemoryBudget struct {
	limit int64
	used  atomic.Int64 // at the last look
	// largest is the memory of the largest worker at the last look (0: none
	// seen yet), and startsSince the starts since then: a start looks again
	// only when used plus that many workers of the largest size would pass
	// the limit (beforeStart).
	largest, startsSince atomic.Int64

	mu   sync.Mutex
	sets map[*poolSet]struct{}

	enforcing sync.Mutex // one look at a time
}

// NewMemoryBudget returns a budget of limit bytes; nil (no budget) when limit
// is not positive.
func NewMemoryBudget(limit int64) *MemoryBudget {
	if limit <= 0 {
		return nil
	}
	return &MemoryBudget{limit: limit, sets: map[*poolSet]struct{}{}}
}

// Limit is the budget in bytes.
func (b *MemoryBudget) Limit() int64 {
	if b == nil {
		return 0
	}
	return b.limit
}

// Used is the workers' memory at the budget's last look.
func (b *MemoryBudget) Used() int64 {
	if b == nil {
		return 0
	}
	return b.used.Load()
}

func (b *MemoryBudget) add(s *poolSet) {
	if b == nil {
		return
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	b.sets[s] = struct{}{}
}

// idleItem is an idle item a budget may stop.
type idleItem struct {
	since time.Time
	bytes int64
	evict func() bool // stops the item if it is still idle since since
	set   *poolSet
}

// beforeStart makes room for a worker about to start. While the last look's
// total, with every start since counted at the size of the largest worker it
// saw, leaves room for this one, it looks at nothing: with a thousand
// workers, adding up their last readings cost a start milliseconds of
// processor time, and a start waited for the sweep's look to finish. Past
// that, or before any look has seen a worker, it looks as enforce does. The
// sweep's look, every second, counts what the starts since then hold.
func (b *MemoryBudget) beforeStart() {
	if b == nil {
		return
	}
	if largest := b.largest.Load(); largest > 0 {
		n := b.startsSince.Add(1)
		if b.used.Load()+n*largest <= b.limit {
			return
		}
		b.startsSince.Add(-1) // left out of the look's count, and counted after it
	}
	b.enforce(false)
	b.startsSince.Add(1) // this start's worker, which the look did not see

}

// enforce stops idle items, least recently used first (of a sample, takeEvictee),
// until the items' memory is within the budget. Unless fresh, it adds up the items' last readings (the
// sweep's, every second; an item never read is read now) and chooses by them,
// so that a start reads no known worker's memory, even over the budget: with a
// thousand workers, reading them all again cost each cold start tens of
// milliseconds. The next sweep corrects a reading that was stale.
func (b *MemoryBudget) enforce(fresh bool) {
	if b == nil {
		return
	}
	b.enforcing.Lock()
	defer b.enforcing.Unlock()
	// The starts counted so far are those whose workers this look may read:
	// one counted during the look still counts after it. One counted before
	// it whose worker the look missed (not yet recorded by its pool) counts
	// from the next look, a second later at most, as any worker's growth
	// between two looks does.
	counted := b.startsSince.Load()
	b.mu.Lock()
	sets := make([]*poolSet, 0, len(b.sets))
	for s := range b.sets {
		sets = append(sets, s)
	}
	b.mu.Unlock()
	total, largest, idle := b.measure(sets, fresh)
	for total > b.limit && len(idle) > 0 {
		var it idleItem
		it, idle = takeEvictee(idle, rand.IntN)
		if it.evict() {
			total -= it.bytes
			it.set.evictions.Add(1)
		}
	}
	b.used.Store(total)
	b.largest.Store(largest)
	b.startsSince.Add(-counted)
}

// evictionSample is how many idle items an eviction looks at, chosen at
// random, to stop the least recently used of them: the least recently used of
// all while there are no more, and otherwise an approximation of it, as
// Redis's LRU eviction does. Exact LRU stops, when functions are called in
// turn and more of them than the budget holds (a controller's resyncs call its
// functions so), the very worker whose call comes next, so that every call
// starts a worker: 1000 Functions called in turn under a budget for 900 found
// no worker warm. Sampled, most calls still find theirs (TestSampledEviction).
const evictionSample = 5

// takeEvictee removes from idle, and returns, the least recently used of
// evictionSample items chosen at random with intn (of all of them when there
// are no more), and the rest of idle, reordered.
func takeEvictee(idle []idleItem, intn func(int) int) (idleItem, []idleItem) {
	n := min(evictionSample, len(idle))
	if n < len(idle) {
		for i := range n { // the sample, at the front
			j := i + intn(len(idle)-i)
			idle[i], idle[j] = idle[j], idle[i]
		}
	}
	oldest := 0
	for i := 1; i < n; i++ {
		if idle[i].since.Before(idle[oldest].since) {
			oldest = i
		}
	}
	it := idle[oldest]
	last := len(idle) - 1
	idle[oldest] = idle[last]
	return it, idle[:last]
}

// measure is the memory of every item of sets (and what else counts with them),
// the largest item's, and the idle items.
func (b *MemoryBudget) measure(sets []*poolSet, fresh bool) (total, largest int64, idle []idleItem) {
	for _, s := range sets {
		t, l, items := s.memory(fresh)
		total += t
		largest = max(largest, l)
		idle = append(idle, items...)
	}
	return total, largest, idle
}

// processTreeMemory is the resident memory of pid and its descendants, for a
// worker without a cgroup to ask.
func processTreeMemory(pid int) int64 {
	var total int64
	for _, p := range append([]int{pid}, Descendants(pid)...) {
		raw, err := os.ReadFile("/proc/" + strconv.Itoa(p) + "/statm")
		if err != nil {
			continue
		}
		if f := strings.Fields(string(raw)); len(f) > 1 {
			pages, _ := strconv.ParseInt(f[1], 10, 64)
			total += pages * int64(os.Getpagesize())
		}
	}
	return total
}

// Descendants lists the processes below pid, through each thread's children.
func Descendants(pid int) []int {
	var out []int
	for _, c := range sandbox.Children(pid) {
		out = append(out, c)
		out = append(out, Descendants(c)...)
	}
	return out
}
