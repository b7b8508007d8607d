package gateway

import (
	"errors"
	"net/http"
	"strings"
	"unicode"

	apierrors "k8s.io/apimachinery/pkg/api/errors"

	"github.com/metalambda/metalambda/internal/gateway/lambda"
	"github.com/metalambda/metalambda/internal/httpapi"
)

// compileError is a 422 carrying the runtime's message and position.
func compileError(err error) *httpapi.Error {
	e := &httpapi.Error{Status: http.StatusUnprocessableEntity, Code: "compile_error", Message: err.Error()}
	var ce *lambda.CompileError
	if errors.As(err, &ce) {
		e.Line, e.Column = ce.Line, ce.Column
	}
	return e
}

// fromAPI maps a Kubernetes API error to the gateway's error shape, keeping its status
// code (404, 409, 422, 429, 504...), its message, and the delay it asks for. The code
// is the Kubernetes reason in snake case ("NotFound" is "not_found"). An error that
// carries no Kubernetes status (the API server unreachable) is a 502.
func fromAPI(err error) error {
	var status apierrors.APIStatus
	if !errors.As(err, &status) {
		return httpapi.NewError(http.StatusBadGateway, "kubernetes_unavailable", "the Kubernetes API: "+err.Error())
	}
	s := status.Status()
	e := httpapi.NewError(int(s.Code), snakeCase(string(s.Reason)), s.Message)
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
