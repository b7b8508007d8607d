package gateway

// openAPI describes the gateway's routes (routes.go); a test keeps the two in step.
func openAPI() map[string]any {
	ns := param("namespace", "Namespace of the Function.")
	name := param("name", "Name of the Function.")
	fn := ref("Function")
	errResp := map[string]any{"description": "error", "content": jsonContent(ref("Error"))}
	op := func(summary string, params []any, body any, ok string, okSchema any, codes ...string) map[string]any {
		o := map[string]any{"summary": summary, "parameters": params, "responses": map[string]any{
			ok: map[string]any{"description": "success", "content": jsonContent(okSchema)},
		}}
		for _, c := range codes {
			o["responses"].(map[string]any)[c] = errResp
		}
		if body != nil {
			o["requestBody"] = map[string]any{"required": true, "content": jsonContent(body)}
		}
		return o
	}
	auth := []string{"401", "403"}
	return map[string]any{
		"openapi": "3.0.3",
		"info":    map[string]any{"title": "Metalambda gateway", "version": "v1"},
		"paths": map[string]any{
			"/healthz":      map[string]any{"get": op("Liveness.", nil, nil, "200", obj())},
			"/readyz":       map[string]any{"get": op("Readiness: every Function loaded once.", nil, nil, "200", obj(), "503")},
			"/metrics":      map[string]any{"get": map[string]any{"summary": "Prometheus metrics.", "responses": map[string]any{"200": map[string]any{"description": "text exposition format"}}}},
			"/openapi.json": map[string]any{"get": op("This document.", nil, nil, "200", obj())},
			"/hooks/{namespace}/{name}": map[string]any{"post": op("Call a function as a Metacontroller hook: hook request in, hook response out.",
				[]any{ns, name}, obj(), "200", obj(), "400", "401", "404", "413", "500", "503")},
			"/v1/namespaces/{namespace}/functions": map[string]any{
				"get":  op("List functions.", []any{ns}, nil, "200", map[string]any{"type": "object", "properties": map[string]any{"items": map[string]any{"type": "array", "items": fn}}}, auth...),
				"post": op("Create a function; 409 if it exists, 422 if it does not compile.", []any{ns}, fn, "201", fn, append(auth, "400", "409", "413", "422")...),
			},
			"/v1/namespaces/{namespace}/functions/{name}": map[string]any{
				"get":    op("Read a function.", []any{ns, name}, nil, "200", fn, append(auth, "404")...),
				"put":    op("Create or replace a function.", []any{ns, name}, fn, "200", fn, append(auth, "400", "413", "422")...),
				"delete": op("Delete a function.", []any{ns, name}, nil, "204", obj(), append(auth, "404")...),
			},
			"/v1/namespaces/{namespace}/functions/{name}/invoke": map[string]any{
				"post": op("Test call: the function's response and logs.", []any{ns, name}, obj(), "200", ref("InvokeResult"), append(auth, "404", "500", "503")...),
			},
			"/v1/namespaces/{namespace}/functions/{name}/invocations": map[string]any{
				"get": op("Recent calls, newest first.", []any{ns, name}, nil, "200", obj(), append(auth, "404")...),
			},
		},
		"components": map[string]any{
			"securitySchemes": map[string]any{"bearer": map[string]any{"type": "http", "scheme": "bearer", "description": "A token the Kubernetes API accepts; RBAC on functions.metalambda.dev decides."}},
			"schemas": map[string]any{
				"Function": map[string]any{"type": "object", "properties": map[string]any{
					"metadata": map[string]any{"type": "object", "properties": map[string]any{"name": str()}},
					"spec": map[string]any{"type": "object", "required": []string{"runtime", "source"}, "properties": map[string]any{
						"runtime":        map[string]any{"type": "string", "enum": []string{"javascript", "python", "jsonnet", "builtin"}},
						"source":         str(),
						"handler":        str(),
						"timeoutSeconds": map[string]any{"type": "integer", "minimum": 1, "maximum": 300},
						"env":            map[string]any{"type": "object", "additionalProperties": str()},
					}},
					"status": obj(),
				}},
				"Error": map[string]any{"type": "object", "required": []string{"error", "message"}, "properties": map[string]any{
					"error": str(), "message": str(), "line": map[string]any{"type": "integer"}, "column": map[string]any{"type": "integer"}, "logs": str(),
				}},
				"InvokeResult": map[string]any{"type": "object", "properties": map[string]any{
					"response": obj(), "logs": str(), "durationMs": map[string]any{"type": "number"},
				}},
			},
		},
		"security": []any{map[string]any{"bearer": []any{}}},
	}
}

func param(name, description string) map[string]any {
	return map[string]any{"name": name, "in": "path", "required": true, "description": description, "schema": str()}
}

func ref(name string) map[string]any { return map[string]any{"$ref": "#/components/schemas/" + name} }
func jsonContent(schema any) map[string]any {
	return map[string]any{"application/json": map[string]any{"schema": schema}}
}
func obj() map[string]any { return map[string]any{"type": "object"} }
func str() map[string]any { return map[string]any{"type": "string"} }
