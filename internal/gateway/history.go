package gateway

import (
	"encoding/json"
	"sync"
	"time"
)

// Invocation is one recorded call of a function.
type Invocation struct {
	Time       time.Time       `json:"time"`
	DurationMS float64         `json:"durationMs"`
	Source     string          `json:"source"` // "hook" or "invoke"
	Status     int             `json:"status"`
	Error      string          `json:"error,omitempty"`
	Request    json.RawMessage `json:"request,omitempty"`
	Response   json.RawMessage `json:"response,omitempty"`
	Logs       string          `json:"logs,omitempty"`
}

// maxRecordedBody bounds the request and response kept per invocation.
const maxRecordedBody = 16 << 10

// history is a bounded ring of recent invocations, newest last.
type history struct {
	mu    sync.Mutex
	items []Invocation
	next  int
	full  bool
}

func newHistory(size int) *history {
	if size < 1 {
		size = 1
	}
	return &history{items: make([]Invocation, size)}
}

func (h *history) add(inv Invocation) {
	inv.Request, inv.Response = truncateJSON(inv.Request), truncateJSON(inv.Response)
	h.mu.Lock()
	defer h.mu.Unlock()
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
