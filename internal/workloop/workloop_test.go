package workloop

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/go-logr/logr/funcr"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
	"k8s.io/client-go/util/workqueue"
	"k8s.io/klog/v2"
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
	// Every key is queued before the first is processed, so that one its 1 ms
	// backoff brings back comes after them all, however slow the machine.
	keys := []string{"ok", "panics", "transient", "terminal", "later"}
	for _, key := range keys {
		q.Add(key)
	}
	for range keys {
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

// A Hold keeps every processing of its key back until it passes; an After does not.
func TestHoldKeepsTheKeyBack(t *testing.T) {
	q := workqueue.NewTypedRateLimitingQueue(workqueue.DefaultTypedControllerRateLimiter[string]())
	defer q.ShutDown()
	calls := map[string]int{}
	l := &Loop[string]{Queue: q, Process: func(_ context.Context, key string) (time.Duration, error) {
		calls[key]++
		if key == "held" {
			return 0, Hold(time.Hour, errors.New("429"))
		}
		return 0, After(time.Hour, errors.New("cache filling"))
	}}
	for range 2 {
		for _, key := range []string{"held", "delayed"} {
			if after, err := l.Handle(context.Background(), key); err == nil && after <= 0 {
				t.Fatalf("%s: no delay", key)
			}
		}
	}
	if calls["held"] != 1 || calls["delayed"] != 2 {
		t.Errorf("calls %v, want held once (then held back) and delayed twice", calls)
	}
	if held, delayed := l.Held("held"), l.Held("delayed"); held < 59*time.Minute || delayed != 0 {
		t.Errorf("Held: %s and %s, want about an hour for the held key and nothing for the delayed one", held, delayed)
	}
}

// The metrics count results and panics, and every processing has a reconcile ID.
func TestMetricsAndReconcileID(t *testing.T) {
	reg := prometheus.NewRegistry()
	m := NewMetrics(reg, MetricsOptions{Prefix: "test", Label: "loop", Item: "thing"})
	var ids []string
	ctx := klog.NewContext(context.Background(), funcr.New(func(_, args string) {
		_, id, _ := strings.Cut(args, `"reconcileID"=`)
		ids = append(ids, id)
	}, funcr.Options{}))
	l := &Loop[string]{Queue: workqueue.NewTypedRateLimitingQueue(workqueue.DefaultTypedControllerRateLimiter[string]()), Metrics: m, Name: "things",
		Process: func(ctx context.Context, key string) (time.Duration, error) {
			klog.FromContext(ctx).Info("Processing")
			if key == "panics" {
				panic("boom")
			}
			return 0, nil
		}}
	defer l.Queue.ShutDown()
	for _, key := range []string{"ok", "panics"} {
		_, _ = l.Handle(ctx, key)
	}
	want := `
		# HELP test_sync_panics_total Thing syncs that panicked, by loop (each also counts as an error).
		# TYPE test_sync_panics_total counter
		test_sync_panics_total{loop="things"} 1
		# HELP test_syncs_total Thing syncs by loop and result (success, error, or what else the loop names).
		# TYPE test_syncs_total counter
		test_syncs_total{loop="things",result="error"} 1
		test_syncs_total{loop="things",result="success"} 1
	`
	if err := testutil.GatherAndCompare(reg, strings.NewReader(want), "test_syncs_total", "test_sync_panics_total"); err != nil {
		t.Error(err)
	}
	if len(ids) < 2 || ids[0] == "" || ids[0] == ids[1] {
		t.Errorf("reconcile IDs %v, want two different ones", ids)
	}
	m.Forget("things")
	if n, _ := testutil.GatherAndCount(reg); n != 0 {
		t.Errorf("%d series left after Forget", n)
	}
}

// A loop's Result labels the errors its caller takes for no failure; the others,
// panics included, stay errors.
func TestResultLabelsErrors(t *testing.T) {
	reg := prometheus.NewRegistry()
	m := NewMetrics(reg, MetricsOptions{Prefix: "test", Label: "loop", Item: "thing"})
	errConflict := errors.New("conflict")
	l := &Loop[string]{Queue: workqueue.NewTypedRateLimitingQueue(workqueue.DefaultTypedControllerRateLimiter[string]()), Metrics: m, Name: "things",
		Process: func(_ context.Context, key string) (time.Duration, error) {
			switch key {
			case "conflicts":
				return 0, fmt.Errorf("write: %w", errConflict)
			case "fails":
				return 0, errors.New("failed")
			case "panics":
				panic("boom")
			}
			return 0, nil
		},
		Result: func(err error) string {
			if errors.Is(err, errConflict) {
				return "conflict"
			}
			return ""
		}}
	defer l.Queue.ShutDown()
	for _, key := range []string{"ok", "conflicts", "conflicts", "fails", "panics"} {
		_, _ = l.Handle(context.Background(), key)
	}
	want := `
		# HELP test_syncs_total Thing syncs by loop and result (success, error, or what else the loop names).
		# TYPE test_syncs_total counter
		test_syncs_total{loop="things",result="conflict"} 2
		test_syncs_total{loop="things",result="error"} 2
		test_syncs_total{loop="things",result="success"} 1
	`
	if err := testutil.GatherAndCompare(reg, strings.NewReader(want), "test_syncs_total"); err != nil {
		t.Error(err)
	}
}
