package engine

import (
	"context"
	"sync"
	"time"

	"k8s.io/client-go/util/workqueue"
)

// resyncer syncs every parent at least once per resync period (resyncPeriodSeconds),
// counted from the parent's last sync, whatever caused it. Upstream queues every parent
// on a ticker instead, so a parent that an event synced a moment ago is synced again
// at the next tick, and a round of thousands of resyncs lands in the queue at once,
// where real changes wait behind it. Here a parent is due one period after its last
// sync, and a due parent waits while the work queue holds a backlog: resyncs take the
// workers only when events leave them idle, and never wait more than one more period.
type resyncer struct {
	period time.Duration
	// timers fires a parent's key when it may be due; one entry per parent, the
	// earliest time wins.
	timers workqueue.TypedDelayingInterface[parentKey]

	mu   sync.Mutex
	last map[parentKey]time.Time // when each known parent was last synced
}

// resyncPoll is how often a due parent checks whether the backlog has cleared.
const resyncPoll = 20 * time.Millisecond

func newResyncer(period time.Duration) *resyncer {
	return &resyncer{
		period: period,
		timers: workqueue.NewTypedDelayingQueue[parentKey](),
		last:   map[parentKey]time.Time{},
	}
}

// synced records that key was just synced: its next resync is a period away.
func (r *resyncer) synced(key parentKey) {
	r.mu.Lock()
	r.last[key] = time.Now()
	r.mu.Unlock()
	r.timers.AddAfter(key, r.period)
}

// forget drops a deleted parent; a timer still pending for it fires into nothing.
func (r *resyncer) forget(key parentKey) {
	r.mu.Lock()
	delete(r.last, key)
	r.mu.Unlock()
}

// due returns how long key still has until its resync, and whether it is known.
func (r *resyncer) due(key parentKey) (time.Duration, bool) {
	r.mu.Lock()
	defer r.mu.Unlock()
	last, ok := r.last[key]
	if !ok {
		return 0, false
	}
	return time.Until(last.Add(r.period)), true
}

// run hands due parents to enqueue until ctx ends. exists tells whether a parent is
// still in the cache; backlog whether the work queue is busy, in which case a due
// parent waits, for at most one period.
func (r *resyncer) run(ctx context.Context, exists func(parentKey) bool, backlog func() bool, enqueue func(parentKey)) {
	go func() {
		<-ctx.Done()
		r.timers.ShutDown()
	}()
	for {
		key, quit := r.timers.Get()
		if quit {
			return
		}
		r.timers.Done(key)
		left, known := r.due(key)
		switch {
		case !known:
			continue
		case left > 0: // synced since this timer was set
			r.timers.AddAfter(key, left)
			continue
		case !exists(key):
			r.forget(key)
			continue
		}
		for waited := time.Duration(0); backlog() && waited < r.period; waited += resyncPoll {
			select {
			case <-ctx.Done():
				return
			case <-time.After(resyncPoll):
			}
		}
		enqueue(key)
	}
}
