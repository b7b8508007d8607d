package lambda

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"runtime/debug"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
)

// A script worker answers each frame in order on its own: a call that fails
// leaves the next one to a worker in a good state, a request that is not JSON is
// that call's failure, and a frame written otherwise than the gateway writes
// them is still read.
func TestServeScriptWorkerFrames(t *testing.T) {
	for _, tt := range []struct {
		runtime, source string
		okLogs          string // logs of the call for "good"
		failure         string // in the error of the call for "bad"
	}{
		{JavaScript, `function sync(request) {
  const name = request.parent.metadata.name;
  console.log("sync", name);
  if (name === "bad") throw new Error("bad parent");
  return {children: [], status: {name: name}};
}`, "sync good\n", "Error: bad parent"},
		{Jsonnet, `function(request)
  local name = std.trace("sync " + request.parent.metadata.name, request.parent.metadata.name);
  if name == "bad" then error "bad parent" else {children: [], status: {name: name}}`, "TRACE: test/frames:2 sync good\n", "bad parent"},
	} {
		t.Run(tt.runtime, func(t *testing.T) {
			good, err := requestFrame("test", echoRequest("good"))
			if err != nil {
				t.Fatal(err)
			}
			bad, _ := requestFrame("test", echoRequest("bad"))
			init, _ := json.Marshal(scriptInit{Protocol: scriptProtocol, Runtime: tt.runtime, Name: "test/frames", Source: tt.source, Timeout: 5e9})
			spaced := strings.NewReplacer("\n", " ", "\t", " ").Replace(string(echoRequest("spaced")))
			input := string(init) + "\n" + string(good) + string(bad) + string(good) +
				`{"request":{"parent":}}` + "\n" + // not JSON
				`{ "request" : ` + spaced + " }\n" // spaces around the request
			var out bytes.Buffer
			if code := serveScriptWorker(strings.NewReader(input), &out); code != 0 {
				t.Fatalf("exit code %d; replies:\n%s", code, out.String())
			}
			replies := readReplies(t, &out)
			if len(replies) != 6 {
				t.Fatalf("%d replies, want 6:\n%s", len(replies), out.String())
			}
			if !replies[0].OK || replies[0].Protocol != scriptProtocol {
				t.Fatalf("loading: %+v, protocol %d; want ok, protocol %d", replies[0].Error, replies[0].Protocol, scriptProtocol)
			}
			wantStatus := func(name string) any {
				return map[string]any{"children": []any{}, "status": map[string]any{"name": name}}
			}
			for _, i := range []int{1, 3} {
				if !replies[i].OK || replies[i].Logs != tt.okLogs || !cmp.Equal(decode(t, replies[i].Response), wantStatus("good")) {
					t.Errorf("reply %d = ok %v, logs %q, response %s; want ok, %q", i, replies[i].OK, replies[i].Logs, replies[i].Response, tt.okLogs)
				}
			}
			if r := replies[2]; r.OK || r.Error == nil || r.Error.Reason != ReasonException || !strings.Contains(r.Error.Message, tt.failure) {
				t.Errorf("reply to the failing call = %+v %+v, want an exception with %q", r, r.Error, tt.failure)
			}
			if r := replies[4]; r.OK || r.Error == nil || !strings.Contains(r.Error.Message, ErrInvalidRequest.Error()) {
				t.Errorf("reply to a request that is not JSON = %+v %+v, want %q", r, r.Error, ErrInvalidRequest)
			}
			if r := replies[5]; !r.OK || !cmp.Equal(decode(t, r.Response), wantStatus("spaced")) {
				t.Errorf("reply to a frame with spaces = %+v, response %s", r, r.Response)
			}
		})
	}
}

// readReplies decodes a worker's reply frames, one per line.
func readReplies(t *testing.T, out *bytes.Buffer) []pyReply {
	t.Helper()
	var replies []pyReply
	sc := bufio.NewScanner(out)
	for sc.Scan() {
		var r pyReply
		if err := json.Unmarshal(sc.Bytes(), &r); err != nil {
			t.Fatalf("reply %q: %v", sc.Text(), err)
		}
		replies = append(replies, r)
	}
	return replies
}

// A reply frame is one line of JSON, whatever its logs hold, and carries the
// response as the runtime wrote it.
func TestAppendReply(t *testing.T) {
	for _, tt := range []struct {
		name  string
		reply scriptReply
		want  string
	}{
		{"loaded", scriptReply{OK: true}, `{"ok":true}`},
		{"response", scriptReply{OK: true, Response: json.RawMessage(`{"a":[1,"<b>"]}`)}, `{"ok":true,"response":{"a":[1,"<b>"]}}`},
		{"logs", scriptReply{OK: true, Logs: "line 1\nline \"2\"\t\x01\n", Response: json.RawMessage(`{}`)}, `{"ok":true,"logs":"line 1\nline \"2\"\t\u0001\n","response":{}}`},
		{"invalid UTF-8 in logs", scriptReply{OK: true, Logs: "a\xffb", Response: json.RawMessage(`{}`)}, `{"ok":true,"logs":"a\ufffdb","response":{}}`},
		{"a response with newlines", scriptReply{OK: true, Response: json.RawMessage("{\n \"a\": 1\n}")}, `{"ok":true,"response":{"a":1}}`},
		{"error", scriptReply{Logs: "x", Error: &pyError{Reason: ReasonException, Message: "boom\nat f"}}, `{"ok":false,"logs":"x","error":{"reason":"exception","message":"boom\nat f"}}`},
	} {
		t.Run(tt.name, func(t *testing.T) {
			got := string(appendReply(nil, tt.reply))
			if !strings.HasSuffix(got, "\n") || strings.Count(got, "\n") != 1 {
				t.Fatalf("reply %q is not one line", got)
			}
			if !cmp.Equal(decode(t, json.RawMessage(got)), decode(t, json.RawMessage(tt.want))) {
				t.Errorf("reply = %s, want %s", got, tt.want)
			}
		})
	}
}

// benchHooks are the hook of hack/bench-gateway in each script runtime, and its
// request.
var benchHooks = []struct{ runtime, source string }{
	{JavaScript, `function sync(request) {
  return {children: [{apiVersion: "v1", kind: "ConfigMap", metadata: {name: request.parent.metadata.name}, data: {hello: "world"}}]};
}`},
	{Jsonnet, `function(request) {
  children: [{apiVersion: "v1", kind: "ConfigMap", metadata: {name: request.parent.metadata.name}, data: {hello: "world"}}],
}`},
}

const benchHookRequest = `{"controller":{},"parent":{"apiVersion":"example.com/v1","kind":"Thing","metadata":{"name":"bench","namespace":"default"},"spec":{}},"children":{"ConfigMap.v1":{}},"related":{},"finalizing":false}`

// BenchmarkServeScriptWorker measures a script worker's own work per call, in
// process and without pipes or wake-ups: serveScriptWorker reading b.N request
// frames of hack/bench-gateway's hook from memory, at the workers' GOGC of 400.
func BenchmarkServeScriptWorker(b *testing.B) {
	for _, hook := range benchHooks {
		b.Run(hook.runtime, func(b *testing.B) {
			defer debug.SetGCPercent(debug.SetGCPercent(400))
			init, _ := json.Marshal(scriptInit{Protocol: scriptProtocol, Runtime: hook.runtime, Name: "bench/hook", Source: hook.source, Timeout: 5e9})
			frame, err := requestFrame("bench", json.RawMessage(benchHookRequest))
			if err != nil {
				b.Fatal(err)
			}
			input := append(append(init, '\n'), bytes.Repeat(frame, b.N)...)
			var out countingWriter
			b.ReportAllocs()
			b.ResetTimer()
			cpu := selfCPU()
			if code := serveScriptWorker(bytes.NewReader(input), &out); code != 0 {
				b.Fatalf("exit code %d", code)
			}
			cpu2 := selfCPU()
			b.ReportMetric(float64((cpu2-cpu).Nanoseconds())/float64(b.N), "cpu-ns/op")
			if out.lines != b.N+1 || out.failed {
				b.Fatalf("%d replies (failures: %v), want %d", out.lines, out.failed, b.N+1)
			}
		})
	}
}

// selfCPU is the user and system time of this process.
func selfCPU() time.Duration {
	var ru syscall.Rusage
	_ = syscall.Getrusage(syscall.RUSAGE_SELF, &ru)
	return time.Duration(syscall.TimevalToNsec(ru.Utime) + syscall.TimevalToNsec(ru.Stime))
}

// countingWriter counts the reply frames written to it, and whether one failed.
type countingWriter struct {
	lines  int
	failed bool
}

func (w *countingWriter) Write(p []byte) (int, error) {
	w.lines += bytes.Count(p, []byte("\n"))
	w.failed = w.failed || !bytes.HasPrefix(p, []byte(`{"ok":true`))
	return len(p), nil
}

// The warm-up hook compiles and answers: one that failed would leave spares
// cold and say so only in their stderr.
func TestWarmUp(t *testing.T) {
	for _, name := range []string{JavaScript, Jsonnet, Python, ""} {
		if err := warmUp(name); err != nil {
			t.Errorf("warmUp(%q): %v", name, err)
		}
	}
	c := mustCompile(t, NewJavaScript(Options{}), Function{Name: "metalambda/warm-up", Runtime: JavaScript, Source: warmUpSource})
	defer c.Close()
	res, err := c.Invoke(context.Background(), json.RawMessage(warmUpRequest))
	if err != nil || !strings.Contains(string(res.Response), `"name":"warm-up-a"`) {
		t.Errorf("the warm-up hook: %s, %v", res.Response, err)
	}
}
