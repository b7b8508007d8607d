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

// history is a bounded ring of recent invocations, newest last. A disabled history
// records nothing and holds nothing.
type history struct {
	mu       sync.Mutex
	items    []Invocation
	next     int
	full     bool
	disabled bool
}

func newHistory(size int) *history {
	if size < 1 {
		size = 1
	}
	return &history{items: make([]Invocation, size)}
}

// setEnabled turns recording on or off; turning it off forgets what was recorded.
func (h *history) setEnabled(on bool) {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.disabled = !on
	if !on {
		clear(h.items)
		h.next, h.full = 0, false
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
	h.items[h.next] = inv
	h.next = (h.next + 1) % len(h.items)
	if h.next == 0 {
		h.full = true
	}
}

// list returns the recorded invocations, newest first.
func (h *history) list() []Invocation {
	h.mu.Lock()
	defer h.mu.Unlock()
	n := h.next
	if h.full {
		n = len(h.items)
	}
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
