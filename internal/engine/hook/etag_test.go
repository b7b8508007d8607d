package hook

import (
	"context"
	"errors"
	"io"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/metalambda/metalambda/internal/apis/metacontroller/v1alpha1"
	"github.com/metalambda/metalambda/internal/hookapi"
)

// etagHook is a test hook that answers each call with the next scripted answer and
// records the If-None-Match header it was sent.
type etagHook struct {
	mu      sync.Mutex
	answers []etagAnswer
	sent    []string // If-None-Match of each call
}

type etagAnswer struct {
	code int
	etag string
	body string
}

func (h *etagHook) serve(w http.ResponseWriter, r *http.Request) {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.sent = append(h.sent, r.Header.Get("If-None-Match"))
	a := h.answers[0]
	h.answers = h.answers[1:]
	if a.etag != "" {
		w.Header().Set("ETag", a.etag)
	}
	w.WriteHeader(a.code)
	_, _ = io.WriteString(w, a.body)
}

var (
	parentA = ObjectKey{Group: "example.com", Kind: "Thing", Namespace: "ns", Name: "a"}
	parentB = ObjectKey{Group: "example.com", Kind: "Thing", Namespace: "ns", Name: "b"}
)

func TestETagCaching(t *testing.T) {
	const one, two, three = `{"status":{"n":1}}`, `{"status":{"n":2}}`, `{"status":{"n":3}}`
	steps := []struct {
		name     string
		parent   ObjectKey
		answer   etagAnswer
		wantSent string // If-None-Match the hook must receive
		want     string // the response the call must return, "" for an error
		wantErr  string
	}{
		{"first call stores the response", parentA, etagAnswer{200, `"v1"`, one}, "", one, ""},
		{"304 reuses it", parentA, etagAnswer{304, "", ""}, `"v1"`, one, ""},
		{"412 reuses it too", parentA, etagAnswer{412, "", ""}, `"v1"`, one, ""},
		{"another parent has its own entry", parentB, etagAnswer{200, `"b1"`, three}, "", three, ""},
		{"a new ETag replaces the entry", parentA, etagAnswer{200, `"v2"`, two}, `"v1"`, two, ""},
		{"the new ETag is sent", parentA, etagAnswer{304, "", ""}, `"v2"`, two, ""},
		{"a bad response is not stored", parentA, etagAnswer{200, `"v3"`, `null`}, `"v2"`, "", `answered "null"`},
		{"the entry before it still stands", parentA, etagAnswer{304, "", ""}, `"v2"`, two, ""},
		{"an answer without ETag forgets the entry", parentA, etagAnswer{200, "", three}, `"v2"`, three, ""},
		{"so nothing is sent and 304 is an error", parentA, etagAnswer{304, "", ""}, "", "", "no If-None-Match was sent"},
		{"other parents keep theirs", parentB, etagAnswer{304, "", ""}, `"b1"`, three, ""},
	}
	hook := &etagHook{}
	for _, s := range steps {
		hook.answers = append(hook.answers, s.answer)
	}
	ep := serve(t, hook.serve)
	ep.ETags = NewETagCache(time.Hour, time.Hour, 0)
	for i, s := range steps {
		var got hookapi.CompositeResponse
		err := new(Client).Call(context.Background(), ep, CallInfo{Hook: HookSync, Parent: s.parent}, hookapi.CompositeRequest{}, &got)
		if sent := hook.sent[i]; sent != s.wantSent {
			t.Errorf("%s: If-None-Match = %q, want %q", s.name, sent, s.wantSent)
		}
		if s.wantErr != "" {
			if err == nil || !strings.Contains(err.Error(), s.wantErr) {
				t.Errorf("%s: error = %v, want one containing %q", s.name, err, s.wantErr)
			}
			continue
		}
		if err != nil {
			t.Errorf("%s: %v", s.name, err)
			continue
		}
		var want hookapi.CompositeResponse
		if err := unmarshal([]byte(s.want), &want, false); err != nil {
			t.Fatal(err)
		}
		if diff := cmp.Diff(want, got); diff != "" {
			t.Errorf("%s: response (-want +got):\n%s", s.name, diff)
		}
	}
}

// TestNotModifiedWithoutETagCaching checks that 304 and 412 are errors when ETag
// caching is off, and that no If-None-Match is sent whatever the hook answers.
func TestNotModifiedWithoutETagCaching(t *testing.T) {
	hook := &etagHook{answers: []etagAnswer{{200, `"v1"`, `{}`}, {304, "", ""}, {412, "", ""}}}
	ep := serve(t, hook.serve)
	call := func() error {
		return new(Client).Call(context.Background(), ep, CallInfo{Parent: parentA}, nil, &hookapi.CompositeResponse{})
	}
	if err := call(); err != nil {
		t.Fatal(err)
	}
	for _, code := range []int{304, 412} {
		var status *StatusError
		if err := call(); !errors.As(err, &status) || status.Code != code {
			t.Errorf("error = %v, want a StatusError with code %d", err, code)
		}
	}
	if diff := cmp.Diff([]string{"", "", ""}, hook.sent); diff != "" {
		t.Errorf("If-None-Match sent (-want +got):\n%s", diff)
	}
}

func TestETagCacheExpiry(t *testing.T) {
	now := time.Date(2025, 6, 1, 12, 0, 0, 0, time.UTC)
	c := NewETagCache(time.Minute, time.Hour, 0)
	c.now = func() time.Time { return now }
	c.store(parentA, "a", []byte("{}"))
	now = now.Add(30 * time.Second)
	c.store(parentB, "b", []byte("{}"))
	if c.get(parentA) == nil || c.get(parentB) == nil {
		t.Fatal("fresh entries are missing")
	}
	now = now.Add(30 * time.Second)
	if c.get(parentA) != nil {
		t.Error("an entry older than the timeout is still served")
	}
	c.store(parentA, "a2", []byte("{}"))
	now = now.Add(45 * time.Second)
	c.sweep()
	if c.Len() != 1 || c.get(parentA) == nil {
		t.Errorf("after the sweep: %d entries, parent a present: %v; want only a's new entry", c.Len(), c.get(parentA) != nil)
	}
}

func TestETagCacheIsBounded(t *testing.T) {
	c := NewETagCache(time.Hour, time.Hour, 10)
	c.store(parentA, "a", []byte("12345"))
	c.store(parentB, "b", []byte("123456"))
	if c.get(parentA) != nil || c.get(parentB) == nil {
		t.Errorf("a full cache must drop the oldest entry")
	}
	c.store(parentA, "a", []byte("12345678901"))
	if c.get(parentA) != nil {
		t.Errorf("a body larger than the whole cache is stored")
	}
	if c.bytes != 6 {
		t.Errorf("bytes = %d, want 6", c.bytes)
	}
}

// TestETagCacheCleansItself checks that the periodic sweep empties a cache nobody
// calls any more, so a removed controller's responses do not stay in memory.
func TestETagCacheCleansItself(t *testing.T) {
	c := NewETagCache(time.Millisecond, 5*time.Millisecond, 0)
	c.store(parentA, "a", []byte("{}"))
	c.store(parentB, "b", []byte("{}"))
	deadline := time.Now().Add(10 * time.Second)
	for c.Len() > 0 && time.Now().Before(deadline) {
		time.Sleep(5 * time.Millisecond)
	}
	if n := c.Len(); n != 0 {
		t.Fatalf("%d entries left after they expired", n)
	}
	c.mu.Lock()
	sweeping := c.sweeping
	c.mu.Unlock()
	if sweeping {
		t.Error("an empty cache still schedules sweeps")
	}
}

func TestResolveETagSettings(t *testing.T) {
	yes, no := true, false
	secs := func(n int32) *int32 { return &n }
	tests := []struct {
		name             string
		etag             *v1alpha1.WebhookEtagConfig
		wantOn           bool
		timeout, cleanup time.Duration
		wantErr          string
	}{
		{name: "absent"},
		{name: "disabled", etag: &v1alpha1.WebhookEtagConfig{Enabled: &no, CacheTimeoutSeconds: secs(5)}},
		{name: "enabled with defaults", etag: &v1alpha1.WebhookEtagConfig{Enabled: &yes}, wantOn: true,
			timeout: DefaultETagCacheTimeout, cleanup: DefaultETagCacheCleanup},
		{name: "only a timeout", etag: &v1alpha1.WebhookEtagConfig{Enabled: &yes, CacheTimeoutSeconds: secs(30)}, wantOn: true,
			timeout: 30 * time.Second, cleanup: DefaultETagCacheCleanup},
		{name: "both", etag: &v1alpha1.WebhookEtagConfig{Enabled: &yes, CacheTimeoutSeconds: secs(30), CacheCleanupSeconds: secs(7)}, wantOn: true,
			timeout: 30 * time.Second, cleanup: 7 * time.Second},
		{name: "negative timeout", etag: &v1alpha1.WebhookEtagConfig{Enabled: &yes, CacheTimeoutSeconds: secs(-1)},
			wantErr: "etag.cacheTimeoutSeconds must not be negative, got -1"},
		{name: "negative cleanup", etag: &v1alpha1.WebhookEtagConfig{Enabled: &yes, CacheCleanupSeconds: secs(-2)},
			wantErr: "etag.cacheCleanupSeconds must not be negative, got -2"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			h := webhookHook(withURL("http://hook/sync"))
			h.Webhook.Etag = tt.etag
			ep, err := ResolveEndpoint(h, nil)
			if tt.wantErr != "" {
				if !errors.Is(err, ErrInvalidHook) || !strings.Contains(err.Error(), tt.wantErr) {
					t.Fatalf("error = %v, want ErrInvalidHook containing %q", err, tt.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if (ep.ETags != nil) != tt.wantOn {
				t.Fatalf("ETag caching on = %v, want %v", ep.ETags != nil, tt.wantOn)
			}
			if tt.wantOn && (ep.ETags.timeout != tt.timeout || ep.ETags.cleanup != tt.cleanup) {
				t.Errorf("timeout, cleanup = %s, %s; want %s, %s", ep.ETags.timeout, ep.ETags.cleanup, tt.timeout, tt.cleanup)
			}
		})
	}
}
