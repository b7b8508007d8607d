package gateway

import (
	"encoding/json"
	"errors"
	"net/http/httptest"
	"testing"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/util/validation/field"

	"github.com/metalambda/metalambda/internal/httpapi"
)

// TestKubernetesErrorsKeepTheirStatus: the API answers what Kubernetes answered, not 500.
func TestKubernetesErrorsKeepTheirStatus(t *testing.T) {
	gr := schema.GroupResource{Group: "metalambda.dev", Resource: "functions"}
	for _, tt := range []struct {
		err        error
		status     int
		code       string
		message    string
		retryAfter string
	}{
		{apierrors.NewNotFound(gr, "f"), 404, "not_found", `functions.metalambda.dev "f" not found`, ""},
		{apierrors.NewAlreadyExists(gr, "f"), 409, "already_exists", `functions.metalambda.dev "f" already exists`, ""},
		{apierrors.NewConflict(gr, "f", errors.New("changed")), 409, "conflict", `Operation cannot be fulfilled on functions.metalambda.dev "f": changed`, ""},
		{apierrors.NewInvalid(schema.GroupKind{Group: "metalambda.dev", Kind: "Function"}, "f", field.ErrorList{field.Invalid(field.NewPath("spec", "runtime"), "cobol", "unsupported")}),
			422, "invalid", `Function.metalambda.dev "f" is invalid: spec.runtime: Invalid value: "cobol": unsupported`, ""},
		{apierrors.NewForbidden(gr, "f", errors.New("no")), 403, "forbidden", `functions.metalambda.dev "f" is forbidden: no`, ""},
		{apierrors.NewTooManyRequests("slow down", 7), 429, "too_many_requests", "slow down", "7"},
		{apierrors.NewTimeoutError("the server took too long", 3), 504, "timeout", "Timeout: the server took too long", "3"},
		{apierrors.NewServiceUnavailable("etcd is away"), 503, "service_unavailable", "etcd is away", ""},
		{errors.New("dial tcp: connection refused"), 502, "kubernetes_unavailable", "the Kubernetes API: dial tcp: connection refused", ""},
	} {
		w := httptest.NewRecorder()
		httpapi.WriteError(w, fromAPI(tt.err))
		var e httpapi.Error
		if err := json.Unmarshal(w.Body.Bytes(), &e); err != nil {
			t.Fatal(err)
		}
		if w.Code != tt.status || e.Code != tt.code || e.Message != tt.message || w.Header().Get("Retry-After") != tt.retryAfter {
			t.Errorf("%v: got %d %q %q Retry-After %q, want %d %q %q %q", tt.err, w.Code, e.Code, e.Message, w.Header().Get("Retry-After"),
				tt.status, tt.code, tt.message, tt.retryAfter)
		}
	}
}
