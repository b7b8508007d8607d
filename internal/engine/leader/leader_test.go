package leader

import (
	"context"
	"encoding/json"
	"errors"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/tools/leaderelection/resourcelock"
)

func TestLeaderElectionNamespaceInCluster(t *testing.T) {
	file := filepath.Join(t.TempDir(), "namespace")
	if err := os.WriteFile(file, []byte("metacontroller\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	o := Defaults()
	o.Enabled, o.NamespaceFile = true, file
	if err := o.Validate(); err != nil {
		t.Fatal(err)
	}
	if o.Namespace != "metacontroller" {
		t.Errorf("namespace = %q, want the pod's namespace", o.Namespace)
	}
}

func TestInvalidLeaderElectionIsRefused(t *testing.T) {
	for _, tt := range []struct {
		name string
		set  func(*Options)
		want string
	}{
		{"configmap lock", func(o *Options) { o.ResourceLock = "configmapsleases" }, `--leader-election-resource-lock "configmapsleases" is not supported: the only lock is "leases"`},
		{"endpoints lock, election off", func(o *Options) { o.Enabled = false; o.ResourceLock = "endpoints" }, `"endpoints" is not supported`},
		{"out of cluster without namespace", func(o *Options) { o.Namespace = "" }, "--leader-election-namespace is required when running outside a cluster"},
		{"empty id", func(o *Options) { o.ID = "" }, "--leader-election-id"},
		{"renew deadline not below lease", func(o *Options) { o.RenewDeadline = o.LeaseDuration }, "lease duration (15s) > renew deadline (15s)"},
		{"retry period too long", func(o *Options) { o.RetryPeriod = 9 * time.Second }, "retry period (9s)"},
		{"no retry period", func(o *Options) { o.RetryPeriod = 0 }, "retry period (0s) > 0"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			o := Defaults()
			o.Enabled, o.Namespace, o.NamespaceFile = true, "ops", filepath.Join(t.TempDir(), "absent")
			tt.set(&o)
			if err := o.Validate(); err == nil || !strings.Contains(err.Error(), tt.want) {
				t.Errorf("validate() = %v, want an error containing %q", err, tt.want)
			}
		})
	}
}

// memoryStore is one lease record in memory, shared by the electors of a test. Like
// a Lease, a write fails with a conflict unless the writer read the latest version.
type memoryStore struct {
	mu      sync.Mutex
	rec     *resourcelock.LeaderElectionRecord
	version int
	failing bool
	// onWrite sees every record written.
	onWrite func(resourcelock.LeaderElectionRecord)
}

func (s *memoryStore) setFailing(v bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.failing = v
}

func (s *memoryStore) holder() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.rec == nil {
		return ""
	}
	return s.rec.HolderIdentity
}

// memoryLock is one elector's view of a memoryStore.
type memoryLock struct {
	store    *memoryStore
	identity string
	version  int // of the record last read or written
}

var (
	errUnreachable = errors.New("the API server is unreachable")
	leases         = schema.GroupResource{Group: "coordination.k8s.io", Resource: "leases"}
)

func (l *memoryLock) Get(context.Context) (*resourcelock.LeaderElectionRecord, []byte, error) {
	l.store.mu.Lock()
	defer l.store.mu.Unlock()
	switch {
	case l.store.failing:
		return nil, nil, errUnreachable
	case l.store.rec == nil:
		return nil, nil, apierrors.NewNotFound(leases, "engine")
	}
	l.version = l.store.version
	rec := *l.store.rec
	// The raw record changes on every write, as a Lease's does when renewals are at
	// least a second apart (its times are marshalled to the second).
	raw, err := json.Marshal(struct {
		Record  resourcelock.LeaderElectionRecord
		Version int
	}{rec, l.version})
	return &rec, raw, err
}

func (l *memoryLock) Create(_ context.Context, rec resourcelock.LeaderElectionRecord) error {
	l.store.mu.Lock()
	defer l.store.mu.Unlock()
	if l.store.rec != nil {
		return apierrors.NewAlreadyExists(leases, "engine")
	}
	return l.write(rec)
}

func (l *memoryLock) Update(_ context.Context, rec resourcelock.LeaderElectionRecord) error {
	l.store.mu.Lock()
	defer l.store.mu.Unlock()
	if l.version != l.store.version {
		return apierrors.NewConflict(leases, "engine", errors.New("the lease changed since it was read"))
	}
	return l.write(rec)
}

func (l *memoryLock) write(rec resourcelock.LeaderElectionRecord) error {
	if l.store.failing {
		return errUnreachable
	}
	l.store.rec = &rec
	l.store.version++
	l.version = l.store.version
	if l.store.onWrite != nil {
		l.store.onWrite(rec)
	}
	return nil
}

func (l *memoryLock) RecordEvent(string) {}
func (l *memoryLock) Identity() string   { return l.identity }
func (l *memoryLock) Describe() string   { return "memory/engine" }

func testLeader(t *testing.T, store *memoryStore, identity string) *Elector {
	t.Helper()
	o := Defaults()
	o.Enabled, o.Namespace = true, "ops"
	o.LeaseDuration, o.RenewDeadline, o.RetryPeriod = 600*time.Millisecond, 400*time.Millisecond, 100*time.Millisecond
	l, err := newWithLock(&memoryLock{store: store, identity: identity}, o)
	if err != nil {
		t.Fatal(err)
	}
	return l
}

// elected is a leader's run, with work that signals when it starts.
type elected struct {
	working chan struct{}
	done    chan struct{} // closed when run returned
	err     error         // what run returned, once done is closed
	cancel  context.CancelFunc
	workCtx atomic.Pointer[context.Context]
}

// runElected runs l until the test ends; stopping is called when work is cancelled.
func runElected(t *testing.T, l *Elector, stopping func()) *elected {
	e := &elected{working: make(chan struct{}), done: make(chan struct{})}
	ctx, cancel := context.WithCancel(context.Background())
	e.cancel = cancel
	go func() {
		defer close(e.done)
		e.err = l.Run(ctx, func(ctx context.Context) error {
			e.workCtx.Store(&ctx)
			close(e.working)
			<-ctx.Done()
			if stopping != nil {
				stopping()
			}
			return nil
		})
	}()
	t.Cleanup(func() {
		cancel()
		select {
		case <-e.done:
		case <-time.After(10 * time.Second):
			t.Error("the elector did not stop")
		}
	})
	return e
}

func waitClosed(t *testing.T, ch <-chan struct{}, what string) {
	t.Helper()
	select {
	case <-ch:
	case <-time.After(10 * time.Second):
		t.Fatalf("timed out waiting until %s", what)
	}
}

func TestLeaderReleasesTheLeaseOnlyAfterWorkStopped(t *testing.T) {
	store := &memoryStore{}
	var workStopped, releasedEarly atomic.Bool
	store.onWrite = func(rec resourcelock.LeaderElectionRecord) {
		if rec.HolderIdentity == "" && !workStopped.Load() {
			releasedEarly.Store(true)
		}
	}
	e := runElected(t, testLeader(t, store, "a"), func() {
		time.Sleep(300 * time.Millisecond) // a sync finishing its writes
		workStopped.Store(true)
	})
	waitClosed(t, e.working, "the leader works")
	e.cancel()
	waitClosed(t, e.done, "run returns")
	if e.err != nil {
		t.Fatalf("run = %v, want nil after a cancel", e.err)
	}
	if store.holder() != "" {
		t.Errorf("lease holder after shutdown = %q, want it released", store.holder())
	}
	if releasedEarly.Load() {
		t.Error("the lease was released while work was still stopping")
	}
}

func TestLeaderStopsWorkWhenItCannotRenew(t *testing.T) {
	store := &memoryStore{}
	e := runElected(t, testLeader(t, store, "a"), nil)
	waitClosed(t, e.working, "the leader works")
	store.setFailing(true)
	waitClosed(t, e.done, "run returns after renewals started failing")
	if !errors.Is(e.err, errLeaseLost) {
		t.Errorf("run = %v, want %v", e.err, errLeaseLost)
	}
	if ctx := *e.workCtx.Load(); ctx.Err() == nil {
		t.Error("work was not cancelled when run returned")
	}
}

func TestFollowerWaitsForTheLeaseThenTakesOver(t *testing.T) {
	store := &memoryStore{}
	a := testLeader(t, store, "a")
	runA := runElected(t, a, nil)
	waitClosed(t, runA.working, "a leads")
	b := testLeader(t, store, "b")
	runB := runElected(t, b, nil)
	// Three lease durations: b must not work while a renews.
	select {
	case <-runB.working:
		t.Fatal("the follower started working while the leader held the lease")
	case <-time.After(1800 * time.Millisecond):
	}
	rec := httptest.NewRecorder()
	Readyz(func() bool { return false }, b)(rec, httptest.NewRequest(http.MethodGet, "/readyz", nil))
	if body := rec.Body.String(); rec.Code != 200 || !strings.Contains(body, "ok: follower\nidentity: b\nleader: a\n") {
		t.Errorf("follower /readyz = %d %q", rec.Code, body)
	}
	if leader, standby := b.Standby(); leader != "a" || !standby {
		t.Errorf("follower Standby() = %q, %t; want a, true", leader, standby)
	}
	if leader, standby := a.Standby(); leader != "a" || standby {
		t.Errorf("leader Standby() = %q, %t; want a, false", leader, standby)
	}
	rec = httptest.NewRecorder()
	Readyz(func() bool { return false }, a)(rec, httptest.NewRequest(http.MethodGet, "/readyz", nil))
	if rec.Code != http.StatusServiceUnavailable {
		t.Errorf("leader /readyz before its caches sync = %d, want 503", rec.Code)
	}
	rec = httptest.NewRecorder()
	Readyz(func() bool { return true }, a)(rec, httptest.NewRequest(http.MethodGet, "/readyz", nil))
	if body := rec.Body.String(); rec.Code != 200 || !strings.HasPrefix(body, "ok: leader\nidentity: a\n") {
		t.Errorf("leader /readyz = %d %q", rec.Code, body)
	}

	runA.cancel()
	waitClosed(t, runB.working, "b takes over once a released the lease")
	if store.holder() != "b" {
		t.Errorf("lease holder = %q, want b", store.holder())
	}
}
