package gateway

import (
	"encoding/json"
	"fmt"
	"net/http"
	"sync"

	"github.com/getkin/kin-openapi/openapi3"

	"github.com/metalambda/metalambda/crds"
	fnv1 "github.com/metalambda/metalambda/internal/apis/metalambda/v1alpha1"
)

// openAPI is the document served at /openapi.json. It describes the routes of
// routes.go (a test keeps the two in step, another checks real exchanges against it);
// the Function schema is the Function CRD's own.
var openAPI = sync.OnceValue(func() *openapi3.T {
	doc, err := buildOpenAPI()
	if err != nil {
		panic(err) // the CRD is embedded in the binary; a unit test loads it
	}
	return doc
})

// Error codes every operation that reaches the Kubernetes API may answer besides its
// own: Kubernetes' throttling and timeouts pass through, an unreachable API is a 502.
var kubernetesCodes = []int{http.StatusTooManyRequests, http.StatusBadGateway, http.StatusServiceUnavailable, http.StatusGatewayTimeout}

func buildOpenAPI() (*openapi3.T, error) {
	function, err := functionSchema()
	if err != nil {
		return nil, err
	}
	doc := &openapi3.T{
		OpenAPI: "3.0.3",
		Info:    &openapi3.Info{Title: "Metalambda gateway", Version: "v1"},
		Components: &openapi3.Components{
			Schemas:         schemas(function),
			SecuritySchemes: securitySchemes(),
		},
		Security: openapi3.SecurityRequirements{openapi3.NewSecurityRequirement().Authenticate("bearer")},
		Paths:    openapi3.NewPaths(),
	}
	for path, ops := range operations() {
		item := &openapi3.PathItem{}
		for method, op := range ops {
			item.SetOperation(method, op)
		}
		doc.Paths.Set(path, item)
	}
	return doc, nil
}

// operations are the routes of routes.go, by path and method.
func operations() map[string]map[string]*openapi3.Operation {
	ns, name := pathParam("namespace", "Namespace of the Function."), pathParam("name", "Name of the Function.")
	fn := jsonResponse("The Function.", ref("Function"))
	functionBody := &openapi3.RequestBodyRef{Value: openapi3.NewRequestBody().WithRequired(true).
		WithDescription("A Function object (metadata and spec), or the spec's fields flat beside name.").
		WithJSONSchemaRef(ref("FunctionRequest"))}
	anyJSON := &openapi3.RequestBodyRef{Value: openapi3.NewRequestBody().WithRequired(true).
		WithDescription("The hook request: any JSON, usually a Metacontroller sync request.").WithJSONSchema(openapi3.NewSchema())}
	public := &openapi3.SecurityRequirements{}
	// The hook token, or a Kubernetes token allowed to invoke; nothing on a gateway
	// without a hook token.
	hookAuth := &openapi3.SecurityRequirements{openapi3.NewSecurityRequirement().Authenticate("hookToken"), openapi3.NewSecurityRequirement().Authenticate("bearer"), openapi3.NewSecurityRequirement()}
	return map[string]map[string]*openapi3.Operation{
		"/healthz": {http.MethodGet: operation("Liveness.", nil, nil, public,
			ok(200, jsonResponse("Alive.", ref("Status"))))},
		"/readyz": {http.MethodGet: operation("Readiness: every Function loaded once.", nil, nil, public,
			ok(200, jsonResponse("Ready.", ref("Status"))), errs(503))},
		"/metrics": {http.MethodGet: operation("Prometheus metrics; the user must be allowed to get the non-resource URL /metrics.", nil, nil, nil,
			ok(200, &openapi3.Response{Description: ptr("The Prometheus text exposition format."),
				Content: openapi3.NewContentWithSchema(openapi3.NewStringSchema(), []string{"text/plain"})}), errs(401, 403, 429))},
		"/openapi.json": {http.MethodGet: operation("This document.", nil, nil, public,
			ok(200, jsonResponse("An OpenAPI 3.0 document.", openapi3.NewObjectSchema().NewRef())))},
		"/hooks/{namespace}/{name}": {http.MethodPost: operation("Call a function as a Metacontroller hook: hook request in, hook response out.",
			params(ns, name), anyJSON, hookAuth,
			ok(200, jsonResponse("The function's response.", openapi3.NewSchema().NewRef())), errs(400, 401, 403, 404, 413, 429, 500, 503))},
		"/v1/namespaces/{namespace}/functions": {
			http.MethodGet: operation("List functions.", params(ns), nil, nil,
				ok(200, jsonResponse("The namespace's Functions.", ref("FunctionList"))), errs(401, 403, 500), errs(kubernetesCodes...)),
			http.MethodPost: operation("Create a function; 409 if it exists, 422 if it does not compile or its env sources are invalid, 403 if the caller may not get a Secret or ConfigMap its env sources name.", params(ns), functionBody, nil,
				ok(201, fn), errs(400, 401, 403, 409, 413, 422, 500), errs(kubernetesCodes...)),
		},
		"/v1/namespaces/{namespace}/functions/{name}": {
			http.MethodGet: operation("Read a function.", params(ns, name), nil, nil,
				ok(200, fn), errs(401, 403, 404, 500), errs(kubernetesCodes...)),
			http.MethodPut: operation("Create (201) or replace (200) a function, checked as on create. Labels and annotations the body names replace the stored ones; a body without them keeps them.",
				params(ns, name), functionBody, nil,
				ok(200, fn), ok(201, fn), errs(400, 401, 403, 409, 413, 422, 500), errs(kubernetesCodes...)),
			http.MethodDelete: operation("Delete a function.", params(ns, name), nil, nil,
				ok(204, &openapi3.Response{Description: ptr("Deleted.")}), errs(401, 403, 404, 500), errs(kubernetesCodes...)),
		},
		"/v1/namespaces/{namespace}/functions/{name}/invoke": {http.MethodPost: operation("Test call: the function's response and logs.",
			params(ns, name), anyJSON, nil,
			ok(200, jsonResponse("The call's result.", ref("InvokeResult"))), errs(400, 401, 403, 404, 413, 429, 500, 503))},
		"/v1/namespaces/{namespace}/functions/{name}/invocations": {http.MethodGet: operation("Recent calls, newest first, of every replica of the gateway.",
			params(ns, name, &openapi3.ParameterRef{Value: openapi3.NewQueryParameter(localParam).
				WithDescription("true: the calls this replica recorded itself, without asking the others (what replicas ask each other).").
				WithSchema(openapi3.NewBoolSchema())}), nil, nil,
			ok(200, jsonResponse("The recorded calls.", ref("InvocationList"))), errs(401, 403, 404, 500, 503))},
		"/v1/namespaces/{namespace}/functions/{name}/revisions": {http.MethodGet: operation("The function's revisions (its ControllerRevisions), newest first, with the live ones' shares. Read as the caller, who must be allowed to list controllerrevisions (apps) in the namespace.",
			params(ns, name), nil, nil,
			ok(200, jsonResponse("The revisions.", ref("RevisionList"))), errs(401, 403, 404, 500), errs(kubernetesCodes...))},
		"/v1/namespaces/{namespace}/functions/{name}/rollout/{action}": {http.MethodPost: operation("Act on the function's rollout in progress, as the caller (the verb update on functions): pause sets spec.rollout.paused, resume clears it, promote and abort set the annotation metalambda.dev/rollout-promote or metalambda.dev/rollout-abort to the revision status.rollout names, for the rollout driver. 409 when the rollout's phase does not take the action (no status.rollout, Halted, Complete, already paused, not paused), 400 for another action.",
			params(ns, name, &openapi3.ParameterRef{Value: openapi3.NewPathParameter("action").WithDescription("What to do.").
				WithSchema(openapi3.NewStringSchema().WithEnum("pause", "resume", "promote", "abort"))}), nil, nil,
			ok(200, jsonResponse("The Function as written.", ref("Function"))), errs(400, 401, 403, 404, 409, 500), errs(kubernetesCodes...))},
		"/v1/namespaces/{namespace}/functions/{name}/replay": {http.MethodPost: operation("Replay: run a candidate version of the function, unsaved, against its last recorded calls and tell per call whether the answer changes. Needs the verbs update and invoke; 422 with the position if the candidate does not compile.",
			params(ns, name), &openapi3.RequestBodyRef{Value: openapi3.NewRequestBody().WithRequired(true).
				WithDescription("The candidate; what it leaves out is the stored function's.").WithJSONSchemaRef(ref("ReplayRequest"))}, nil,
			ok(200, jsonResponse("Each replayed call, newest first.", ref("ReplayResult"))), errs(400, 401, 403, 404, 413, 422, 429, 500, 503))},
	}
}

type responses func(*openapi3.Responses)

func operation(summary string, parameters openapi3.Parameters, body *openapi3.RequestBodyRef, security *openapi3.SecurityRequirements, rs ...responses) *openapi3.Operation {
	op := &openapi3.Operation{Summary: summary, Parameters: parameters, RequestBody: body, Security: security, Responses: openapi3.NewResponses()}
	op.Responses.Delete("default")
	for _, r := range rs {
		r(op.Responses)
	}
	return op
}

func ok(status int, r *openapi3.Response) responses {
	return func(rs *openapi3.Responses) { rs.Set(fmt.Sprint(status), &openapi3.ResponseRef{Value: r}) }
}

// errs documents error statuses, all with the one error shape.
func errs(statuses ...int) responses {
	return func(rs *openapi3.Responses) {
		for _, s := range statuses {
			rs.Set(fmt.Sprint(s), &openapi3.ResponseRef{Value: jsonResponse(http.StatusText(s)+".", ref("Error"))})
		}
	}
}

func jsonResponse(description string, schema *openapi3.SchemaRef) *openapi3.Response {
	return &openapi3.Response{Description: ptr(description), Content: openapi3.NewContentWithJSONSchemaRef(schema)}
}

func pathParam(name, description string) *openapi3.ParameterRef {
	p := openapi3.NewPathParameter(name).WithSchema(openapi3.NewStringSchema())
	p.Description = description
	return &openapi3.ParameterRef{Value: p}
}

func params(ps ...*openapi3.ParameterRef) openapi3.Parameters { return ps }

func ref(name string) *openapi3.SchemaRef {
	return openapi3.NewSchemaRef("#/components/schemas/"+name, nil)
}

func ptr[T any](v T) *T { return &v }

func described(s *openapi3.Schema, description string) *openapi3.Schema {
	s.Description = description
	return s
}

func securitySchemes() openapi3.SecuritySchemes {
	return openapi3.SecuritySchemes{
		"bearer": {Value: &openapi3.SecurityScheme{Type: "http", Scheme: "bearer",
			Description: "A token the Kubernetes API accepts; RBAC on functions.metalambda.dev decides."}},
		"hookToken": {Value: &openapi3.SecurityScheme{Type: "http", Scheme: "bearer",
			Description: "The gateway's hook token, the engines' credential; a gateway with one takes it, or a Kubernetes token allowed to invoke functions in the namespace, on /hooks."}},
	}
}

// schemas are the document's named schemas; function is the CRD's.
func schemas(function *openapi3.Schema) openapi3.Schemas {
	str, integer, anyJSON := openapi3.NewStringSchema, openapi3.NewIntegerSchema, openapi3.NewSchema
	stringMap := func() *openapi3.Schema {
		return openapi3.NewObjectSchema().WithAdditionalProperties(openapi3.NewStringSchema())
	}
	flat := openapi3.NewObjectSchema().WithProperty("name", str())
	flat.Description = "The flat form: a Function's spec fields beside its name."
	spec := function.Properties["spec"].Value
	for field, s := range spec.Properties {
		flat.WithPropertyRef(field, s)
	}
	flat.Required = spec.Required
	invocation := openapi3.NewObjectSchema().
		WithProperty("time", openapi3.NewDateTimeSchema()).
		WithProperty("durationMs", openapi3.NewFloat64Schema()).
		WithProperty("source", str().WithEnum("hook", "invoke")).
		WithProperty("status", integer()).
		WithProperty("error", str()).
		WithProperty("headers", described(stringMap(), "The call's HTTP headers; credentials are redacted.")).
		WithProperty("request", described(anyJSON(), "The request body; Secret data and authorization values are redacted, big bodies replaced by a note.")).
		WithProperty("response", described(anyJSON(), "The response body, redacted and truncated as the request.")).
		WithProperty("logs", str()).
		WithProperty("replica", described(str(), "The gateway replica that served the call."))
	invocation.WithProperty("revision", described(str(), "The Function's ControllerRevision that answered."))
	invocation.Required = []string{"time", "durationMs", "source", "status"}
	revision := openapi3.NewObjectSchema().
		WithProperty("name", described(str(), "The ControllerRevision's name.")).
		WithProperty("revision", described(integer(), "Its number, increasing per Function.")).
		WithProperty("created", openapi3.NewDateTimeSchema()).
		WithProperty("current", described(openapi3.NewBoolSchema(), "The spec's revision (status.currentRevision).")).
		WithProperty("share", described(integer().WithMin(0).WithMax(100), "The percentage of parents it serves, for a live revision.")).
		WithPropertyRef("spec", function.Properties["spec"])
	revision.Required = []string{"name", "revision", "created", "spec"}
	errorSchema := openapi3.NewObjectSchema().
		WithProperty("error", described(str(), "A code: not_found, compile_error, too_many_requests...")).
		WithProperty("message", str()).
		WithProperty("line", integer()).WithProperty("column", integer()).WithProperty("logs", str())
	errorSchema.Required = []string{"error", "message"}
	replayRequest := openapi3.NewObjectSchema().
		WithProperty("runtime", described(str().WithEnum("javascript", "python", "jsonnet", "builtin"), "Default: the function's.")).
		WithProperty("source", str().WithMaxLength(fnv1.MaxSource)).
		WithProperty("handler", described(str(), "Default: the function's, when the runtime is.")).
		WithProperty("timeoutSeconds", described(integer().WithMin(0).WithMax(300), "Default: the function's.")).
		WithProperty("env", described(stringMap(), "Default: the function's.")).
		WithProperty("limit", described(integer().WithMin(0), "How many of the most recent recorded calls to run; default 10, at most the calls the gateway keeps (50)."))
	replayRequest.Required = []string{"source"}
	outcome := openapi3.NewObjectSchema().
		WithProperty("status", described(integer(), "200, or 500 for a failed call.")).
		WithProperty("response", described(anyJSON(), "Redacted and truncated as the history keeps it.")).
		WithProperty("error", str()).WithProperty("logs", str()).WithProperty("durationMs", openapi3.NewFloat64Schema())
	outcome.Required = []string{"status"}
	replayed := openapi3.NewObjectSchema().
		WithProperty("time", openapi3.NewDateTimeSchema()).
		WithProperty("source", str().WithEnum("hook", "invoke")).
		WithProperty("request", described(anyJSON(), "The recorded request, as the history keeps it.")).
		WithPropertyRef("old", ref("CallOutcome")).
		WithPropertyRef("new", ref("CallOutcome")).
		WithProperty("changed", openapi3.NewBoolSchema()).
		WithProperty("diff", described(str(), "A unified diff of the recorded and the candidate's answer, when they differ.")).
		WithProperty("error", described(str(), "Why the call was not run (its request was not kept, the replay ran out of time).")).
		WithProperty("notes", described(openapi3.NewArraySchema().WithItems(str()), "What limits the comparison: redacted values, a response kept only by its size."))
	replayed.Required = []string{"time", "source", "old", "changed"}
	return openapi3.Schemas{
		"ReplayRequest": replayRequest.NewRef(),
		"CallOutcome":   outcome.NewRef(),
		"ReplayedCall":  replayed.NewRef(),
		"ReplayResult": openapi3.NewObjectSchema().
			WithProperty("items", &openapi3.Schema{Type: &openapi3.Types{"array"}, Items: ref("ReplayedCall")}).
			WithProperty("changed", described(integer(), "How many items changed.")).
			WithProperty("enabled", described(openapi3.NewBoolSchema(), "False when the Function records no calls.")).NewRef(),
		"Function":        function.NewRef(),
		"FunctionRequest": {Value: &openapi3.Schema{OneOf: openapi3.SchemaRefs{ref("Function"), ref("FunctionFlat")}}},
		"FunctionFlat":    flat.NewRef(),
		"FunctionList":    openapi3.NewObjectSchema().WithProperty("items", &openapi3.Schema{Type: &openapi3.Types{"array"}, Items: ref("Function")}).NewRef(),
		"InvokeResult": openapi3.NewObjectSchema().
			WithProperty("response", described(anyJSON(), "The function's response.")).
			WithProperty("logs", str()).WithProperty("durationMs", openapi3.NewFloat64Schema()).NewRef(),
		"Invocation": invocation.NewRef(),
		"InvocationList": openapi3.NewObjectSchema().
			WithProperty("items", &openapi3.Schema{Type: &openapi3.Types{"array"}, Items: ref("Invocation")}).
			WithProperty("enabled", described(openapi3.NewBoolSchema(), "False when the Function's spec.history.enabled is false.")).
			WithProperty("unreachable", described(openapi3.NewArraySchema().WithItems(str()), "The gateway replicas that did not answer, whose calls are missing.")).NewRef(),
		"Revision": revision.NewRef(),
		"RevisionList": openapi3.NewObjectSchema().
			WithProperty("items", &openapi3.Schema{Type: &openapi3.Types{"array"}, Items: ref("Revision")}).NewRef(),
		"Status": openapi3.NewObjectSchema().WithProperty("status", str()).NewRef(),
		"Error":  errorSchema.NewRef(),
	}
}

// functionSchema is the Function CRD's schema, with the metadata fields the API reads.
func functionSchema() (*openapi3.Schema, error) {
	all, err := crds.All()
	if err != nil {
		return nil, err
	}
	for _, crd := range all {
		if crd.Spec.Group != fnv1.Group || crd.Spec.Names.Kind != fnv1.Kind {
			continue
		}
		for _, v := range crd.Spec.Versions {
			if v.Name != fnv1.Version || v.Schema == nil || v.Schema.OpenAPIV3Schema == nil {
				continue
			}
			data, err := json.Marshal(v.Schema.OpenAPIV3Schema)
			if err != nil {
				return nil, err
			}
			var s openapi3.Schema
			if err := json.Unmarshal(data, &s); err != nil {
				return nil, fmt.Errorf("the Function CRD's schema as OpenAPI: %w", err)
			}
			s.Properties["metadata"] = openapi3.NewObjectSchema().
				WithProperty("name", openapi3.NewStringSchema()).
				WithProperty("namespace", openapi3.NewStringSchema()).
				WithProperty("labels", openapi3.NewObjectSchema().WithAdditionalProperties(openapi3.NewStringSchema())).
				WithProperty("annotations", openapi3.NewObjectSchema().WithAdditionalProperties(openapi3.NewStringSchema())).NewRef()
			return &s, nil
		}
	}
	return nil, fmt.Errorf("no %s/%s %s among the embedded CRDs", fnv1.Group, fnv1.Version, fnv1.Kind)
}
