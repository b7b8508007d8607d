package api

import (
	"sort"
	"sync"
	"time"

	"github.com/metalambda/metalambda/internal/engine/hook"
	"github.com/metalambda/metalambda/internal/engineapi"
)

// DefaultHookCallHistory is how many hook calls the engine remembers by default.
const DefaultHookCallHistory = 1000

// maxRecordedBody bounds each request and response the call history keeps; a bigger
// body is kept as its size alone. With the default history that bounds the bodies
// to 2 x 1000 x 32 KiB = 64 MiB, and far less for usual hooks.
const maxRecordedBody = 32 << 10

// History is the engine's bounded record of recent hook calls (a hook.Recorder):
// a ring of the last calls with monotonic ids, the newest call per parent and hook
// (for diffs), and per controller a per-minute record of the last hour. A nil
// *History records nothing.
//
// Recording is the hot path: it copies the call into a preallocated slot and keeps
// the body slices the hook client made anyway; redaction, indentation and diffs
// happen when the record is served.
type History struct {
	now func() time.Time

	mu     sync.Mutex
	ring   []recordedCall
	nextID uint64 // the id of the next call; ids start at 1
	latest map[callKey]uint64
	stats  map[controllerKey]*controllerStats
}

// recordedCall is one slot of the ring.
type recordedCall struct {
	id   uint64
	prev uint64 // the previous call of the same hook for the same parent
	call hook.Call
	// requestBytes and responseBytes are the sizes of bodies too big to keep.
	requestBytes, responseBytes int
}

// controllerKey names a controller object.
type controllerKey struct{ kind, name string }

// callKey names the calls whose responses are diffed against each other.
type callKey struct {
	kind, name, hook, parentUID string
	parent                      hook.ObjectKey
}

func keyOf(info hook.CallInfo) callKey {
	return callKey{kind: info.ControllerType, name: info.Controller, hook: info.Hook, parentUID: info.ParentUID, parent: info.Parent}
}

func NewHistory(size int) *History {
	if size <= 0 {
		return nil
	}
	return &History{
		now: time.Now, ring: make([]recordedCall, size), nextID: 1,
		latest: map[callKey]uint64{}, stats: map[controllerKey]*controllerStats{},
	}
}

// RecordCall keeps c, evicting the oldest call when the ring is full.
func (h *History) RecordCall(c hook.Call) {
	rec := recordedCall{call: c}
	if len(c.Request) > maxRecordedBody {
		rec.call.Request, rec.requestBytes = nil, len(c.Request)
	}
	if len(c.Response) > maxRecordedBody {
		rec.call.Response, rec.responseBytes = nil, len(c.Response)
	}
	key := keyOf(c.Info)
	h.mu.Lock()
	defer h.mu.Unlock()
	rec.id = h.nextID
	h.nextID++
	slot := &h.ring[rec.id%uint64(len(h.ring))]
	if slot.id != 0 && h.latest[keyOf(slot.call.Info)] == slot.id {
		delete(h.latest, keyOf(slot.call.Info))
	}
	rec.prev = h.latest[key]
	h.latest[key] = rec.id
	*slot = rec
	h.statsOf(controllerKey{kind: c.Info.ControllerType, name: c.Info.Controller}).addCall(c.Start, c.Duration, c.Err != nil)
}

// RecordSync counts a failed sync of a controller's parent for its overview.
func (h *History) RecordSync(kind, name string, failed bool) {
	if h == nil || !failed {
		return
	}
	h.mu.Lock()
	defer h.mu.Unlock()
	h.statsOf(controllerKey{kind: kind, name: name}).addSyncError(h.now())
}

func (h *History) statsOf(key controllerKey) *controllerStats {
	s := h.stats[key]
	if s == nil {
		s = &controllerStats{}
		h.stats[key] = s
	}
	return s
}

// Forget drops what is known of a controller that is gone; its calls leave the ring
// as newer ones come.
func (h *History) Forget(kind, name string) {
	if h == nil {
		return
	}
	h.mu.Lock()
	defer h.mu.Unlock()
	delete(h.stats, controllerKey{kind: kind, name: name})
}

// get returns the call with id when the ring still holds it.
func (h *History) get(id uint64) (recordedCall, bool) {
	if id == 0 {
		return recordedCall{}, false
	}
	slot := h.ring[id%uint64(len(h.ring))]
	return slot, slot.id == id
}

// lastID is the id of the newest call, 0 before the first.
func (h *History) lastID() uint64 {
	if h == nil {
		return 0
	}
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.nextID - 1
}

// list returns, newest first, up to limit calls with an id above since that keep
// returns true for, each with its previous call when the ring holds it. keep runs
// without the lock held, so it may be slow (an authorization check).
func (h *History) list(since uint64, limit int, keep func(*recordedCall) bool) (calls, previous []recordedCall) {
	if h == nil {
		return nil, nil
	}
	for _, c := range h.snapshot(since) {
		if len(calls) == limit {
			break
		}
		if keep(&c) {
			calls = append(calls, c)
		}
	}
	h.mu.Lock()
	defer h.mu.Unlock()
	previous = make([]recordedCall, len(calls))
	for i, c := range calls {
		previous[i], _ = h.get(c.prev)
	}
	return calls, previous
}

// snapshot copies the calls with an id above since, newest first.
func (h *History) snapshot(since uint64) []recordedCall {
	h.mu.Lock()
	defer h.mu.Unlock()
	var out []recordedCall
	for id := h.nextID - 1; id > since; id-- {
		c, ok := h.get(id)
		if !ok {
			break
		}
		out = append(out, c)
	}
	return out
}

// controllerStats is what a controller's overview shows of the last hour.
type controllerStats struct {
	minutes [60]minuteStats // by minute of the hour
}

// minuteStats is one minute: calls, errors and a latency histogram.
type minuteStats struct {
	minute     int64 // Unix minute; a slot of another minute is stale
	calls      int
	errors     int
	syncErrors int
	latency    [latencyBuckets]uint32
}

func (s *controllerStats) at(t time.Time) *minuteStats {
	minute := t.Unix() / 60
	m := &s.minutes[minute%60]
	if m.minute != minute {
		*m = minuteStats{minute: minute}
	}
	return m
}

func (s *controllerStats) addCall(start time.Time, d time.Duration, failed bool) {
	m := s.at(start)
	m.calls++
	if failed {
		m.errors++
	}
	m.latency[latencyBucket(d)]++
}

func (s *controllerStats) addSyncError(t time.Time) { s.at(t).syncErrors++ }

// lastHour returns the minutes of the hour before now that hold anything, oldest
// first, and the sync errors among them.
func (s *controllerStats) lastHour(now time.Time) (minutes []minuteStats, syncErrors int) {
	current := now.Unix() / 60
	for _, m := range s.minutes {
		if m.minute > current-60 && m.minute <= current && (m.calls > 0 || m.syncErrors > 0) {
			minutes = append(minutes, m)
			syncErrors += m.syncErrors
		}
	}
	sort.Slice(minutes, func(i, j int) bool { return minutes[i].minute < minutes[j].minute })
	return minutes, syncErrors
}

// Latency buckets grow by a quarter from 100µs: 80 of them reach past 10 minutes, and
// a percentile read from them is within 12% of the true value.
const (
	latencyBuckets = 80
	latencyBase    = 100 * time.Microsecond
	latencyGrowth  = 1.25
)

var latencyBounds = func() (b [latencyBuckets]time.Duration) {
	upper := float64(latencyBase)
	for i := range b {
		b[i] = time.Duration(upper)
		upper *= latencyGrowth
	}
	return b
}()

// latencyBucket is the first bucket whose upper bound holds d.
func latencyBucket(d time.Duration) int {
	i := sort.Search(latencyBuckets, func(i int) bool { return latencyBounds[i] >= d })
	return min(i, latencyBuckets-1)
}

// percentile reads the q-th quantile (0 < q <= 1) from a histogram as the geometric
// middle of its bucket.
func percentile(h *[latencyBuckets]uint32, q float64) time.Duration {
	var total uint64
	for _, n := range h {
		total += uint64(n)
	}
	if total == 0 {
		return 0
	}
	rank := uint64(q*float64(total) + 0.999999)
	var seen uint64
	for i, n := range h {
		seen += uint64(n)
		if seen >= max(rank, 1) {
			if i == 0 {
				return latencyBounds[0] / 2
			}
			return time.Duration(float64(latencyBounds[i]) / 1.118) // sqrt(1.25)
		}
	}
	return latencyBounds[latencyBuckets-1]
}

// lastHour is a controller's latency per minute and its sync errors in the last hour.
func (h *History) lastHour(kind, name string) ([]engineapi.LatencyPoint, int) {
	if h == nil {
		return nil, 0
	}
	h.mu.Lock()
	defer h.mu.Unlock()
	s := h.stats[controllerKey{kind: kind, name: name}]
	if s == nil {
		return nil, 0
	}
	minutes, syncErrors := s.lastHour(h.now())
	var points []engineapi.LatencyPoint
	for i := range minutes {
		m := &minutes[i]
		if m.calls == 0 {
			continue
		}
		points = append(points, engineapi.LatencyPoint{
			Minute: unixMinute(m.minute), Calls: m.calls, Errors: m.errors,
			P50MS: ms(percentile(&m.latency, 0.5)), P95MS: ms(percentile(&m.latency, 0.95)),
		})
	}
	return points, syncErrors
}
