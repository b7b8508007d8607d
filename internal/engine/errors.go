package engine

import (
	"errors"
	"fmt"
)

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
