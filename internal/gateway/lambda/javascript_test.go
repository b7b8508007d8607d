package lambda

import (
	"errors"
	"strings"
	"testing"
	"time"
)

const jsEcho = `
function sync(request) {
  const name = request.parent.metadata.name;
  console.log("sync", name, {n: 1});
  return {
    children: [{apiVersion: "v1", kind: "ConfigMap", metadata: {name: name + "-echo"}, data: {parent: name}}],
    status: {echoed: name},
  };
}`

const jsFissionEcho = `
module.exports = async function(context) {
  const request = context.request.body;
  const name = await Promise.resolve(request.parent.metadata.name);
  console.info("fission", context.request.headers["content-type"]);
  return {
    status: 200,
    body: {
      children: [{apiVersion: "v1", kind: "ConfigMap", metadata: {name: name + "-echo"}, data: {parent: name}}],
      status: {echoed: name},
    },
  };
}`

const jsFissionStringBody = `
module.exports = function(context) {
  const name = context.request.body.parent.metadata.name;
  return {status: 200, body: JSON.stringify({
    children: [{apiVersion: "v1", kind: "ConfigMap", metadata: {name: name + "-echo"}, data: {parent: name}}],
    status: {echoed: name},
  })};
}`

const jsAsyncHandler = `
async function reconcile(request) {
  const name = request.parent.metadata.name;
  const data = await new Promise(resolve => resolve({parent: name}));
  return {
    children: [{apiVersion: "v1", kind: "ConfigMap", metadata: {name: name + "-echo"}, data}],
    status: {echoed: name},
  };
}`

func jsFn(name, source string) Function {
	return Function{Name: "test/" + name, Runtime: JavaScript, Source: source, Timeout: 5 * time.Second}
}

func TestJavaScriptEcho(t *testing.T) {
	tests := []struct {
		name     string
		fn       Function
		wantLogs string
	}{
		{name: "sync function", fn: jsFn("sync", jsEcho), wantLogs: "sync demo {\"n\":1}\n"},
		{name: "fission async module", fn: jsFn("fission", jsFissionEcho), wantLogs: "fission application/json\n"},
		{name: "fission string body", fn: jsFn("fission-string", jsFissionStringBody)},
		{name: "async named handler", fn: func() Function {
			fn := jsFn("async", jsAsyncHandler)
			fn.Handler = "reconcile"
			return fn
		}()},
	}
	rt := NewJavaScript(Options{})
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c := mustCompile(t, rt, tt.fn)
			for range 3 {
				res := assertEcho(t, c, "demo")
				if res.Logs != tt.wantLogs {
					t.Errorf("logs = %q, want %q", res.Logs, tt.wantLogs)
				}
			}
		})
	}
}

func TestJavaScriptCompileErrors(t *testing.T) {
	tests := []struct {
		name         string
		source       string
		handler      string
		line, column int
		contains     string
	}{
		{name: "syntax", source: "function sync(request) {\n  return {a: 1,,};\n}", line: 2, column: 17, contains: "Unexpected token"},
		{name: "unclosed", source: "function sync(request) {\n  return 1;\n", line: 3, column: -1, contains: "Unexpected end of input"},
		{name: "top-level throw", source: "\n\nthrow new Error('nope');", line: 3, column: 7, contains: "nope"},
		{name: "missing handler", source: "function other(request) { return {}; }", line: 0, column: 0, contains: "no handler"},
		{name: "missing named handler", source: "function sync(request) { return {}; }", handler: "reconcile", line: 0, column: 0, contains: "reconcile"},
	}
	for form, rt := range jsForms(t) {
		for _, tt := range tests {
			t.Run(form+"/"+tt.name, func(t *testing.T) {
				fn := jsFn(tt.name, tt.source)
				fn.Handler = tt.handler
				_, err := rt.Compile(fn)
				assertCompileError(t, err, tt.line, tt.column, tt.contains)
			})
		}
	}
}

func TestJavaScriptFailures(t *testing.T) {
	tests := []struct {
		name     string
		source   string
		reason   string
		contains string
		wantLogs string
	}{
		{name: "throw", source: "function sync(r) { console.error('before'); throw new Error('boom'); }", reason: ReasonException, contains: "Error: boom", wantLogs: "before\n"},
		{name: "throw stack", source: "function helper() { null.x; }\nfunction sync(r) { helper(); }", reason: ReasonException, contains: "at helper"},
		{name: "rejected promise", source: "async function sync(r) { throw new TypeError('async boom'); }", reason: ReasonException, contains: "TypeError: async boom"},
		{name: "require", source: "function sync(r) { const fs = require('fs'); return {}; }", reason: ReasonException, contains: `require("fs") is not available`},
		{name: "undefined", source: "function sync(r) { }", reason: ReasonBadReturn, contains: "undefined"},
		{name: "number", source: "function sync(r) { return 42; }", reason: ReasonBadReturn, contains: "want an object"},
		{name: "array", source: "function sync(r) { return [1]; }", reason: ReasonBadReturn, contains: "not a JSON object"},
		{name: "never settles", source: "function sync(r) { return new Promise(() => {}); }", reason: ReasonBadReturn, contains: "never settled"},
		{name: "fission status", source: "module.exports = async function(c) { return {status: 500, body: 'bad'}; }", reason: ReasonException, contains: "status 500"},
		{name: "fission no body", source: "module.exports = async function(c) { return {status: 200}; }", reason: ReasonBadReturn, contains: "no body"},
		{name: "fission bad string body", source: "module.exports = function(c) { return {status: 200, body: 'nope'}; }", reason: ReasonBadReturn, contains: "not a JSON object"},
		{name: "recursion", source: "function f() { return f(); }\nfunction sync(r) { return f(); }", reason: ReasonException, contains: "RangeError"},
	}
	for form, rt := range jsForms(t) {
		for _, tt := range tests {
			t.Run(form+"/"+tt.name, func(t *testing.T) {
				c := mustCompile(t, rt, jsFn(tt.name, tt.source))
				res, err := invoke(t, c, echoRequest("demo"))
				assertInvokeError(t, err, tt.reason, tt.contains)
				if res.Logs != tt.wantLogs {
					t.Errorf("logs = %q, want %q", res.Logs, tt.wantLogs)
				}
			})
		}
	}
}

func TestJavaScriptTimeout(t *testing.T) {
	source := `function sync(request) {
  if (request.parent.metadata.name === "loop") { while (true) {} }
  ` + strings.TrimPrefix(jsEcho, "\nfunction sync(request) {")
	fn := jsFn("timeout", source)
	fn.Timeout = 300 * time.Millisecond
	c := mustCompile(t, NewJavaScript(Options{JavaScriptPoolSize: 1}), fn)
	for range 2 {
		_, err := invoke(t, c, echoRequest("loop"))
		assertInvokeError(t, err, ReasonTimeout, "300ms")
		assertEcho(t, c, "after")
	}
}

func TestJavaScriptTopLevelLoopTimesOut(t *testing.T) {
	fn := jsFn("top-loop", "while (true) {}")
	fn.Timeout = 300 * time.Millisecond
	_, err := NewJavaScript(Options{}).Compile(fn)
	assertCompileError(t, err, 0, 0, "did not finish")
}

func TestJavaScriptConcurrency(t *testing.T) {
	rt := NewJavaScript(Options{JavaScriptPoolSize: 4})
	c := mustCompile(t, rt, jsFn("concurrent", jsEcho))
	hammer(t, c, 16, 20)
	stats := rt.(StatsReporter).Stats()
	if stats.Busy != 0 || stats.Idle < 1 || stats.Idle > 4 {
		t.Errorf("stats = %+v, want no busy VM and 1 to 4 idle", stats)
	}
	c.Close()
	if stats := rt.(StatsReporter).Stats(); stats.Idle != 0 || stats.Busy != 0 {
		t.Errorf("stats after Close = %+v, want none idle or busy", stats)
	}
}

func TestJavaScriptCloseInterruptsCalls(t *testing.T) {
	fn := jsFn("close", "function sync(r) { while (true) {} }")
	fn.Timeout = time.Minute
	c, err := NewJavaScript(Options{}).Compile(fn)
	if err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() {
		_, err := invoke(t, c, echoRequest("x"))
		done <- err
	}()
	time.Sleep(100 * time.Millisecond)
	c.Close()
	select {
	case err := <-done:
		if err == nil {
			t.Fatal("the call succeeded, want an error")
		}
	case <-time.After(10 * time.Second):
		t.Fatal("Close did not interrupt the call")
	}
	if _, err := invoke(t, c, echoRequest("x")); !errors.Is(err, ErrClosed) {
		t.Fatalf("error after Close = %v, want ErrClosed", err)
	}
}

func BenchmarkJavaScriptEcho(b *testing.B) {
	c := mustCompile(b, NewJavaScript(Options{}), jsFn("bench", strings.ReplaceAll(jsEcho, "console.log", "void")))
	benchEcho(b, c)
}
