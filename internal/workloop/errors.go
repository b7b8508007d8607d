package workloop

import (
	"errors"
	"fmt"
	"time"
)

// Terminal marks err as not worth retrying until the key changes.
func Terminal(err error) error {
	if err == nil {
		return nil
	}
	return &terminalError{err: err}
}

type terminalError struct{ err error }

func (e *terminalError) Error() string { return e.err.Error() }
func (e *terminalError) Unwrap() error { return e.err }

// After asks for the key to be processed again after d instead of with backoff: a
// cache still filling, say, where backoff would only wait longer. The processing
// still counts as failed in the metrics, and err says why.
func After(d time.Duration, err error) error { return &delayError{after: d, err: err} }

// Hold is [After] where the far side asked for the pause (a 429 with Retry-After):
// no processing of the key may come sooner, whatever event brings it back.
func Hold(d time.Duration, err error) error { return &delayError{after: d, hold: true, err: err} }

// IsDelay reports whether err asks for a set delay ([After] or [Hold]).
func IsDelay(err error) bool {
	var delay *delayError
	return errors.As(err, &delay)
}

type delayError struct {
	after time.Duration
	hold  bool
	err   error
}

func (e *delayError) Error() string { return fmt.Sprintf("%v (retry in %s)", e.err, e.after) }
func (e *delayError) Unwrap() error { return e.err }

// Panic is a panic of Process, recovered by the loop; it is retried with backoff.
type Panic struct{ Value any }

func (p *Panic) Error() string { return fmt.Sprintf("panic: %v", p.Value) }
