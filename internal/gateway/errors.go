package gateway

import (
	"encoding/json"
	"errors"
	"net/http"
	"strconv"
	"strings"
	"unicode"

	apierrors "k8s.io/apimachinery/pkg/api/errors"

	"github.com/metalambda/metalambda/internal/gateway/lambda"
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
	// RetryAfter, in seconds, becomes a Retry-After header when it is positive.
	RetryAfter int `json:"-"`
}

func (e *apiError) Error() string { return e.Message }

func errorf(status int, code, message string) *apiError {
	return &apiError{Status: status, Code: code, Message: message}
}

// compileError is a 422 carrying the runtime's message and position.
func compileError(err error) *apiError {
	e := &apiError{Status: http.StatusUnprocessableEntity, Code: "compile_error", Message: err.Error()}
	var ce *lambda.CompileError
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
	if e.RetryAfter > 0 {
		w.Header().Set("Retry-After", strconv.Itoa(e.RetryAfter))
	}
	writeJSON(w, e.Status, e)
}

// fromAPI maps a Kubernetes API error to the gateway's error shape, keeping its status
// code (404, 409, 422, 429, 504...), its message, and the delay it asks for. The code
// is the Kubernetes reason in snake case ("NotFound" is "not_found"). An error that
// carries no Kubernetes status (the API server unreachable) is a 502.
func fromAPI(err error) error {
	var status apierrors.APIStatus
	if !errors.As(err, &status) {
		return errorf(http.StatusBadGateway, "kubernetes_unavailable", "the Kubernetes API: "+err.Error())
	}
	s := status.Status()
	e := errorf(int(s.Code), snakeCase(string(s.Reason)), s.Message)
	if e.Status < 400 || e.Status > 599 {
		e.Status = http.StatusInternalServerError
	}
	if e.Code == "" {
		e.Code = "kubernetes_error"
	}
	if e.Message == "" {
		e.Message = err.Error()
	}
	if s.Details != nil {
		e.RetryAfter = int(s.Details.RetryAfterSeconds)
	}
	return e
}

// snakeCase turns a Kubernetes reason ("AlreadyExists") into an error code
// ("already_exists").
func snakeCase(reason string) string {
	var b strings.Builder
	for i, r := range reason {
		if unicode.IsUpper(r) && i > 0 {
			b.WriteByte('_')
		}
		b.WriteRune(unicode.ToLower(r))
	}
	return b.String()
}
