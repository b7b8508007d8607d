package hook

import (
	"errors"
	"fmt"
	"net/http"
	"strings"
	"time"
)

// Error classes of this package. Match them with errors.Is; the messages of wrapped
// errors add the details (the URL, the timeout, the decoder's complaint).
var (
	// ErrInvalidHook means a Hook spec cannot be called as written. It is terminal:
	// retrying does not help until the controller object changes.
	ErrInvalidHook = errors.New("invalid hook")
	// ErrTimeout means the hook did not answer within its endpoint's timeout.
	ErrTimeout = errors.New("hook timed out")
	// ErrBadResponse means the hook answered 200 with a body that does not decode
	// into the response type or is too large.
	ErrBadResponse = errors.New("bad hook response")
)

// MaxErrorBodyBytes is how much of a non-200 response body a StatusError keeps.
const MaxErrorBodyBytes = 1 << 10

// StatusError is a non-200 answer from a hook (other than a 429 with Retry-After,
// which is a ThrottledError).
type StatusError struct {
	URL  string
	Code int
	// Body holds the first MaxErrorBodyBytes of the response body.
	Body string
}

func (e *StatusError) Error() string {
	msg := fmt.Sprintf("POST %s: hook answered HTTP %d %s", e.URL, e.Code, http.StatusText(e.Code))
	if body := strings.TrimSpace(e.Body); body != "" {
		msg += ": " + body
	}
	return msg
}

// ThrottledError is a 429 answer that says, with Retry-After, when to call again.
type ThrottledError struct {
	URL string
	// RetryAfter is how long to wait before calling again; never negative (a date in
	// the past gives zero).
	RetryAfter time.Duration
}

func (e *ThrottledError) Error() string {
	return fmt.Sprintf("POST %s: hook is throttling (HTTP 429), retry after %s", e.URL, e.RetryAfter)
}

// invalidHook returns an ErrInvalidHook that says what is wrong.
func invalidHook(format string, args ...any) error {
	return fmt.Errorf("%w: %s", ErrInvalidHook, fmt.Sprintf(format, args...))
}
