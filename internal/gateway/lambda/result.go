package lambda

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"sync"
	"unicode/utf8"
)

// Reasons of an InvokeError.
const (
	ReasonException = "exception"
	ReasonTimeout   = "timeout"
	ReasonBadReturn = "bad-return"
	ReasonCrash     = "crash"
)

// ErrInvalidRequest is returned by Invoke for a request that is not JSON.
var ErrInvalidRequest = errors.New("invalid request JSON")

// MaxLogBytes bounds Result.Logs; what a function prints beyond it is dropped.
const MaxLogBytes = 64 << 10

const truncatedMark = "\n[logs truncated]\n"

// MaxErrorBytes bounds the message of a call's or a compile's error.
const MaxErrorBytes = 16 << 10

// errorTruncatedMark ends an error message cut to MaxErrorBytes.
const errorTruncatedMark = "\n[message truncated]"

// BoundLogs is logs cut to MaxLogBytes, as a call's logs are kept. The gateway
// bounds what a worker reports itself, as a worker runs user code and may write
// any frame it likes.
func BoundLogs(logs string) string { return boundText(logs, MaxLogBytes, truncatedMark) }

// BoundError is an error message cut to MaxErrorBytes.
func BoundError(msg string) string { return boundText(msg, MaxErrorBytes, errorTruncatedMark) }

// boundText is s cut to at most max bytes (on a rune boundary), followed by mark
// when it was cut.
func boundText(s string, max int, mark string) string {
	if len(s) <= max {
		return s
	}
	cut := max
	for cut > 0 && !utf8.RuneStart(s[cut]) {
		cut--
	}
	return s[:cut] + mark
}

// logBuffer collects a call's logs up to MaxLogBytes; it is safe for concurrent use.
type logBuffer struct {
	mu        sync.Mutex
	buf       bytes.Buffer
	truncated bool
}

func (l *logBuffer) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	room := MaxLogBytes - l.buf.Len()
	if len(p) > room {
		l.buf.Write(p[:max(room, 0)])
		l.truncated = true
		return len(p), nil
	}
	l.buf.Write(p)
	return len(p), nil
}

// reset empties the buffer for another call.
func (l *logBuffer) reset() {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.buf.Reset()
	l.truncated = false
}

func (l *logBuffer) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.truncated {
		return l.buf.String() + truncatedMark
	}
	return l.buf.String()
}

// objectResponse checks that raw is one JSON object and returns it compacted.
func objectResponse(name string, raw []byte) (json.RawMessage, error) {
	trimmed := bytes.TrimSpace(raw)
	if len(trimmed) == 0 || trimmed[0] != '{' || !json.Valid(trimmed) {
		return nil, badReturn(name, "the response is not a JSON object: %.200s", trimmed)
	}
	var out bytes.Buffer
	if err := json.Compact(&out, trimmed); err != nil {
		return nil, badReturn(name, "the response is not valid JSON: %v", err)
	}
	return out.Bytes(), nil
}

// errNoRuntime is the cause of a script worker's refusal of a function whose
// runtime its executable was built without (runtime_off.go).
var errNoRuntime = errors.New("the executable was built without the runtime")

// maxJSONDepth bounds the nesting of a request that a runtime decodes itself, as
// a guard for the decoders' recursion.
const maxJSONDepth = 1000

// compactObject accepts raw, JSON a runtime wrote itself (valid and compact), when
// it is an object: only its type is left to check.
func compactObject(name string, raw []byte) (json.RawMessage, error) {
	if len(raw) == 0 || raw[0] != '{' {
		return nil, badReturn(name, "the response is not a JSON object: %.200s", raw)
	}
	return raw, nil
}

func badReturn(name, format string, args ...any) *InvokeError {
	return &InvokeError{Function: name, Reason: ReasonBadReturn, Message: fmt.Sprintf(format, args...)}
}

func exception(name, message string) *InvokeError {
	return &InvokeError{Function: name, Reason: ReasonException, Message: message}
}

func crash(name, message string) *InvokeError {
	return &InvokeError{Function: name, Reason: ReasonCrash, Message: message}
}

// doneError is the error of a call whose context ended: an InvokeError "timeout"
// when the deadline passed, the context's error otherwise (the caller gave up).
func doneError(ctx context.Context, name string, timeout fmt.Stringer) error {
	err := ctx.Err()
	if errors.Is(err, context.DeadlineExceeded) {
		return &InvokeError{Function: name, Reason: ReasonTimeout, Message: fmt.Sprintf("did not return within %s", timeout)}
	}
	return fmt.Errorf("function %s: %w", name, err)
}
