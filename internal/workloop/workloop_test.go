package workloop

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"testing"
	"time"

	"k8s.io/client-go/util/workqueue"
)

// recordingLimiter counts backoff requests and forgets per key.
type recordingLimiter struct {
	mu        sync.Mutex
	limited   map[string]int
	forgotten map[string]int
}

func (r *recordingLimiter) When(key string) time.Duration {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.limited[key]++
	return time.Millisecond
}

func (r *recordingLimiter) Forget(key string) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.forgotten[key]++
}

func (r *recordingLimiter) NumRequeues(key string) int {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.limited[key]
}

func TestResultsRequeueAsTheySay(t *testing.T) {
	limiter := &recordingLimiter{limited: map[string]int{}, forgotten: map[string]int{}}
	q := workqueue.NewTypedRateLimitingQueue[string](limiter)
	defer q.ShutDown()
	var failures []string
	l := &Loop[string]{
		Queue: q,
		Process: func(_ context.Context, key string) (time.Duration, error) {
			switch key {
			case "panics":
				panic("boom")
			case "transient":
				return 0, errors.New("try again")
			case "terminal":
				return 0, Terminal(errors.New("invalid spec"))
			case "later":
				return time.Hour, nil
			}
			return 0, nil
		},
		Failed: func(_ context.Context, key string, err error, terminal bool) {
			failures = append(failures, fmt.Sprintf("%s terminal=%v: %v", key, terminal, err))
		},
	}
	for _, key := range []string{"ok", "panics", "transient", "terminal", "later"} {
		q.Add(key)
		if !l.ProcessNext(context.Background()) {
			t.Fatal("queue shut down")
		}
	}
	want := []string{
		"panics terminal=false: panic: boom",
		"transient terminal=false: try again",
		"terminal terminal=true: invalid spec",
	}
	if fmt.Sprint(failures) != fmt.Sprint(want) {
		t.Errorf("failures:\n%q\nwant\n%q", failures, want)
	}
	for key, backoffs := range map[string]int{"ok": 0, "panics": 1, "transient": 1, "terminal": 0, "later": 0} {
		if got := limiter.NumRequeues(key); got != backoffs {
			t.Errorf("%s: %d backoff requeues, want %d", key, got, backoffs)
		}
	}
	for key, forgets := range map[string]int{"ok": 1, "terminal": 1, "later": 1, "transient": 0} {
		if got := limiter.forgotten[key]; got != forgets {
			t.Errorf("%s: forgotten %d times, want %d", key, got, forgets)
		}
	}
	// The panicking and transient keys come back after their backoff; "later" waits
	// an hour and the terminal key never returns.
	deadline := time.After(5 * time.Second)
	got := map[string]bool{}
	for len(got) < 2 {
		select {
		case <-deadline:
			t.Fatalf("requeued keys seen: %v", got)
		default:
		}
		if q.Len() == 0 {
			time.Sleep(5 * time.Millisecond)
			continue
		}
		key, _ := q.Get()
		got[key] = true
		q.Done(key)
	}
	if !got["panics"] || !got["transient"] {
		t.Errorf("requeued keys %v, want panics and transient", got)
	}
}

func TestRunStopsWithTheContext(t *testing.T) {
	q := workqueue.NewTypedRateLimitingQueue(workqueue.DefaultTypedControllerRateLimiter[int]())
	processed := make(chan int, 10)
	l := &Loop[int]{Queue: q, Workers: 3, Process: func(_ context.Context, k int) (time.Duration, error) {
		processed <- k
		return 0, nil
	}}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { l.Run(ctx); close(done) }()
	for i := range 5 {
		q.Add(i)
	}
	for range 5 {
		<-processed
	}
	cancel()
	select {
	case <-done:
	case <-time.After(5 * time.Second):
		t.Fatal("Run did not return after the context ended")
	}
	if !q.ShuttingDown() {
		t.Error("the queue was not shut down")
	}
}
