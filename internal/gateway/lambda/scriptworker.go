package lambda

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"runtime/debug"
	"runtime/metrics"
	"strconv"
	"sync/atomic"
	"time"

	"github.com/go-json-experiment/json/jsontext"

	"github.com/metalambda/metalambda/internal/version"
)

// The worker's side of the script worker protocol: what a JavaScript or
// Jsonnet worker process runs (ServeWorker), in the Python worker's protocol
// (python_worker.py). Each call is one read of a request frame, the function,
// and one write of the reply frame, on one goroutine: a call hands nothing to
// another goroutine, which would cost the worker two thread wake-ups per call.

// serveScriptWorker is a worker's main: it reads the init frame, compiles the
// function in process and answers each request frame with a reply frame. It
// returns the exit code.
func serveScriptWorker(in io.Reader, out io.Writer) int {
	if err := warmUp(os.Getenv(warmUpEnv)); err != nil {
		fmt.Fprintln(os.Stderr, "script worker: warming up:", err) // and serves all the same
	}
	r := bufio.NewReaderSize(in, 64<<10)
	w := &frameWriter{w: out}
	line, err := r.ReadBytes('\n')
	if err != nil {
		return 0
	}
	var first scriptInit
	if err := json.Unmarshal(line, &first); err != nil {
		fmt.Fprintln(os.Stderr, "script worker: init frame:", err)
		return 2
	}
	if first.Protocol != scriptProtocol {
		w.send(scriptReply{Error: &pyError{Message: fmt.Sprintf(
			"this worker executable is from another build of Metalambda than the gateway (worker protocol %d, the gateway's %d): install the worker executables built with the gateway beside it",
			scriptProtocol, first.Protocol)}})
		return 2
	}
	if heap := first.MemoryLimit - goReservedAddressSpace; first.MemoryLimit > 0 && heap > 0 {
		// Collect harder before the address-space limit, which the runtime cannot
		// survive.
		debug.SetMemoryLimit(heap * 3 / 4)
	}
	opts := Options{JavaScriptPoolSize: 1, JsonnetEvaluators: 1, InsecureNoSandbox: true}
	var rt Runtime
	switch first.Runtime {
	case JavaScript:
		rt = NewJavaScript(opts)
	case Jsonnet:
		rt = NewJsonnet(opts)
	default:
		fmt.Fprintf(os.Stderr, "script worker: unknown runtime %q\n", first.Runtime)
		return 2
	}
	fn := Function{Name: first.Name, Runtime: first.Runtime, Source: first.Source, Handler: first.Handler, Env: first.Env}
	// The top-level code is bounded by the timeout in process; calls are bounded
	// by the gateway, which kills the worker.
	fn.Timeout = time.Duration(first.Timeout)
	wakeMonitor()
	compiled, err := rt.Compile(fn)
	if errors.Is(err, errNoRuntime) {
		reply := compileReply(err)
		reply.NoRuntime = true
		w.send(reply)
		return 2
	}
	if err != nil {
		return w.send(compileReply(err))
	}
	if err := pollCalls(in, out); err != nil {
		// The calls are read and written as the function was: they work, and
		// each wakes the runtime's monitor.
		fmt.Fprintln(os.Stderr, "script worker: waiting for calls with blocking reads:", err)
	}
	if code := w.send(scriptReply{OK: true, Protocol: scriptProtocol, Build: knownBuild()}); code != 0 {
		return code
	}
	server, ok := compiled.(workerServer)
	if !ok {
		fmt.Fprintf(os.Stderr, "script worker: cannot serve %T\n", compiled)
		return 2
	}
	return server.serveWorker(&frameReader{r: r, release: startMemoryRelease(releaseIdle)}, w)
}

// knownBuild is the build of this executable (version.Get) when it is known:
// the version linked in by make build or the image's build, else the commit of
// a go build in a checkout; empty for "devel", a build of no known source (go
// run, go test).
func knownBuild() string {
	if v := version.Get(); v != "devel" {
		return v
	}
	return ""
}

// workerServer is a compiled function that a script worker serves: it answers
// each request frame with a reply frame until the end of input, and returns the
// worker's exit code.
type workerServer interface {
	serveWorker(frames *frameReader, w *frameWriter) int
}

// requestPrefix starts every request frame that the gateway writes
// (requestFrame): the rest is the request, compact, and a closing brace.
const requestPrefix = `{"request":`

// frameReader reads request frames, reusing one buffer.
type frameReader struct {
	r       *bufio.Reader
	buf     []byte
	release *memoryRelease // told of each call's end and start; nil: none
}

// next returns the next call's request, valid until the next call of next; at
// the end of stdin or on a frame that is not one, ok is false and code is the
// worker's exit code. A request that is not JSON is the call's failure, not the
// frame's.
func (fr *frameReader) next(w *frameWriter) (request []byte, code int, ok bool) {
	fr.release.touch() // the previous call has ended
	frame, err := fr.read()
	fr.release.touch()
	if err != nil {
		return nil, 0, false
	}
	frame = bytes.TrimSuffix(frame, []byte("\n"))
	if rest, found := bytes.CutPrefix(frame, []byte(requestPrefix)); found && len(rest) > 0 && rest[len(rest)-1] == '}' {
		return rest[:len(rest)-1], 0, true
	}
	var decoded struct {
		Request json.RawMessage `json:"request"`
	}
	if err := json.Unmarshal(frame, &decoded); err != nil {
		fmt.Fprintln(os.Stderr, "script worker: request frame:", err)
		return nil, 2, false
	}
	return decoded.Request, 0, true
}

// read returns the next line: a slice of the reader's buffer when it holds the
// whole line, else of fr.buf.
func (fr *frameReader) read() ([]byte, error) {
	line, err := fr.r.ReadSlice('\n')
	if err != bufio.ErrBufferFull {
		return line, err
	}
	fr.buf = append(fr.buf[:0], line...)
	for {
		line, err = fr.r.ReadSlice('\n')
		fr.buf = append(fr.buf, line...)
		if err != bufio.ErrBufferFull {
			return fr.buf, err
		}
	}
}

// releaseIdle is how long a script worker answers no call before it gives its
// free memory back to the system, and releaseMinimum how much of it there must
// be: a collection costs a worker about 0.35 MiB of its own (mark bits, work
// buffers, a thread), more than a call or two leave.
const (
	releaseIdle    = time.Second
	releaseMinimum = 1 << 20
)

// memoryRelease gives a worker's free memory back to the system once it has
// been idle for a while (a collection, then the free pages returned). GOGC=400
// lets a worker's heap grow to 16 MiB or more of garbage between collections,
// which a busy worker keeps for its speed; most warm workers are idle most of
// the time, and then hold only what their function keeps (about 1 MiB for
// JavaScript, 2 MiB for Jsonnet). Its goroutine waits on a channel while the
// worker is idle, so that an idle worker is not woken.
type memoryRelease struct {
	activity atomic.Uint64
	wake     chan struct{}
	idle     time.Duration
	loaded   uint64 // the heap's objects when the function was loaded, nearly all live
}

// startMemoryRelease starts the release of a worker that has just loaded its
// function.
func startMemoryRelease(idle time.Duration) *memoryRelease {
	r := &memoryRelease{wake: make(chan struct{}, 1), idle: idle}
	r.loaded, _, _, _ = readHeap()
	r.touch()
	go r.run()
	return r
}

// touch records a call's start or end; it never blocks.
func (r *memoryRelease) touch() {
	if r == nil {
		return
	}
	r.activity.Add(1)
	select {
	case r.wake <- struct{}{}:
	default:
	}
}

func (r *memoryRelease) run() {
	for range r.wake {
		for {
			seen := r.activity.Load()
			time.Sleep(r.idle)
			select { // a touch after this is seen by the check or wakes the next round
			case <-r.wake:
			default:
			}
			if r.activity.Load() == seen {
				break
			}
		}
		if r.reclaimable() >= releaseMinimum {
			debug.FreeOSMemory()
		}
	}
}

// reclaimable is what a collection and returning the free pages would give
// back: the garbage (the heap's objects beyond the live ones of the last
// collection, or beyond those when the function was loaded if none has run
// yet) and the free pages.
func (r *memoryRelease) reclaimable() uint64 {
	objects, free, live, cycles := readHeap()
	if cycles == 0 {
		live = r.loaded
	}
	return free + objects - min(live, objects)
}

// heapSamples are what readHeap reads; only the release's goroutine reads them.
var heapSamples = []metrics.Sample{
	{Name: "/memory/classes/heap/objects:bytes"},
	{Name: "/memory/classes/heap/free:bytes"},
	{Name: "/gc/heap/live:bytes"},
	{Name: "/gc/cycles/total:gc-cycles"},
}

// readHeap reads the heap's objects (live or garbage not yet swept), its free
// pages that the system has not taken back, the objects the last collection
// marked live, and the number of collections.
func readHeap() (objects, free, live, cycles uint64) {
	metrics.Read(heapSamples)
	v := [4]uint64{}
	for i, s := range heapSamples {
		if s.Value.Kind() == metrics.KindUint64 {
			v[i] = s.Value.Uint64()
		}
	}
	return v[0], v[1], v[2], v[3]
}

// frameWriter writes each reply frame with one write, reusing one buffer.
type frameWriter struct {
	w   io.Writer
	buf []byte
}

// send writes reply and returns the worker's exit code should that fail, else 0.
func (fw *frameWriter) send(reply scriptReply) int {
	fw.buf = appendReply(fw.buf[:0], reply)
	if _, err := fw.w.Write(fw.buf); err != nil {
		fmt.Fprintln(os.Stderr, "script worker: writing a reply:", err)
		return 1
	}
	return 0
}

// appendReply appends reply as one line of JSON. A successful call's is written
// by hand around the response: the runtimes write it compact (JSON.stringify,
// encoding/json), so that it holds no newline; a response that does (a runtime's
// bug) is compacted first.
func appendReply(b []byte, reply scriptReply) []byte {
	if !reply.OK || reply.Error != nil {
		encoded, err := json.Marshal(reply)
		if err != nil {
			encoded, _ = json.Marshal(scriptReply{Error: &pyError{Reason: ReasonCrash, Message: "the reply cannot be encoded: " + err.Error()}})
		}
		return append(append(b, encoded...), '\n')
	}
	b = append(b, `{"ok":true`...)
	if reply.Protocol != 0 {
		b = append(b, `,"protocol":`...)
		b = strconv.AppendInt(b, int64(reply.Protocol), 10)
	}
	if reply.Build != "" {
		b = append(b, `,"build":`...)
		b = appendString(b, reply.Build)
	}
	if reply.Logs != "" {
		b = append(b, `,"logs":`...)
		b = appendString(b, reply.Logs)
	}
	if reply.Response != nil {
		b = append(b, `,"response":`...)
		if bytes.IndexByte(reply.Response, '\n') >= 0 {
			var compact bytes.Buffer
			_ = json.Compact(&compact, reply.Response)
			reply.Response = compact.Bytes()
		}
		b = append(b, reply.Response...)
	}
	return append(b, "}\n"...)
}

// appendString appends s as a JSON string; invalid UTF-8 becomes U+FFFD, as
// encoding/json writes it.
func appendString(b []byte, s string) []byte {
	if quoted, err := jsontext.AppendQuote(b, s); err == nil {
		return quoted
	}
	encoded, _ := json.Marshal(s)
	return append(b, encoded...)
}

// scriptReply is pyReply as a script worker writes it.
type scriptReply struct {
	OK       bool   `json:"ok"`
	Protocol int    `json:"protocol,omitempty"` // in the answer to the init frame
	Build    string `json:"build,omitempty"`    // knownBuild, in the answer to the init frame
	// NoRuntime tells that this executable was built without the function's
	// runtime: the install's fault, not the function's.
	NoRuntime bool            `json:"no_runtime,omitempty"`
	Response  json.RawMessage `json:"response,omitempty"`
	Logs      string          `json:"logs,omitempty"`
	Error     *pyError        `json:"error,omitempty"`
}

func compileReply(err error) scriptReply {
	var ce *CompileError
	if errors.As(err, &ce) {
		return scriptReply{Error: &pyError{Message: ce.Message, Line: ce.Line, Column: ce.Column}}
	}
	return scriptReply{Error: &pyError{Message: err.Error()}}
}

func callReply(res Result, err error) scriptReply {
	if err == nil {
		return scriptReply{OK: true, Response: res.Response, Logs: res.Logs}
	}
	var ie *InvokeError
	if errors.As(err, &ie) {
		return scriptReply{Logs: res.Logs, Error: &pyError{Reason: ie.Reason, Message: ie.Message}}
	}
	return scriptReply{Logs: res.Logs, Error: &pyError{Reason: ReasonException, Message: err.Error()}}
}

// warmUpEnv names, in a script worker's environment, the runtime it warms up
// before it reads its function (warmUp).
const warmUpEnv = "METALAMBDA_WORKER_WARM_UP"

// warmUpSource is the JavaScript hook warmUp runs: one of the usual shape,
// which reads its request and returns a child and a status.
const warmUpSource = `function sync(request) {
  const parent = request.parent;
  return {children: [{apiVersion: "v1", kind: "ConfigMap", metadata: {name: parent.metadata.name + "-a"}, data: {n: String(1)}}], status: {ready: true}};
}`

// warmUpRequest is the request warmUp calls its hook with.
const warmUpRequest = `{"controller":{"metadata":{"name":"warm-up"}},"parent":{"apiVersion":"example.com/v1","kind":"Thing","metadata":{"name":"warm-up","namespace":"default"}},"children":{"ConfigMap.v1":{}},"finalizing":false}`

// warmUp does, before the worker reads its function, the work of the first
// load and call that every function of runtime name repeats, so that a spare
// pays for it in the background:
//   - JavaScript: a hook compiled and called once, in a runtime then
//     dropped: the interpreter's code is run for the first time (its pages
//     read from the executable, its caches filled);
//   - Jsonnet: the resident loop every function's evaluation runs parsed
//     (residentProgram), the bulk of a first load.
//
// It holds no function's code or data: it runs before the worker reads any.
// Its garbage is not collected: a collection's own structures would cost each
// worker more memory (0.4 MiB) than the garbage does. A runtime this
// executable does not have, or none named, is skipped.
func warmUp(name string) error {
	switch name {
	case JavaScript:
		return warmUpJavaScript()
	case Jsonnet:
		return warmUpJsonnet()
	}
	return nil
}

// warmUpJavaScript compiles and calls warmUpSource (see warmUp).
func warmUpJavaScript() error {
	opts := Options{JavaScriptPoolSize: 1, InsecureNoSandbox: true}
	c, err := NewJavaScript(opts).Compile(Function{Name: "metalambda/warm-up", Runtime: JavaScript, Source: warmUpSource, Timeout: time.Second})
	if errors.Is(err, errNoRuntime) {
		return nil
	}
	if err != nil {
		return err
	}
	defer c.Close()
	_, err = c.Invoke(context.Background(), json.RawMessage(warmUpRequest))
	return err
}
