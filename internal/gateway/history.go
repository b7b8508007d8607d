package gateway

import (
	"bytes"
	"encoding/json"
	"net/http"
	"strings"
	"sync"
	"time"
)

// Invocation is one recorded call of a function.
type Invocation struct {
	Time       time.Time         `json:"time"`
	DurationMS float64           `json:"durationMs"`
	Source     string            `json:"source"` // "hook" or "invoke"
	Status     int               `json:"status"`
	Error      string            `json:"error,omitempty"`
	Headers    map[string]string `json:"headers,omitempty"`
	Request    json.RawMessage   `json:"request,omitempty"`
	Response   json.RawMessage   `json:"response,omitempty"`
	Logs       string            `json:"logs,omitempty"`
}

// maxRecordedBody bounds the request and response kept per invocation.
const maxRecordedBody = 16 << 10

// redacted replaces a secret value in the history.
const redacted = "[redacted]"

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

// redactJSON replaces, anywhere in a JSON body, the values of the data and stringData
// of every object of kind Secret (keeping their keys) and every "authorization" value
// that is not an object. Bodies that cannot hold either are returned as they are
// without being parsed; a body that is not JSON is replaced by a note.
func redactJSON(raw json.RawMessage) json.RawMessage {
	if len(raw) == 0 || !mayHoldSecrets(raw) {
		return raw
	}
	var v any
	if err := json.Unmarshal(raw, &v); err != nil {
		note, _ := json.Marshal(map[string]any{"redacted": "the body is not JSON", "bytes": len(raw)})
		return note
	}
	redact(v)
	out, err := json.Marshal(v)
	if err != nil {
		return nil
	}
	return out
}

// mayHoldSecrets is the fast path of redactJSON: without these bytes (an escaped
// character could spell them otherwise) a body holds no Secret and no authorization.
func mayHoldSecrets(raw []byte) bool {
	return bytes.Contains(raw, []byte("Secret")) || bytes.Contains(raw, []byte("uthorization")) ||
		bytes.Contains(raw, []byte("UTHORIZATION")) || bytes.Contains(raw, []byte(`\u`))
}

func redact(v any) {
	switch t := v.(type) {
	case map[string]any:
		if t["kind"] == "Secret" {
			redactValues(t, "data")
			redactValues(t, "stringData")
		}
		for k, child := range t {
			if _, isObject := child.(map[string]any); strings.EqualFold(k, "authorization") && !isObject && child != nil {
				t[k] = redacted
				continue
			}
			redact(child)
		}
	case []any:
		for _, child := range t {
			redact(child)
		}
	}
}

// redactValues replaces every value of the map at m[field], or m[field] itself when it
// is not a map.
func redactValues(m map[string]any, field string) {
	switch values := m[field].(type) {
	case nil:
	case map[string]any:
		for k := range values {
			values[k] = redacted
		}
	default:
		m[field] = redacted
	}
}
