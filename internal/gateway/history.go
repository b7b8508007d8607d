package gateway

import (
	"encoding/json"
	"net/http"
	"strings"
	"sync"

	"github.com/metalambda/metalambda/internal/gateway/lambda"
	"github.com/metalambda/metalambda/internal/gatewayapi"
	"github.com/metalambda/metalambda/internal/redact"
)

// Invocation is one recorded call of a function, as the API's types declare it.
type Invocation = gatewayapi.Invocation

// maxRecordedBody bounds the request and response kept per invocation.
const maxRecordedBody = 16 << 10

// redacted replaces a secret value in the history.
const redacted = redact.Placeholder

// history is a bounded ring of recent invocations, newest last. It grows as
// invocations come, so that a function never called holds none of its room. A
// disabled history records nothing and holds nothing.
type history struct {
	mu       sync.Mutex
	items    []Invocation // at most size; once full, a ring whose oldest is items[next]
	size     int
	next     int
	disabled bool
}

func newHistory(size int) *history {
	return &history{size: max(size, 1)}
}

// setEnabled turns recording on or off; turning it off forgets what was recorded.
func (h *history) setEnabled(on bool) {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.disabled = !on
	if !on {
		h.items, h.next = nil, 0
	}
}

func (h *history) enabled() bool {
	h.mu.Lock()
	defer h.mu.Unlock()
	return !h.disabled
}

// add records inv, with big bodies truncated and secrets redacted.
func (h *history) add(inv Invocation) {
	if !h.enabled() {
		return
	}
	inv.Request, inv.Response = redactJSON(truncateJSON(inv.Request)), redactJSON(truncateJSON(inv.Response))
	// The runtimes bound these already; a record outlives the call, so bound them
	// here too.
	inv.Logs, inv.Error = lambda.BoundLogs(inv.Logs), lambda.BoundError(inv.Error)
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.disabled {
		return
	}
	if len(h.items) < h.size {
		if len(h.items) == cap(h.items) { // grow, but never past size
			h.items = append(make([]Invocation, 0, min(max(2*len(h.items), 4), h.size)), h.items...)
		}
		h.items = append(h.items, inv)
		return
	}
	h.items[h.next] = inv
	h.next = (h.next + 1) % len(h.items)
}

// list returns the recorded invocations, newest first.
func (h *history) list() []Invocation {
	h.mu.Lock()
	defer h.mu.Unlock()
	n := len(h.items)
	out := make([]Invocation, 0, n)
	for i := 1; i <= n; i++ {
		out = append(out, h.items[(h.next-i+len(h.items))%len(h.items)])
	}
	return out
}

// truncateJSON keeps small bodies as JSON and replaces big ones by a note.
func truncateJSON(raw json.RawMessage) json.RawMessage {
	if len(raw) <= maxRecordedBody {
		return raw
	}
	note, _ := json.Marshal(map[string]any{"truncated": true, "bytes": len(raw)})
	return note
}

// recordedHeaders are a call's HTTP headers as the history keeps them: one value per
// name, credentials redacted.
func recordedHeaders(h http.Header) map[string]string {
	out := make(map[string]string, len(h))
	for name, values := range h {
		if secretHeader(name) {
			out[name] = redacted
			continue
		}
		out[name] = strings.Join(values, ", ")
	}
	return out
}

func secretHeader(name string) bool {
	switch http.CanonicalHeaderKey(name) {
	case "Authorization", "Proxy-Authorization", "Cookie", "Set-Cookie":
		return true
	}
	return false
}

// redactJSON replaces secret values in a JSON body (see redact.JSON).
func redactJSON(raw json.RawMessage) json.RawMessage { return redact.JSON(raw) }
