package httpapi

import (
	"errors"
	"fmt"
	"net/http"
	"net/http/httptest"
	"testing"

	"github.com/google/go-cmp/cmp"
)

// TestErrorRoundTrip: what WriteError answers, ResponseError reads back as the same
// error, Retry-After included.
func TestErrorRoundTrip(t *testing.T) {
	for _, sent := range []*Error{
		{Status: http.StatusUnprocessableEntity, Code: "compile_error", Message: "line 3", Line: 3, Column: 20, Logs: "log"},
		{Status: http.StatusTooManyRequests, Code: "too_many_failures", Message: "slow down", RetryAfter: 7},
	} {
		w := httptest.NewRecorder()
		WriteError(w, fmt.Errorf("wrapped: %w", sent))
		got := ResponseError(w.Result())
		if diff := cmp.Diff(error(sent), got); diff != "" {
			t.Errorf("round trip (-sent +got):\n%s", diff)
		}
	}
}

// TestWriteErrorOfAPlainError: an error that is not an *Error is a 500 "internal".
func TestWriteErrorOfAPlainError(t *testing.T) {
	w := httptest.NewRecorder()
	WriteError(w, errors.New("boom"))
	want := &Error{Status: http.StatusInternalServerError, Code: "internal", Message: "boom"}
	if diff := cmp.Diff(error(want), ResponseError(w.Result())); diff != "" {
		t.Errorf("(-want +got):\n%s", diff)
	}
}

// TestErrorFromABodyThatIsNotTheShape: a proxy's page becomes an error quoting its start.
func TestErrorFromABodyThatIsNotTheShape(t *testing.T) {
	e := ErrorFrom(http.StatusBadGateway, []byte("<html>bad gateway</html>"))
	if e.Code != "http_502" || e.Message != "answered 502 Bad Gateway: <html>bad gateway</html>" {
		t.Errorf("got %q %q", e.Code, e.Message)
	}
	if ResponseError(&http.Response{StatusCode: http.StatusOK}) != nil {
		t.Error("a 200 is an error")
	}
}
