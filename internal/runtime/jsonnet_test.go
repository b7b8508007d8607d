package runtime

import (
	"testing"
	"time"
)

const jsonnetEcho = `
function(request)
  local name = std.trace("sync " + request.parent.metadata.name, request.parent.metadata.name);
  {
  local parent = request.parent,
  children: [{apiVersion: "v1", kind: "ConfigMap", metadata: {name: name + "-echo"}, data: {parent: name}}],
  status: {echoed: name},
}
`

func jsonnetFn(name, source string) Function {
	return Function{Name: "test/" + name, Runtime: Jsonnet, Source: source, Timeout: 5 * time.Second}
}

func TestJsonnetEcho(t *testing.T) {
	c := mustCompile(t, NewJsonnet(Options{}), jsonnetFn("echo", jsonnetEcho))
	for _, name := range []string{"demo", "second"} {
		res := assertEcho(t, c, name)
		if want := "TRACE: test/echo:3 sync " + name + "\n"; res.Logs != want {
			t.Errorf("logs = %q, want %q", res.Logs, want)
		}
	}
}

func TestJsonnetCompileErrors(t *testing.T) {
	tests := []struct {
		name         string
		source       string
		line, column int
		contains     string
	}{
		{name: "syntax", source: "function(request) {\n  a: 1,,\n}", line: 2, column: 8, contains: "Unexpected"},
		{name: "unknown variable", source: "function(request) {\n  a: nope,\n}", line: 2, column: 6, contains: "Unknown variable: nope"},
	}
	rt := NewJsonnet(Options{})
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := rt.Compile(jsonnetFn(tt.name, tt.source))
			assertCompileError(t, err, tt.line, tt.column, tt.contains)
		})
	}
}

func TestJsonnetFailures(t *testing.T) {
	tests := []struct {
		name     string
		source   string
		reason   string
		contains string
	}{
		{name: "error", source: "function(request) error 'boom ' + request.parent.metadata.name", reason: ReasonException, contains: "boom demo"},
		{name: "missing field", source: "function(request) { a: request.nope }", reason: ReasonException, contains: "Field does not exist: nope"},
		{name: "import", source: "local x = import 'secret.libsonnet'; function(request) x", reason: ReasonException, contains: "imports are not available"},
		{name: "array", source: "function(request) [1]", reason: ReasonBadReturn, contains: "not a JSON object"},
		{name: "no argument", source: "function(req) {}", reason: ReasonException, contains: "request"},
	}
	rt := NewJsonnet(Options{})
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c := mustCompile(t, rt, jsonnetFn(tt.name, tt.source))
			_, err := invoke(t, c, echoRequest("demo"))
			assertInvokeError(t, err, tt.reason, tt.contains)
		})
	}
}

func TestJsonnetTimeout(t *testing.T) {
	source := `function(request)
  local spin(n) = std.foldl(function(acc, i) acc + std.foldl(function(a, j) a + j, std.range(1, n), 0), std.range(1, n), 0);
  if request.parent.metadata.name == "bad" then {x: spin(4000)}
  else (` + jsonnetEcho + `)(request)`
	fn := jsonnetFn("timeout", source)
	fn.Timeout = 300 * time.Millisecond
	c := mustCompile(t, NewJsonnet(Options{}), fn)
	_, err := invoke(t, c, echoRequest("bad"))
	assertInvokeError(t, err, ReasonTimeout, "300ms")
	assertEcho(t, c, "after")
}

func BenchmarkJsonnetEcho(b *testing.B) {
	c := mustCompile(b, NewJsonnet(Options{}), jsonnetFn("bench", jsonnetEcho))
	benchEcho(b, c)
}
