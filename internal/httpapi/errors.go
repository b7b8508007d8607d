package httpapi

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strconv"
	"strings"
)

// Error is the one error shape of the APIs: {"error": code, "message": text}, plus the
// position of a compile error and the logs of a failed call when there are some. It is
// both what a server writes (WriteError) and what a client reads back (ErrorFrom).
type Error struct {
	Status  int    `json:"-"`
	Code    string `json:"error"`
	Message string `json:"message"`
	Line    int    `json:"line,omitempty"`
	Column  int    `json:"column,omitempty"`
	Logs    string `json:"logs,omitempty"`
	// RetryAfter, in seconds, becomes a Retry-After header when it is positive.
	RetryAfter int `json:"-"`
}

func (e *Error) Error() string { return e.Message }

// NewError is an error answer with status, code and message.
func NewError(status int, code, message string) *Error {
	return &Error{Status: status, Code: code, Message: message}
}

// WriteJSON answers status with v as JSON.
func WriteJSON(w http.ResponseWriter, status int, v any) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	_ = json.NewEncoder(w).Encode(v)
}

// WriteError answers err in the error shape: an *Error (or an error wrapping one) with
// its status and Retry-After, any other error as a 500 "internal".
func WriteError(w http.ResponseWriter, err error) {
	var e *Error
	if !errors.As(err, &e) {
		e = NewError(http.StatusInternalServerError, "internal", err.Error())
	}
	if e.RetryAfter > 0 {
		w.Header().Set("Retry-After", strconv.Itoa(e.RetryAfter))
	}
	WriteJSON(w, e.Status, e)
}

// maxErrorQuote is how much of a body that is not the error shape an error quotes.
const maxErrorQuote = 200

// ErrorFrom reads an error answer: the error shape with its status, or, for anything
// else (a proxy's page, say), an error whose code is http_<status> and whose message
// quotes the start of the body.
func ErrorFrom(status int, body []byte) *Error {
	e := &Error{Status: status}
	if json.Unmarshal(body, e) == nil && e.Code != "" {
		return e
	}
	text := strings.TrimSpace(string(body))
	if len(text) > maxErrorQuote {
		text = text[:maxErrorQuote] + "..."
	}
	return &Error{Status: status, Code: "http_" + strconv.Itoa(status), Message: fmt.Sprintf("answered %d %s: %s", status, http.StatusText(status), text)}
}

// ResponseError is the error of resp when its status is not 2xx (its body read and
// closed), else nil with the body left to the caller.
func ResponseError(resp *http.Response) error {
	if resp.StatusCode >= 200 && resp.StatusCode < 300 {
		return nil
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(io.LimitReader(resp.Body, 1<<20))
	if err != nil {
		return fmt.Errorf("read the %d answer: %w", resp.StatusCode, err)
	}
	e := ErrorFrom(resp.StatusCode, body)
	if s := resp.Header.Get("Retry-After"); s != "" {
		e.RetryAfter, _ = strconv.Atoi(s)
	}
	return e
}
