package gateway

import (
	"net/http"
	"net/http/httptest"
	"sync"
	"testing"

	"github.com/go-chi/chi/v5"
)

// TestCallsPerFunctionAreCapped: with the cap reached, a function's next call answers
// 429 with Retry-After while other functions still run; the slots come back when calls
// end, and nothing is left for functions no longer called.
func TestCallsPerFunctionAreCapped(t *testing.T) {
	const limit = 3
	g := &Gateway{calls: newCallLimiter(limit)}
	entered, release := make(chan struct{}), make(chan struct{})
	r := chi.NewRouter()
	r.Post("/hooks/{namespace}/{name}", g.limitCalls(func(w http.ResponseWriter, r *http.Request) {
		if chi.URLParam(r, "name") == "slow" {
			entered <- struct{}{}
			<-release
		}
		w.WriteHeader(http.StatusOK)
	}))
	call := func(name string) *httptest.ResponseRecorder {
		w := httptest.NewRecorder()
		r.ServeHTTP(w, httptest.NewRequest(http.MethodPost, "/hooks/ns/"+name, nil))
		return w
	}
	var wg sync.WaitGroup
	for range limit {
		wg.Add(1)
		go func() { defer wg.Done(); call("slow") }()
		<-entered
	}
	w := call("slow")
	if w.Code != http.StatusTooManyRequests || w.Header().Get("Retry-After") != "1" {
		t.Fatalf("call past the cap = %d, Retry-After %q; want 429 and 1", w.Code, w.Header().Get("Retry-After"))
	}
	if w := call("fast"); w.Code != http.StatusOK {
		t.Errorf("another function while one is full = %d, want 200", w.Code)
	}
	close(release)
	wg.Wait()
	if w := call("fast"); w.Code != http.StatusOK {
		t.Errorf("after the calls ended = %d, want 200", w.Code)
	}
	if n := len(g.calls.busy); n != 0 {
		t.Errorf("the limiter still counts %d functions with no call running", n)
	}
}

// TestServerTimeouts: every timeout is set, and a response may take as long as the
// longest function timeout.
func TestServerTimeouts(t *testing.T) {
	srv := NewServer(http.NotFoundHandler())
	if srv.ReadHeaderTimeout <= 0 || srv.ReadTimeout <= 0 || srv.WriteTimeout <= 0 || srv.IdleTimeout <= 0 {
		t.Fatalf("timeouts: header %v, read %v, write %v, idle %v", srv.ReadHeaderTimeout, srv.ReadTimeout, srv.WriteTimeout, srv.IdleTimeout)
	}
	if srv.WriteTimeout <= maxFunctionTimeout {
		t.Errorf("write timeout %v does not leave room for a %v call", srv.WriteTimeout, maxFunctionTimeout)
	}
}
