package lambda

import (
	"bytes"
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
)

var updateGolden = flag.Bool("update", false, "rewrite the golden files in testdata/")

// jsonnetGoldenFile holds every reply frame of jsonnetGoldenCases, as a worker
// wrote them: what a Jsonnet function answers must not change with the way the
// worker evaluates it.
const jsonnetGoldenFile = "testdata/jsonnet_replies.golden"

// jsonnetGoldenRequest is a hook request with strings and numbers that JSON
// writers disagree on.
const jsonnetGoldenRequest = `{"controller":{"metadata":{"name":"c"}},"parent":{"apiVersion":"example.com/v1","kind":"Thing","metadata":{"name":"p","namespace":"default","labels":{"a":"<&>","b":"é\u2028x\u0001\u007f\u0085"}},"spec":{"n":0.1,"big":12345678901234567890,"tiny":1e-7,"neg":-0,"list":[1,2.5,"x",null,true,{}]}},"children":{"ConfigMap.v1":{}}}`

// jsonnetGoldenCases are Jsonnet functions and the requests each is called with,
// in order, by one worker.
var jsonnetGoldenCases = []struct {
	name     string
	source   string
	env      map[string]string
	requests []string // jsonnetGoldenRequest when empty
}{
	{name: "echo", source: jsonnetEcho, requests: []string{jsonnetGoldenRequest, `{"parent":{"metadata":{"name":"second"}}}`}},
	{name: "request round trip", source: `function(request) request`},
	{name: "numbers", source: `function(request) {
  values: [0, -0, 1, -7, 0.1, 1/3, 2/3, 1e20, 1e21, 1e-6, 1e-7, 123456789.125, 1.7976931348623157e308, 5e-324, std.pow(2, 53) + 1, 1e300 * 10 - 1e301],
  parsed: std.parseJson('[0.1, -0, 1e-7, 12345678901234567890]'),
}`},
	{name: "strings", source: `function(request) {
  s: ["", "plain", "<tag> & \"q\" \\ \n\t\u0001\u001f", "\u007f\u0080\u009f\u00a0", "é中😀", "a\u2028b\u2029c", std.char(0)],
  keys: {"": 1, "<": 2, "é": 3, "\n": 4, "A": 5, "a": 6, "0": 7},
}`},
	{name: "empty and nested", source: `function(request) {a: [], b: {}, c: [[], [{}], {x: [null]}], d: null, e: true, f: false}`},
	{name: "std library", source: `function(request) {
  local p = request.parent,
  format: std.format("%s-%05.2f-%x-%d", [p.metadata.name, 3.14159, 255, 7]),
  join: std.join(",", std.map(function(x) std.toString(x), p.spec.list)),
  sorted: std.sort(["b", "a", "c"]),
  filtered: std.filter(function(x) x > 1, [1, 2, 3]),
  fields: std.objectFields(p.metadata),
  json: std.manifestJsonEx({b: [1, {c: "d"}], a: 0.1}, "  "),
  minified: std.manifestJsonMinified({b: [1, 2], a: "x"}),
  yaml: std.manifestYamlDoc({a: [1, {b: "c"}]}),
  base64: std.base64("héllo"),
  md5: std.md5("x"),
  parsed: std.parseJson('{"z": [1, 2.5e3, "s"]}'),
  range: std.range(1, 5),
  set: std.setUnion([1, 3], [2, 3]),
  split: std.split("a/b/c", "/"),
  str: std.toString({a: [1, "b"]}),
  type: std.type(p.spec.list),
  length: std.length(p.metadata.labels.b),
  thisFile: std.thisFile,
  native: std.type(std.native("nope")),
  mergePatch: std.mergePatch({a: 1, b: {c: 2}}, {b: {c: null, d: 3}}),
  hidden: {visible: 1, hidden:: 2, forced::: 3},
}`},
	{name: "ext vars", source: `function(request) {a: std.extVar("A"), b: std.extVar("B")}`, env: map[string]string{"A": "1", "B": "<b>"}},
	{name: "missing ext var", source: `function(request) {a: std.extVar("NOPE")}`},
	{name: "not a function", source: `{a: 1, b: std.trace("top", 2)}`, requests: []string{`{}`, `{}`}},
	{name: "default argument", source: `function(request, extra={x: 1}) {extra: extra, name: request.parent.metadata.name}`},
	{name: "ignores its request", source: `function(request) std.trace("called", {a: 1})`, requests: []string{`{}`, `{}`}},
	{name: "top-level trace", source: `local t = std.trace("loaded", 1);
function(request) {t: t, name: std.trace("call " + request.parent.metadata.name, request.parent.metadata.name)}`,
		requests: []string{jsonnetGoldenRequest, `{"parent":{"metadata":{"name":"bad"}}}`, `{"parent":{"metadata":{"name":"third"}}}`}},
	{name: "trace then error then recovery", source: `local t = std.trace("loaded", 1);
function(request)
  local name = std.trace("call " + request.parent.metadata.name, request.parent.metadata.name);
  if name == "bad" then error "bad " + name else {t: t, name: name}`,
		requests: []string{jsonnetGoldenRequest, `{"parent":{"metadata":{"name":"bad"}}}`, `{"parent":{"metadata":{"name":"third"}}}`}},
	{name: "error", source: "function(request)\n  local f(x) = error 'boom ' + x;\n  {a: {b: [1, f(request.parent.metadata.name)]}}"},
	{name: "error object", source: "function(request) error {a: 1}"},
	{name: "missing field", source: "function(request) {a: request.nope}"},
	{name: "type error", source: "function(request) {a: 1 + request.parent}"},
	{name: "division by zero", source: "function(request) {a: 1 / 0}"},
	{name: "assertion", source: "function(request) {assert self.a > 1 : 'a is small', a: 1}"},
	{name: "assert equal", source: "function(request) {a: std.assertEqual(1, 2)}"},
	{name: "function in output", source: "function(request) {a: function(x) x}"},
	{name: "import", source: "local x = import 'secret.libsonnet'; function(request) x"},
	{name: "importstr", source: "function(request) {a: importstr '/etc/passwd'}"},
	{name: "importbin", source: "function(request) {a: importbin '/etc/passwd'}"},
	{name: "array", source: "function(request) [1]"},
	{name: "string", source: `function(request) "s"`},
	{name: "null", source: "function(request) null"},
	{name: "no request parameter", source: "function(req) {}"},
	{name: "two parameters", source: "function(request, other) {}"},
	// The resident loop's native functions are out of a function's reach: under
	// the names they had, one call took the next call's request and answered it.
	{name: "natives of the resident loop", source: `function(request)
  local next = std.native("metalambda.next"), reply = std.native("metalambda.reply");
  {name: request.parent.metadata.name, next: if next == null then null else next(0), reply: if reply == null then null else reply(0, {})}`,
		requests: []string{jsonnetGoldenRequest, `{"parent":{"metadata":{"name":"second"}}}`}},
	// The deepest recursions that still answer, and one frame more: a function's
	// body, a field, a local's thunk and array elements.
	{name: "recursion in the body", source: "function(request) local f(n) = if n == 0 then {} else f(n-1); f(494)"},
	{name: "recursion in the body too deep", source: "function(request) local f(n) = if n == 0 then {} else f(n-1); f(495)"},
	{name: "recursion in a field", source: "function(request) local f(n) = if n == 0 then 0 else 1 + f(n-1); {x: f(494)}"},
	{name: "recursion in a field too deep", source: "function(request) local f(n) = if n == 0 then 0 else 1 + f(n-1); {x: f(495)}"},
	{name: "recursion in a local", source: "function(request) local f(n) = if n == 0 then 0 else 1 + f(n-1); local y = f(493); {x: y}"},
	{name: "recursion in a local too deep", source: "function(request) local f(n) = if n == 0 then 0 else 1 + f(n-1); local y = f(494); {x: y}"},
	{name: "recursion in arrays", source: "function(request) local f(n) = if n == 0 then [] else [f(n-1)]; {x: f(494)}"},
	{name: "recursion in arrays too deep", source: "function(request) local f(n) = if n == 0 then [] else [f(n-1)]; {x: f(495)}"},
	{name: "recursion in a constant", source: "local f(n) = if n == 0 then 0 else 1 + f(n-1); {x: f(494)}"},
	{name: "recursion in a constant too deep", source: "local f(n) = if n == 0 then 0 else 1 + f(n-1); {x: f(495)}"},
	{name: "tail recursion", source: "function(request) local f(n, acc) = if n == 0 then acc else f(n-1, acc+1) tailstrict; {x: f(5000, 0)}"},
}

// TestJsonnetGoldenReplies calls each function of jsonnetGoldenCases in a worker
// (serveScriptWorker) and in process, and compares every reply, byte for byte,
// with the golden file (go test -run JsonnetGolden -update rewrites it).
func TestJsonnetGoldenReplies(t *testing.T) {
	var got bytes.Buffer
	for _, tt := range jsonnetGoldenCases {
		requests := tt.requests
		if len(requests) == 0 {
			requests = []string{jsonnetGoldenRequest}
		}
		worker := goldenWorkerReplies(t, tt.source, tt.env, requests)
		inProcess := goldenInProcessReplies(t, tt.source, tt.env, requests)
		if diff := cmp.Diff(worker, inProcess); diff != "" {
			t.Errorf("%s: replies in process differ from a worker's (-worker +in process):\n%s", tt.name, diff)
		}
		fmt.Fprintf(&got, "== %s\n", tt.name)
		for _, reply := range worker {
			got.WriteString(reply)
		}
	}
	if *updateGolden {
		if err := os.WriteFile(jsonnetGoldenFile, got.Bytes(), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	want, err := os.ReadFile(filepath.Clean(jsonnetGoldenFile))
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff(strings.Split(string(want), "\n"), strings.Split(got.String(), "\n")); diff != "" {
		t.Errorf("replies differ from %s (-want +got):\n%s", jsonnetGoldenFile, diff)
	}
}

// goldenWorkerReplies are the reply frames of a worker serving source.
func goldenWorkerReplies(t *testing.T, source string, env map[string]string, requests []string) []string {
	t.Helper()
	init, _ := json.Marshal(scriptInit{Protocol: scriptProtocol, Runtime: Jsonnet, Name: "test/golden", Source: source, Env: env, Timeout: 5e9})
	input := append(init, '\n')
	for _, r := range requests {
		frame, err := requestFrame("test/golden", json.RawMessage(r))
		if err != nil {
			t.Fatal(err)
		}
		input = append(input, frame...)
	}
	var out bytes.Buffer
	if code := serveScriptWorker(bytes.NewReader(input), &out); code != 0 {
		t.Fatalf("exit code %d", code)
	}
	replies := strings.SplitAfter(out.String(), "\n")
	if len(replies) != len(requests)+2 || replies[0] != "{\"ok\":true,\"protocol\":"+strconv.Itoa(scriptProtocol)+"}\n" {
		t.Fatalf("replies: %q", replies)
	}
	return replies[1 : len(replies)-1]
}

// goldenInProcessReplies are the replies of the in-process runtime, written as a
// worker writes them.
func goldenInProcessReplies(t *testing.T, source string, env map[string]string, requests []string) []string {
	t.Helper()
	fn := Function{Name: "test/golden", Runtime: Jsonnet, Source: source, Env: env, Timeout: 5 * time.Second}
	c := mustCompile(t, NewJsonnet(Options{JsonnetEvaluators: 1}), fn)
	defer c.Close()
	var replies []string
	for _, r := range requests {
		res, err := c.Invoke(context.Background(), json.RawMessage(r))
		replies = append(replies, string(appendReply(nil, callReply(res, err))))
	}
	return replies
}
