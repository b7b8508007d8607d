package engine

import (
	"errors"
	"fmt"
	"time"
)

// delayError asks for a retry after a set delay instead of the backoff: a throttled
// hook (429 with Retry-After) or a related-resource cache that is still filling.
type delayError struct {
	after     time.Duration
	throttled bool // the hook asked for the delay; no call may come sooner
	err       error
}

func (e *delayError) Error() string { return fmt.Sprintf("%v (retry in %s)", e.err, e.after) }
func (e *delayError) Unwrap() error { return e.err }

func retryAfter(d time.Duration, err error) error { return &delayError{after: d, err: err} }

// errNotSynced says an informer this sync needs has not finished its first list.
var errNotSynced = errors.New("cache not synced yet")

// invalidResponseError is a hook response the engine refuses to act on (a child of an
// undeclared type, labels that do not match the parent's selector, ...). Nothing is
// written; the sync is retried with backoff because the hook may answer differently.
type invalidResponseError struct{ msg string }

func (e *invalidResponseError) Error() string { return "invalid hook response: " + e.msg }

func invalidResponse(format string, args ...any) error {
	return &invalidResponseError{msg: fmt.Sprintf(format, args...)}
}
