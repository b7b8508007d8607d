package lambda

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
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
	for form, rt := range jsonnetForms(t) {
		for _, tt := range tests {
			t.Run(form+"/"+tt.name, func(t *testing.T) {
				_, err := rt.Compile(jsonnetFn(tt.name, tt.source))
				assertCompileError(t, err, tt.line, tt.column, tt.contains)
			})
		}
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
	for form, rt := range jsonnetForms(t) {
		for _, tt := range tests {
			t.Run(form+"/"+tt.name, func(t *testing.T) {
				c := mustCompile(t, rt, jsonnetFn(tt.name, tt.source))
				_, err := invoke(t, c, echoRequest("demo"))
				assertInvokeError(t, err, tt.reason, tt.contains)
			})
		}
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

// Resident evaluators serve calls from many goroutines, each answer and each
// call's trace output going to its own caller, across evaluations (more calls than
// one resident evaluation serves).
func TestJsonnetConcurrentCallsKeepTheirLogs(t *testing.T) {
	c := mustCompile(t, NewJsonnet(Options{JsonnetEvaluators: 3}), jsonnetFn("echo", jsonnetEcho))
	var wg sync.WaitGroup
	errs := make(chan error, 16)
	for g := range 8 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range residentCalls/2 + 10 {
				name := fmt.Sprintf("p-%d-%d", g, i)
				res, err := c.Invoke(context.Background(), echoRequest(name))
				var got any
				switch {
				case err != nil:
				case json.Unmarshal(res.Response, &got) != nil || !cmp.Equal(wantEcho(name), got):
					err = fmt.Errorf("call %s: response %s", name, res.Response)
				case res.Logs != "TRACE: test/echo:3 sync "+name+"\n":
					err = fmt.Errorf("call %s: logs %q", name, res.Logs)
				}
				if err != nil {
					errs <- err
					return
				}
			}
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Error(err)
	}
}

// A function that never reads its request still answers each call, and its trace
// output belongs to that call.
func TestJsonnetFunctionIgnoringItsRequest(t *testing.T) {
	c := mustCompile(t, NewJsonnet(Options{JsonnetEvaluators: 1}), jsonnetFn("const", `function(request) std.trace("called", {a: 1})`))
	for range 3 {
		res, err := invoke(t, c, echoRequest("x"))
		if err != nil {
			t.Fatal(err)
		}
		if string(res.Response) != `{"a":1}` || res.Logs != "TRACE: test/const:1 called\n" {
			t.Fatalf("response %s, logs %q", res.Response, res.Logs)
		}
	}
}

// A failing call ends its evaluation; the next call gets a fresh one, and the error
// names the function's own frames, not the evaluator's.
func TestJsonnetErrorThenRecovery(t *testing.T) {
	source := "function(request)\n  if request.parent.metadata.name == 'bad' then error 'bad parent'\n  else {ok: request.parent.metadata.name}"
	c := mustCompile(t, NewJsonnet(Options{JsonnetEvaluators: 1}), jsonnetFn("flaky", source))
	_, err := invoke(t, c, echoRequest("bad"))
	assertInvokeError(t, err, ReasonException, "bad parent")
	if strings.Contains(err.Error(), residentFile) || !strings.Contains(err.Error(), "test/flaky:2") {
		t.Errorf("error %q: want the function's frame test/flaky:2 and no %s frame", err, residentFile)
	}
	res, err := invoke(t, c, echoRequest("good"))
	if err != nil || string(res.Response) != `{"ok":"good"}` {
		t.Fatalf("after a failure: %s, %v", res.Response, err)
	}
}

// Close ends the evaluators; later calls fail with ErrClosed.
func TestJsonnetClose(t *testing.T) {
	c, err := NewJsonnet(Options{JsonnetEvaluators: 4}).Compile(jsonnetFn("echo", jsonnetEcho))
	if err != nil {
		t.Fatal(err)
	}
	assertEcho(t, c, "x")
	f := c.(*jsonnetFunction)
	if n := f.alive.Load(); n != 4 {
		t.Fatalf("%d evaluators after the first call, want 4", n)
	}
	c.Close()
	if _, err := c.Invoke(context.Background(), echoRequest("y")); !errors.Is(err, ErrClosed) {
		t.Fatalf("after Close: %v, want ErrClosed", err)
	}
	deadline := time.Now().Add(10 * time.Second)
	for f.alive.Load() > 0 && time.Now().Before(deadline) {
		time.Sleep(10 * time.Millisecond)
	}
	if n := f.alive.Load(); n != 0 {
		t.Fatalf("%d evaluators still run 10s after Close", n)
	}
}

// While as many calls as the function has evaluators run on past their timeout,
// further calls fail at once instead of taking another CPU; then calls work again.
func TestJsonnetStuckEvaluationsFailFast(t *testing.T) {
	source := `function(request)
  local spin(n) = std.foldl(function(acc, i) acc + std.foldl(function(a, j) a + j, std.range(1, n), 0), std.range(1, n), 0);
  if request.parent.metadata.name == "slow" then {x: spin(800)} else {ok: request.parent.metadata.name}`
	fn := jsonnetFn("stuck", source)
	fn.Timeout = 50 * time.Millisecond
	c := mustCompile(t, NewJsonnet(Options{JsonnetEvaluators: 1}), fn)
	_, err := invoke(t, c, echoRequest("slow"))
	assertInvokeError(t, err, ReasonTimeout, "50ms")
	_, err = invoke(t, c, echoRequest("quick"))
	assertInvokeError(t, err, ReasonTimeout, "still running past their timeout")
	deadline := time.Now().Add(30 * time.Second)
	for {
		res, err := invoke(t, c, echoRequest("quick"))
		if err == nil {
			if string(res.Response) != `{"ok":"quick"}` {
				t.Fatalf("response %s", res.Response)
			}
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("calls still fail 30s after the stuck one: %v", err)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

func BenchmarkJsonnetEcho(b *testing.B) {
	c := mustCompile(b, NewJsonnet(Options{}), jsonnetFn("bench", jsonnetEcho))
	benchEcho(b, c)
}

// A worker's resident evaluation serves residentCalls calls, then a fresh one
// starts: a top-level std.trace shows in the first call of each, and every call
// gets its own answer and logs.
func TestJsonnetWorkerResidentEvaluations(t *testing.T) {
	source := `local t = std.trace("loaded", 1);
function(request) {t: t, name: std.trace("call " + request.parent.metadata.name, request.parent.metadata.name)}`
	n := 2*residentCalls + 1
	requests := make([]string, n)
	for i := range requests {
		requests[i] = fmt.Sprintf(`{"parent":{"metadata":{"name":"p%d"}}}`, i)
	}
	replies := goldenWorkerReplies(t, source, nil, requests)
	for i, reply := range replies {
		logs := fmt.Sprintf(`TRACE: test/golden:2 call p%d\n`, i)
		if i%residentCalls == 0 {
			logs += `TRACE: test/golden:1 loaded\n`
		}
		want := fmt.Sprintf(`{"ok":true,"logs":"%s","response":{"name":"p%d","t":1}}`+"\n", logs, i)
		if reply != want {
			t.Fatalf("reply %d = %s, want %s", i, reply, want)
		}
	}
}
