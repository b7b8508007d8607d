package hook

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	kjson "sigs.k8s.io/json"

	"github.com/metalambda/metalambda/internal/hookapi"
)

// serve starts a test server for handler and returns a loose endpoint for it.
func serve(t *testing.T, handler http.HandlerFunc) Endpoint {
	t.Helper()
	srv := httptest.NewServer(handler)
	t.Cleanup(srv.Close)
	return Endpoint{URL: srv.URL + "/sync", Timeout: 10 * time.Second}
}

// answer returns a handler that replies with code, headers and body.
func answer(code int, body string, headers ...string) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		for i := 0; i+1 < len(headers); i += 2 {
			w.Header().Set(headers[i], headers[i+1])
		}
		w.WriteHeader(code)
		_, _ = io.WriteString(w, body)
	}
}

// mustNameURL fails unless err's message contains the endpoint URL.
func mustNameURL(t *testing.T, err error, ep Endpoint) {
	t.Helper()
	if err == nil || !strings.Contains(err.Error(), ep.URL) {
		t.Errorf("error %q does not name %s", err, ep.URL)
	}
}

func TestCallRoundTrip(t *testing.T) {
	req := hookapi.CompositeRequest{
		Controller: hookapi.Object{"metadata": map[string]any{"name": "ctl"}},
		Parent:     hookapi.Object{"apiVersion": "example.com/v1", "kind": "Thing", "spec": map[string]any{"replicas": int64(3)}},
		Children:   hookapi.Objects{hookapi.TypeKey("ConfigMap", "v1"): hookapi.ObjectMap{"a": hookapi.Object{"kind": "ConfigMap"}}},
		Related:    hookapi.Objects{},
	}
	ep := serve(t, func(w http.ResponseWriter, r *http.Request) {
		if r.Method != http.MethodPost || r.Header.Get("Content-Type") != "application/json" ||
			r.Header.Get("Accept") != "application/json" {
			http.Error(w, "want POST with JSON headers", http.StatusBadRequest)
			return
		}
		var got hookapi.CompositeRequest
		body, _ := io.ReadAll(r.Body)
		if err := kjson.UnmarshalCaseSensitivePreserveInts(body, &got); err != nil {
			http.Error(w, err.Error(), http.StatusBadRequest)
			return
		}
		if diff := cmp.Diff(req, got); diff != "" {
			http.Error(w, "request (-sent +received):\n"+diff, http.StatusBadRequest)
			return
		}
		_, _ = io.WriteString(w, `{"status":{"ready":true},"children":[{"kind":"ConfigMap","data":{"n":"1"},"spec":{"replicas":3}}],"resyncAfterSeconds":1.5}`)
	})

	var got hookapi.CompositeResponse
	if err := new(Client).Call(context.Background(), ep, CallInfo{Controller: "ctl", Hook: HookSync}, req, &got); err != nil {
		t.Fatal(err)
	}
	want := hookapi.CompositeResponse{
		Status:             map[string]any{"ready": true},
		Children:           []hookapi.Object{{"kind": "ConfigMap", "data": map[string]any{"n": "1"}, "spec": map[string]any{"replicas": int64(3)}}},
		ResyncAfterSeconds: 1.5,
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("response (-want +got):\n%s", diff)
	}
}

func TestCallDecoding(t *testing.T) {
	tests := []struct {
		name    string
		strict  bool
		body    string
		want    hookapi.CompositeResponse
		wantErr string // substring of an ErrBadResponse
	}{{
		name:   "strict accepts a clean body",
		strict: true,
		body:   `{"finalized":true}`,
		want:   hookapi.CompositeResponse{Finalized: true},
	}, {
		name:    "strict rejects an unknown field",
		strict:  true,
		body:    `{"finalized":true,"extra":1}`,
		wantErr: `unknown field "extra"`,
	}, {
		name:    "strict rejects a duplicate field",
		strict:  true,
		body:    `{"finalized":true,"finalized":false}`,
		wantErr: `duplicate field "finalized"`,
	}, {
		name:    "strict is case-sensitive",
		strict:  true,
		body:    `{"Finalized":true}`,
		wantErr: `unknown field "Finalized"`,
	}, {
		name: "loose ignores an unknown field",
		body: `{"finalized":true,"extra":1}`,
		want: hookapi.CompositeResponse{Finalized: true},
	}, {
		name: "loose takes the last duplicate",
		body: `{"finalized":false,"finalized":true}`,
		want: hookapi.CompositeResponse{Finalized: true},
	}, {
		name:    "loose rejects a wrong type",
		body:    `{"finalized":"yes"}`,
		wantErr: "cannot unmarshal string",
	}, {
		name:    "not JSON",
		body:    `<html>oops</html>`,
		wantErr: `answered "<html>oops</html>"; want a JSON object`,
	}, {
		name:    "an object cut short",
		body:    `{"finalized":`,
		wantErr: "unexpected end of JSON input",
	}, {
		name:    "empty body",
		strict:  true,
		body:    ``,
		wantErr: "answered an empty body; want a JSON object",
	}}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			ep := serve(t, answer(http.StatusOK, tt.body))
			ep.Strict = tt.strict
			var got hookapi.CompositeResponse
			err := new(Client).Call(context.Background(), ep, CallInfo{}, hookapi.CompositeRequest{}, &got)
			if tt.wantErr != "" {
				if !errors.Is(err, ErrBadResponse) || !strings.Contains(err.Error(), tt.wantErr) {
					t.Fatalf("error = %v, want ErrBadResponse containing %q", err, tt.wantErr)
				}
				mustNameURL(t, err, ep)
				return
			}
			if err != nil {
				t.Fatalf("unexpected error: %v", err)
			}
			if diff := cmp.Diff(tt.want, got); diff != "" {
				t.Errorf("response (-want +got):\n%s", diff)
			}
		})
	}
}

// TestCallRefusesNonObjects checks that a 200 answer other than a JSON object is a
// bad response naming the hook, the URL and what came back, and leaves the response
// untouched: null used to decode as an empty response, deleting every child.
func TestCallRefusesNonObjects(t *testing.T) {
	tests := []struct {
		body string
		want string
	}{
		{`null`, `answered "null"; want a JSON object`},
		{` null ` + "\n", `answered "null"; want a JSON object`},
		{`[]`, `answered "[]"; want a JSON object`},
		{`[{"children":[]}]`, `answered "[{\"children\":[]}]"; want a JSON object`},
		{`""`, `answered "\"\""; want a JSON object`},
		{`"ok"`, `answered "\"ok\""; want a JSON object`},
		{`42`, `answered "42"; want a JSON object`},
		{`true`, `answered "true"; want a JSON object`},
		{``, `answered an empty body; want a JSON object`},
		{" \n\t", `answered an empty body; want a JSON object`},
		{strings.Repeat("7", 100), `answered "` + strings.Repeat("7", 64) + `"...; want a JSON object`},
	}
	for _, strict := range []bool{false, true} {
		for _, tt := range tests {
			t.Run(fmt.Sprintf("strict=%v/%q", strict, tt.body), func(t *testing.T) {
				ep := serve(t, answer(http.StatusOK, tt.body))
				ep.Strict = strict
				got := hookapi.CompositeResponse{Status: map[string]any{"kept": true}}
				err := new(Client).Call(context.Background(), ep, CallInfo{Controller: "ctl", Hook: HookSync}, nil, &got)
				if !errors.Is(err, ErrBadResponse) {
					t.Fatalf("error = %v, want ErrBadResponse", err)
				}
				if want := "sync hook " + ep.URL + " " + tt.want; !strings.Contains(err.Error(), want) {
					t.Errorf("error = %q, want it to contain %q", err, want)
				}
				if diff := cmp.Diff(hookapi.CompositeResponse{Status: map[string]any{"kept": true}}, got); diff != "" {
					t.Errorf("response changed (-want +got):\n%s", diff)
				}
			})
		}
	}
}

func TestCallStatusErrors(t *testing.T) {
	long := strings.Repeat("x", 3000)
	tests := []struct {
		name    string
		handler http.HandlerFunc
		want    error
	}{{
		name:    "500 keeps the body",
		handler: answer(http.StatusInternalServerError, "boom"),
		want:    &StatusError{Code: 500, Body: "boom"},
	}, {
		name:    "body cut at 1 KiB",
		handler: answer(http.StatusBadGateway, long),
		want:    &StatusError{Code: 502, Body: long[:MaxErrorBodyBytes]},
	}, {
		name:    "201 is not success",
		handler: answer(http.StatusCreated, "{}"),
		want:    &StatusError{Code: 201, Body: "{}"},
	}, {
		name:    "429 with Retry-After seconds",
		handler: answer(http.StatusTooManyRequests, "slow down", "Retry-After", "7"),
		want:    &ThrottledError{RetryAfter: 7 * time.Second},
	}, {
		name:    "429 without Retry-After",
		handler: answer(http.StatusTooManyRequests, "slow down"),
		want:    &StatusError{Code: 429, Body: "slow down"},
	}, {
		name:    "429 with a bad Retry-After",
		handler: answer(http.StatusTooManyRequests, "", "Retry-After", "soon"),
		want:    &StatusError{Code: 429},
	}}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			ep := serve(t, tt.handler)
			err := new(Client).Call(context.Background(), ep, CallInfo{}, hookapi.CompositeRequest{}, &hookapi.CompositeResponse{})
			mustNameURL(t, err, ep)
			setURL(tt.want, ep.URL)
			if diff := cmp.Diff(tt.want, err); diff != "" {
				t.Errorf("error (-want +got):\n%s", diff)
			}
		})
	}
}

// setURL fills the URL of an expected StatusError or ThrottledError.
func setURL(err error, u string) {
	switch e := err.(type) {
	case *StatusError:
		e.URL = u
	case *ThrottledError:
		e.URL = u
	}
}

func TestCallThrottledUntilDate(t *testing.T) {
	when := time.Now().Add(2 * time.Minute).UTC().Format(http.TimeFormat)
	ep := serve(t, answer(http.StatusTooManyRequests, "", "Retry-After", when))
	err := new(Client).Call(context.Background(), ep, CallInfo{}, nil, nil)
	var throttled *ThrottledError
	if !errors.As(err, &throttled) {
		t.Fatalf("error = %v, want a ThrottledError", err)
	}
	// The date has one-second precision and the machine may be slow: be generous.
	if throttled.RetryAfter < time.Minute || throttled.RetryAfter > 2*time.Minute {
		t.Errorf("RetryAfter = %s, want about 2m", throttled.RetryAfter)
	}
}

func TestParseRetryAfter(t *testing.T) {
	now := time.Date(2025, 6, 1, 12, 0, 0, 0, time.UTC)
	tests := []struct {
		value  string
		want   time.Duration
		wantOK bool
	}{
		{"7", 7 * time.Second, true},
		{" 0 ", 0, true},
		{"-1", 0, false},
		{"", 0, false},
		{"soon", 0, false},
		{"1.5", 0, false},
		{"Sun, 01 Jun 2025 12:00:30 GMT", 30 * time.Second, true},
		{"Sunday, 01-Jun-25 12:01:00 GMT", time.Minute, true},
		{"Sun, 01 Jun 2025 11:00:00 GMT", 0, true},
		{"99999999999999999999", 0, false},
		{"9999999999999", time.Duration(1<<63 - 1).Truncate(time.Second), true},
	}
	for _, tt := range tests {
		t.Run(tt.value, func(t *testing.T) {
			got, ok := parseRetryAfter(tt.value, now)
			if got != tt.want || ok != tt.wantOK {
				t.Errorf("parseRetryAfter(%q) = %s, %v; want %s, %v", tt.value, got, ok, tt.want, tt.wantOK)
			}
		})
	}
}

// serveStuck starts a server that writes prefix and then hangs until the client gives
// up or the test ends.
func serveStuck(t *testing.T, prefix string) Endpoint {
	t.Helper()
	release := make(chan struct{})
	ep := serve(t, func(w http.ResponseWriter, r *http.Request) {
		_, _ = io.Copy(io.Discard, r.Body) // lets the server notice the client leaving
		if prefix != "" {
			_, _ = io.WriteString(w, prefix)
			w.(http.Flusher).Flush()
		}
		select {
		case <-r.Context().Done():
		case <-release:
		}
	})
	t.Cleanup(func() { close(release) }) // runs before the server's Close
	return ep
}

func TestCallTimeout(t *testing.T) {
	ep := serveStuck(t, "")
	ep.Timeout = 100 * time.Millisecond
	began := time.Now()
	err := new(Client).Call(context.Background(), ep, CallInfo{}, hookapi.CompositeRequest{}, &hookapi.CompositeResponse{})
	if !errors.Is(err, ErrTimeout) {
		t.Fatalf("error = %v, want ErrTimeout", err)
	}
	if !strings.Contains(err.Error(), "hook timed out after 100ms") {
		t.Errorf("error %q does not say the timeout", err)
	}
	mustNameURL(t, err, ep)
	if elapsed := time.Since(began); elapsed > 5*time.Second {
		t.Errorf("call took %s, want about 100ms", elapsed)
	}
}

func TestCallTimeoutWhileReadingBody(t *testing.T) {
	ep := serveStuck(t, `{"finalized":`)
	ep.Timeout = 100 * time.Millisecond
	err := new(Client).Call(context.Background(), ep, CallInfo{}, nil, &hookapi.CompositeResponse{})
	if !errors.Is(err, ErrTimeout) {
		t.Fatalf("error = %v, want ErrTimeout", err)
	}
}

func TestCallCanceledIsNotTimeout(t *testing.T) {
	ep := serveStuck(t, "")
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	err := new(Client).Call(ctx, ep, CallInfo{}, nil, nil)
	if errors.Is(err, ErrTimeout) || !errors.Is(err, context.Canceled) {
		t.Fatalf("error = %v, want context.Canceled and not ErrTimeout", err)
	}
	mustNameURL(t, err, ep)
}

func TestCallTransportError(t *testing.T) {
	srv := httptest.NewServer(answer(http.StatusOK, "{}"))
	ep := Endpoint{URL: srv.URL + "/sync", Timeout: 10 * time.Second}
	srv.Close()
	err := new(Client).Call(context.Background(), ep, CallInfo{}, nil, nil)
	if err == nil || errors.Is(err, ErrTimeout) || errors.Is(err, ErrBadResponse) {
		t.Fatalf("error = %v, want a transport error", err)
	}
	mustNameURL(t, err, ep)
	if strings.Count(err.Error(), ep.URL) != 1 {
		t.Errorf("error %q names the URL more than once", err)
	}
}

func TestCallOversizeBody(t *testing.T) {
	big := `{"status":{"pad":"` + strings.Repeat("x", 2000) + `"}}`
	tests := []struct {
		name    string
		handler http.HandlerFunc
	}{{
		name:    "with Content-Length",
		handler: answer(http.StatusOK, big),
	}, {
		name: "streamed",
		handler: func(w http.ResponseWriter, r *http.Request) {
			for i := 0; i < len(big); i += 100 {
				_, _ = io.WriteString(w, big[i:min(i+100, len(big))])
				w.(http.Flusher).Flush()
			}
		},
	}}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			ep := serve(t, tt.handler)
			c := &Client{MaxResponseBytes: 1024}
			err := c.Call(context.Background(), ep, CallInfo{}, nil, &hookapi.CompositeResponse{})
			if !errors.Is(err, ErrBadResponse) || !strings.Contains(err.Error(), "larger than 1024 bytes") {
				t.Fatalf("error = %v, want ErrBadResponse about the size", err)
			}
			mustNameURL(t, err, ep)
		})
	}
}

func TestCallBodyAtLimit(t *testing.T) {
	body := `{"finalized":true}`
	ep := serve(t, answer(http.StatusOK, body))
	c := &Client{MaxResponseBytes: int64(len(body))}
	var got hookapi.CompositeResponse
	if err := c.Call(context.Background(), ep, CallInfo{}, nil, &got); err != nil || !got.Finalized {
		t.Fatalf("Call = %v, finalized %v; want nil, true", err, got.Finalized)
	}
}

func TestCallEncodeError(t *testing.T) {
	ep := Endpoint{URL: "http://unused.invalid/sync"}
	err := new(Client).Call(context.Background(), ep, CallInfo{}, map[string]any{"f": func() {}}, nil)
	if err == nil || !strings.Contains(err.Error(), "encode request") {
		t.Fatalf("error = %v, want an encode error", err)
	}
	mustNameURL(t, err, ep)
}

// doerFunc adapts a function to Doer.
type doerFunc func(*http.Request) (*http.Response, error)

func (f doerFunc) Do(r *http.Request) (*http.Response, error) { return f(r) }

func TestCallUsesDoer(t *testing.T) {
	var sawDeadline bool
	c := &Client{HTTP: doerFunc(func(r *http.Request) (*http.Response, error) {
		_, sawDeadline = r.Context().Deadline()
		return nil, fmt.Errorf("no network here")
	})}
	err := c.Call(context.Background(), Endpoint{URL: "http://x/sync"}, CallInfo{}, nil, nil)
	if err == nil || !strings.Contains(err.Error(), "POST http://x/sync: no network here") {
		t.Fatalf("error = %v, want the Doer's error", err)
	}
	if !sawDeadline {
		t.Error("request context has no deadline; want the default timeout")
	}
}

// A hook the engine could not connect to (a gateway replica that went away, say) is
// called once more, on a fresh connection, and the sync sees the answer; the hook
// gets the request once.
func TestCallRetriesOnceWhenItCouldNotConnect(t *testing.T) {
	var calls atomic.Int32
	ep := serve(t, func(w http.ResponseWriter, r *http.Request) {
		calls.Add(1)
		body, _ := io.ReadAll(r.Body)
		_, _ = w.Write(body)
	})
	for _, tt := range []struct {
		name         string
		refuse       int32 // dials refused before one connects
		wantErr      bool
		wantDials    int32
		wantRequests int32
	}{
		{"one refused dial", 1, false, 2, 1},
		{"two refused dials", 2, true, 2, 0},
	} {
		t.Run(tt.name, func(t *testing.T) {
			calls.Store(0)
			var dials atomic.Int32
			transport := newTransport()
			transport.DialContext = func(ctx context.Context, network, addr string) (net.Conn, error) {
				if dials.Add(1) <= tt.refuse {
					return nil, &net.OpError{Op: "dial", Net: network, Err: syscall.ECONNREFUSED}
				}
				return (&net.Dialer{}).DialContext(ctx, network, addr)
			}
			t.Cleanup(transport.CloseIdleConnections)
			var got map[string]any
			err := (&Client{HTTP: &http.Client{Transport: transport}}).Call(context.Background(), ep, CallInfo{}, map[string]any{"n": 1}, &got)
			if (err != nil) != tt.wantErr {
				t.Fatalf("error = %v, want error: %v", err, tt.wantErr)
			}
			if dials.Load() != tt.wantDials || calls.Load() != tt.wantRequests {
				t.Errorf("%d dials and %d requests served, want %d and %d", dials.Load(), calls.Load(), tt.wantDials, tt.wantRequests)
			}
			if !tt.wantErr && fmt.Sprint(got["n"]) != "1" {
				t.Errorf("answer %v, want the request echoed", got)
			}
		})
	}
}

// An error after the request may have reached the hook is not retried.
func TestCallDoesNotRetryAfterConnecting(t *testing.T) {
	var tries int
	c := &Client{HTTP: doerFunc(func(*http.Request) (*http.Response, error) {
		tries++
		return nil, &net.OpError{Op: "read", Net: "tcp", Err: syscall.ECONNRESET}
	})}
	if err := c.Call(context.Background(), Endpoint{URL: "http://x/sync"}, CallInfo{}, nil, nil); err == nil {
		t.Fatal("a reset connection gave no error")
	}
	if tries != 1 {
		t.Errorf("sent %d times, want once", tries)
	}
}
