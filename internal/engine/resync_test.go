package engine

import (
	"context"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

// resyncRun runs r and records when each key is handed over.
type resyncRun struct {
	mu      sync.Mutex
	handed  map[parentKey][]time.Time
	gone    map[parentKey]bool
	backlog atomic.Bool
}

func startResyncer(t *testing.T, r *resyncer) *resyncRun {
	t.Helper()
	run := &resyncRun{handed: map[parentKey][]time.Time{}, gone: map[parentKey]bool{}}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() {
		defer close(done)
		r.run(ctx, func(k parentKey) bool {
			run.mu.Lock()
			defer run.mu.Unlock()
			return !run.gone[k]
		}, run.backlog.Load, func(k parentKey) {
			run.mu.Lock()
			run.handed[k] = append(run.handed[k], time.Now())
			run.mu.Unlock()
		})
	}()
	t.Cleanup(func() { cancel(); <-done })
	return run
}

func (run *resyncRun) times(k parentKey) []time.Time {
	run.mu.Lock()
	defer run.mu.Unlock()
	return append([]time.Time(nil), run.handed[k]...)
}

func waitHanded(t *testing.T, run *resyncRun, k parentKey, n int) []time.Time {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for time.Now().Before(deadline) {
		if got := run.times(k); len(got) >= n {
			return got
		}
		time.Sleep(5 * time.Millisecond)
	}
	t.Fatalf("%v was not resynced %d times in 10 s: %v", k, n, run.times(k))
	return nil
}

// A parent is due one period after its last sync, whatever caused that sync: a sync
// in between moves its resync back.
func TestResyncCountsFromTheLastSync(t *testing.T) {
	const period = 300 * time.Millisecond
	r := newResyncer(period)
	run := startResyncer(t, r)
	a, b := parentKey{name: "a"}, parentKey{name: "b"}
	r.synced(a)
	r.synced(b)
	time.Sleep(period / 2)
	// An event synced b half a period later. The time is taken before the
	// resyncer records its own, so that a test goroutine descheduled between
	// the two cannot make a resync on time look early (a CI run saw 2 ms).
	bSynced := time.Now()
	r.synced(b)

	got := waitHanded(t, run, b, 1)
	if early := bSynced.Add(period).Sub(got[0]); early > 0 {
		t.Errorf("b was resynced %v before a period had passed since its last sync", early)
	}
	if n := len(run.times(b)); n != 1 {
		t.Errorf("b was handed over %d times for one due resync", n)
	}
	waitHanded(t, run, a, 1)
	// Nothing is handed over again until the engine reports the sync.
	time.Sleep(2 * period)
	if n := len(run.times(a)); n != 1 {
		t.Errorf("a was handed over %d times without being synced in between", n)
	}
	r.synced(a)
	waitHanded(t, run, a, 2)
}

// A due parent waits while the work queue has a backlog, and goes as soon as it has
// none; it waits one period at most.
func TestResyncWaitsForTheBacklog(t *testing.T) {
	const period = time.Second
	r := newResyncer(period)
	run := startResyncer(t, r)
	k := parentKey{name: "k"}
	run.backlog.Store(true)
	r.synced(k)
	time.Sleep(period + period/2)
	if got := run.times(k); len(got) != 0 {
		t.Fatalf("resynced during a backlog, half a period after it was due: %v", got)
	}
	run.backlog.Store(false)
	waitHanded(t, run, k, 1)

	// A backlog that never clears delays a resync by one period, not forever.
	run.backlog.Store(true)
	r.synced(k)
	waitHanded(t, run, k, 2)
}

// A deleted parent is never resynced: not after forget, and not when it is no longer
// in the cache.
func TestResyncForgetsDeletedParents(t *testing.T) {
	const period = 100 * time.Millisecond
	r := newResyncer(period)
	run := startResyncer(t, r)
	forgotten, vanished, kept := parentKey{name: "forgotten"}, parentKey{name: "vanished"}, parentKey{name: "kept"}
	run.mu.Lock()
	run.gone[vanished] = true
	run.mu.Unlock()
	r.synced(forgotten)
	r.synced(vanished)
	r.synced(kept)
	r.forget(forgotten)
	waitHanded(t, run, kept, 1)
	time.Sleep(3 * period)
	if got := run.times(forgotten); len(got) != 0 {
		t.Errorf("a forgotten parent was resynced: %v", got)
	}
	if got := run.times(vanished); len(got) != 0 {
		t.Errorf("a parent gone from the cache was resynced: %v", got)
	}
	if _, known := r.due(vanished); known {
		t.Error("a parent gone from the cache is still tracked")
	}
}
