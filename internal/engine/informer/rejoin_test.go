package informer

import (
	"context"
	"errors"
	"fmt"
	"net"
	"os"
	"syscall"
	"testing"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/apimachinery/pkg/watch"
)

// scripted answers each list or watch with the next error of its script, then
// succeeds.
type scripted struct {
	errs  []error
	calls int
}

func (s *scripted) next() error {
	s.calls++
	if len(s.errs) == 0 {
		return nil
	}
	err := s.errs[0]
	s.errs = s.errs[1:]
	return err
}

func (s *scripted) ListWithContext(context.Context, metav1.ListOptions) (runtime.Object, error) {
	if err := s.next(); err != nil {
		return nil, err
	}
	return &unstructured.UnstructuredList{}, nil
}

func (s *scripted) WatchWithContext(context.Context, metav1.ListOptions) (watch.Interface, error) {
	if err := s.next(); err != nil {
		return nil, err
	}
	return watch.NewEmptyWatch(), nil
}

func fastRejoin(lw *scripted) *rejoining {
	r := rejoin(lw, "configmaps")
	r.backoff = wait.Backoff{Duration: time.Millisecond, Factor: 1, Steps: 1 << 30}
	return r
}

// refused is the error of a request to an API server that does not listen.
func refused() error {
	return &net.OpError{Op: "dial", Net: "tcp", Err: os.NewSyscallError("connect", syscall.ECONNREFUSED)}
}

var parents = schema.GroupResource{Group: "ha.metalambda.dev", Resource: "parents"}

// TestRejoinRetriesWhileTheAPIServerIsUnavailable: the failures of an API server that
// is down, shutting down or starting are retried in place until the request
// succeeds, so that the reflector's backoff never sees them.
func TestRejoinRetriesWhileTheAPIServerIsUnavailable(t *testing.T) {
	outage := func() []error {
		return []error{
			refused(),
			fmt.Errorf("Get \"https://127.0.0.1:6443/api/v1/configmaps\": %w", refused()),
			apierrors.NewServiceUnavailable("the server is currently unable to handle the request"),
			apierrors.NewTooManyRequests("the watch cache is not ready", 1),
			errors.New("http2: server sent GOAWAY and closed the connection; LastStreamID=327, ErrCode=NO_ERROR"),
			&net.OpError{Op: "read", Net: "tcp", Err: os.NewSyscallError("read", syscall.ECONNRESET)},
		}
	}
	lw := &scripted{errs: outage()}
	if w, err := fastRejoin(lw).WatchWithContext(context.Background(), metav1.ListOptions{}); err != nil || w == nil {
		t.Fatalf("watch: %v, %v; want a watch once the API server answers", w, err)
	}
	if lw.calls != 7 {
		t.Errorf("watch: %d attempts, want 7 (6 failures, then the watch)", lw.calls)
	}
	lw = &scripted{errs: outage()}
	if _, err := fastRejoin(lw).List(metav1.ListOptions{}); err != nil {
		t.Fatalf("list: %v; want the list once the API server answers", err)
	}
	if lw.calls != 7 {
		t.Errorf("list: %d attempts, want 7 (6 failures, then the list)", lw.calls)
	}
}

// TestRejoinReturnsRefusals: what the API server refuses goes to the reflector at
// once: a 410 Gone makes it list again, a 404 or 403 is logged by it.
func TestRejoinReturnsRefusals(t *testing.T) {
	for _, refusal := range []error{
		apierrors.NewResourceExpired("too old resource version: 1193 (1325)"),
		apierrors.NewNotFound(parents, ""),
		apierrors.NewForbidden(parents, "", errors.New("no RBAC")),
		apierrors.NewInternalError(errors.New("boom")),
	} {
		lw := &scripted{errs: []error{refused(), refusal}}
		_, err := fastRejoin(lw).WatchWithContext(context.Background(), metav1.ListOptions{})
		if !errors.Is(err, refusal) || lw.calls != 2 {
			t.Errorf("after %q: %v in %d attempts, want the refusal in 2", refusal, err, lw.calls)
		}
	}
}

// TestRejoinStopsWithItsContext: an informer that stops while the API server is down
// stops retrying, with the last failure.
func TestRejoinStopsWithItsContext(t *testing.T) {
	errs := make([]error, 1000)
	for i := range errs {
		errs[i] = refused()
	}
	lw := &scripted{errs: errs}
	r := rejoin(lw, "configmaps")
	r.backoff = wait.Backoff{Duration: 10 * time.Millisecond, Factor: 1, Steps: 1 << 30}
	ctx, cancel := context.WithCancel(context.Background())
	go func() {
		time.Sleep(50 * time.Millisecond)
		cancel()
	}()
	done := make(chan error)
	go func() {
		_, err := r.ListWithContext(ctx, metav1.ListOptions{})
		done <- err
	}()
	select {
	case err := <-done:
		if !errors.Is(err, syscall.ECONNREFUSED) {
			t.Errorf("got %v, want the connection refused", err)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("the list still retries 10 s after its context ended")
	}
	if lw.calls >= len(errs) {
		t.Errorf("%d attempts: it did not stop", lw.calls)
	}
}

// TestRejoinBackoffStaysUnderASecond: however long the API server is away, an
// informer tries again at most a second after each failure.
func TestRejoinBackoffStaysUnderASecond(t *testing.T) {
	b := rejoinBackoff
	for i := range 100 {
		if d := b.Step(); d <= 0 || d > time.Second {
			t.Fatalf("attempt %d waits %s, want (0, 1s]", i+1, d)
		}
	}
}
