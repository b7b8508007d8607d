package gateway

import (
	"encoding/json"
	"errors"
	"net/http"

	"github.com/metalambda/metalambda/internal/runtime"
)

// apiError is the one error shape of the API: {"error": code, "message": text}, plus
// the position of a compile error and the logs of a failed call when there are some.
type apiError struct {
	Status  int    `json:"-"`
	Code    string `json:"error"`
	Message string `json:"message"`
	Line    int    `json:"line,omitempty"`
	Column  int    `json:"column,omitempty"`
	Logs    string `json:"logs,omitempty"`
	// RetryAfter, in seconds, is sent as the Retry-After header of a 429.
	RetryAfter int `json:"-"`
}

func (e *apiError) Error() string { return e.Message }

func errorf(status int, code, message string) *apiError {
	return &apiError{Status: status, Code: code, Message: message}
}

// compileError is a 422 carrying the runtime's message and position.
func compileError(err error) *apiError {
	e := &apiError{Status: http.StatusUnprocessableEntity, Code: "compile_error", Message: err.Error()}
	var ce *runtime.CompileError
	if errors.As(err, &ce) {
		e.Line, e.Column = ce.Line, ce.Column
	}
	return e
}

func writeJSON(w http.ResponseWriter, status int, v any) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	_ = json.NewEncoder(w).Encode(v)
}

func writeError(w http.ResponseWriter, err error) {
	var e *apiError
	if !errors.As(err, &e) {
		e = errorf(http.StatusInternalServerError, "internal", err.Error())
	}
	writeJSON(w, e.Status, e)
}
