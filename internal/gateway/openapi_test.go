package gateway

import (
	"context"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/getkin/kin-openapi/openapi3"
	"github.com/getkin/kin-openapi/openapi3filter"
	"github.com/getkin/kin-openapi/routers/legacy"
)

// TestOpenAPIIsValid: the document served is valid OpenAPI 3.0 once loaded back, its
// Function schema is the CRD's, and both body forms are described.
func TestOpenAPIIsValid(t *testing.T) {
	g := &Gateway{opts: Options{MaxBodyBytes: 1 << 20}}
	w := httptest.NewRecorder()
	g.routes(http.NotFoundHandler()).ServeHTTP(w, httptest.NewRequest(http.MethodGet, "/openapi.json", nil))
	if w.Code != http.StatusOK {
		t.Fatalf("GET /openapi.json = %d %s", w.Code, w.Body)
	}
	doc, err := openapi3.NewLoader().LoadFromData(w.Body.Bytes())
	if err != nil {
		t.Fatal(err)
	}
	if err := doc.Validate(context.Background()); err != nil {
		t.Fatalf("invalid document: %v", err)
	}
	spec := doc.Components.Schemas["Function"].Value.Properties["spec"].Value
	if spec.Properties["runtime"].Value.Enum == nil || spec.Properties["history"] == nil || spec.Properties["network"] == nil {
		t.Errorf("the Function schema is not the CRD's: %+v", spec.Properties)
	}
	put := doc.Paths.Find("/v1/namespaces/{namespace}/functions/{name}").Put
	for _, status := range []int{200, 201, 422} {
		if put.Responses.Status(status) == nil {
			t.Errorf("PUT does not document %d", status)
		}
	}
	for _, tt := range []struct {
		body string
		ok   bool
	}{
		{`{"metadata": {"name": "f", "labels": {"a": "b"}}, "spec": {"runtime": "javascript", "source": "x"}}`, true},
		{`{"name": "f", "runtime": "python", "source": "x", "history": {"enabled": false}}`, true},
		{`{"name": "f", "runtime": "python", "source": "x", "network": true}`, true},
		{`{"name": "f", "runtime": "python", "source": "x", "network": "yes"}`, false},
		{`{"name": "f", "runtime": "cobol", "source": "x"}`, false},
		{`{"metadata": {"name": "f"}}`, false},
	} {
		var v any
		if err := json.Unmarshal([]byte(tt.body), &v); err != nil {
			t.Fatal(err)
		}
		err := doc.Components.Schemas["FunctionRequest"].Value.VisitJSON(v)
		if (err == nil) != tt.ok {
			t.Errorf("%s: valid = %v (%v), want %v", tt.body, err == nil, err, tt.ok)
		}
	}
}

// TestOpenAPIValidationCatchesDrift: the validation the integration test relies on
// refuses a status or a body the document does not describe.
func TestOpenAPIValidationCatchesDrift(t *testing.T) {
	doc, err := openapi3.NewLoader().LoadFromData(mustJSON(t, openAPI()))
	if err != nil {
		t.Fatal(err)
	}
	router, err := legacy.NewRouter(doc)
	if err != nil {
		t.Fatal(err)
	}
	fn := `{"apiVersion": "metalambda.dev/v1alpha1", "kind": "Function", "metadata": {"name": "f"}, "spec": {"runtime": "javascript", "source": "x"}}`
	for _, tt := range []struct {
		status int
		body   string
		ok     bool
	}{
		{201, fn, true},
		{200, fn, true},
		{202, fn, false},
		{200, `{"spec": {"runtime": "cobol", "source": "x"}}`, false},
		{422, `{"error": "invalid", "message": "m"}`, true},
		{422, `{"message": "m"}`, false},
	} {
		req := httptest.NewRequest(http.MethodPut, "/v1/namespaces/ns/functions/f", strings.NewReader(fn))
		req.Header.Set("Content-Type", "application/json")
		route, params, err := router.FindRoute(req)
		if err != nil {
			t.Fatal(err)
		}
		opts := &openapi3filter.Options{AuthenticationFunc: openapi3filter.NoopAuthenticationFunc, IncludeResponseStatus: true}
		in := &openapi3filter.RequestValidationInput{Request: req, PathParams: params, Route: route, Options: opts}
		if err := openapi3filter.ValidateRequest(context.Background(), in); err != nil {
			t.Fatalf("request: %v", err)
		}
		out := &openapi3filter.ResponseValidationInput{RequestValidationInput: in, Status: tt.status,
			Header: http.Header{"Content-Type": {"application/json"}}, Options: opts}
		out.SetBodyBytes([]byte(tt.body))
		if err := openapi3filter.ValidateResponse(context.Background(), out); (err == nil) != tt.ok {
			t.Errorf("PUT answering %d %s: valid = %v (%v), want %v", tt.status, tt.body, err == nil, err, tt.ok)
		}
	}
}
