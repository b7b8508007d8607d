//go:build !nojsonnet

package lambda

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/google/go-jsonnet"
	"github.com/google/go-jsonnet/ast"
)

// errNoImports is what an import in a Jsonnet function fails with.
var errNoImports = errors.New("imports are not available: functions run without a file system")

// jsonnetRuntime evaluates Jsonnet functions with go-jsonnet, in process; the
// gateway runs it in a sandboxed worker (NewSandboxedJsonnet), which kills an
// evaluation past its timeout.
type jsonnetRuntime struct {
	opts    Options
	running *runningCount
}

// NewJsonnet returns the Jsonnet runtime. A source is, as in Metacontroller's
// examples, a function of the request:
//
//	function(request) { local parent = request.parent, children: [...], status: {...} }
//
// called with the request as the argument "request"; std.trace output is the call's
// logs and std.extVar reads Function.Env. Imports are refused.
//
// go-jsonnet builds its standard library for every evaluation, which costs more than
// a small hook itself. So a function is served by resident evaluators: long-running
// evaluations (see residentSource) whose native function hands each response back
// and returns the next request, taken from a channel, so that std and the
// function's top-level locals are built once per evaluator rather than once per
// call. Jsonnet has no side effects, so a call cannot see what an earlier one did;
// only a std.trace in a top-level local shows once per evaluator instead of once
// per call.
//
// go-jsonnet cannot be interrupted: at the timeout the call returns, a fresh
// evaluator takes the stuck one's place, and the stuck one ends when its evaluation
// does (Stats counts it as busy meanwhile). So that a function whose calls run
// long cannot take every CPU, while as many of its evaluations as it has evaluators
// are still running past their timeout, its calls fail at once.
func NewJsonnet(opts Options) Runtime {
	return &jsonnetRuntime{opts: opts.withDefaults(), running: &runningCount{}}
}

// Stats counts the evaluations in progress (abandoned ones included) as busy.
func (j *jsonnetRuntime) Stats() PoolStats {
	return PoolStats{Busy: int(j.running.n.Load())}
}

// Compile parses the source once.
func (j *jsonnetRuntime) Compile(fn Function) (Compiled, error) {
	node, err := jsonnet.SnippetToAST(fn.Name, fn.Source)
	if err != nil {
		return nil, jsonnetCompileError(fn.Name, err)
	}
	return &jsonnetFunction{
		fn: fn, node: node, timeout: j.opts.timeout(fn), running: j.running,
		evaluators: j.opts.JsonnetEvaluators,
		jobs:       make(chan *jsonnetJob),
		closed:     make(chan struct{}),
	}, nil
}

// located is go-jsonnet's static error.
type located interface {
	Loc() ast.LocationRange
}

func jsonnetCompileError(name string, err error) *CompileError {
	ce := &CompileError{Function: name, Message: err.Error()}
	var loc located
	if errors.As(err, &loc) {
		where := loc.Loc()
		ce.Line, ce.Column = where.Begin.Line, where.Begin.Column
		ce.Message = strings.TrimPrefix(err.Error(), where.String()+" ")
	}
	return ce
}

// residentFile names the resident program in stack traces, which leave it out.
const residentFile = "<metalambda-resident>"

// residentCalls is how many calls one resident evaluation serves before it ends and
// a new one starts (its std.range is that long).
const residentCalls = 1000

// residentSource serves residentCalls calls of the function f, given as a
// top-level argument, with the native functions named by its two other arguments
// (residentNatives). next blocks until the first call arrives and returns its
// request; reply answers a call with f's response, then blocks until the next
// call arrives and returns its request, the accumulator of the fold, ready before
// f is called: so the trace output goes to the right call even when f never
// reads its request. What does not change from call to call (the native
// functions, whether f is a function) is looked up once per evaluation. The
// frames under f's call are as many as they have always been: a function's
// deepest recursion must not depend on this loop.
const residentSource = `function(f, nextName, replyName)
  local next = std.native(nextName), reply = std.native(replyName);
  if std.isFunction(f) then
    std.foldl(function(request, i) reply(f(request=request)), std.range(1, %[1]d), next())
  else
    std.foldl(function(request, i) reply(f), std.range(1, %[1]d), next())`

// residentNatives names the native functions of the resident loop in this
// process: names a function cannot guess, so that it cannot call them itself to
// take, or answer, another call.
var residentNatives = sync.OnceValue(func() [2]string {
	var b [16]byte
	_, _ = rand.Read(b[:])
	suffix := hex.EncodeToString(b[:])
	return [2]string{"metalambda.next." + suffix, "metalambda.reply." + suffix}
})

// residentProgram is residentSource parsed at its first use: every process that
// links this package (the gateway, each worker) would parse it at start, and most
// never evaluate Jsonnet.
var residentProgram = sync.OnceValue(func() ast.Node {
	node, err := jsonnet.SnippetToAST(residentFile, fmt.Sprintf(residentSource, residentCalls))
	if err != nil {
		panic(err)
	}
	return node
})

// jsonnetFunction is a parsed Jsonnet function and its resident evaluators.
type jsonnetFunction struct {
	fn         Function
	node       ast.Node
	timeout    time.Duration
	running    *runningCount
	evaluators int

	start     sync.Once
	stuck     atomic.Int32 // abandoned evaluations still running
	alive     atomic.Int32 // evaluator goroutines
	jobs      chan *jsonnetJob
	closed    chan struct{}
	closeOnce sync.Once
}

// Job states: a job is answered or abandoned, whichever comes first.
const (
	jobPending int32 = iota
	jobAnswered
	jobAbandoned
)

// jsonnetJob is one call, handed to whichever evaluator takes it.
type jsonnetJob struct {
	request any
	logs    *logBuffer
	done    chan jsonnetOutcome // buffered: the answer never blocks the evaluator
	state   atomic.Int32
	// answer, when set, takes the outcome instead of done, on the evaluator's
	// goroutine: its caller waits for it whatever the time (a script worker).
	answer func(jsonnetOutcome)
}

type jsonnetOutcome struct {
	output []byte
	err    error
}

// Invoke hands the request to a resident evaluator and waits for its answer until
// the timeout.
func (f *jsonnetFunction) Invoke(ctx context.Context, request json.RawMessage) (Result, error) {
	decoded, err := decodeJSON(request)
	if err != nil {
		return Result{}, fmt.Errorf("function %s: %w: %v", f.fn.Name, ErrInvalidRequest, err)
	}
	if n := int(f.stuck.Load()); n >= f.evaluators {
		return Result{}, &InvokeError{Function: f.fn.Name, Reason: ReasonTimeout, Message: fmt.Sprintf(
			"%d earlier calls are still running past their timeout of %s (a Jsonnet evaluation cannot be interrupted); calls fail until one ends", n, f.timeout)}
	}
	f.start.Do(func() {
		for range f.evaluators {
			f.spawn()
		}
	})
	ctx, cancel := context.WithTimeout(ctx, f.timeout)
	defer cancel()
	job := &jsonnetJob{request: decoded, logs: &logBuffer{}, done: make(chan jsonnetOutcome, 1)}
	select {
	case f.jobs <- job:
	case <-ctx.Done():
		return Result{}, doneError(ctx, f.fn.Name, f.timeout)
	case <-f.closed:
		return Result{}, fmt.Errorf("function %s: %w", f.fn.Name, ErrClosed)
	}
	select {
	case out := <-job.done:
		return f.result(out, job.logs)
	case <-ctx.Done():
		if !job.state.CompareAndSwap(jobPending, jobAbandoned) {
			return f.result(<-job.done, job.logs) // answered at the last moment
		}
		f.stuck.Add(1)
		f.spawn() // the stuck evaluator retires once its evaluation ends
		return Result{Logs: job.logs.String()}, doneError(ctx, f.fn.Name, f.timeout)
	}
}

func (f *jsonnetFunction) result(out jsonnetOutcome, logs *logBuffer) (Result, error) {
	if out.err != nil {
		return Result{Logs: logs.String()}, exception(f.fn.Name, jsonnetErrorMessage(out.err))
	}
	response, err := compactObject(f.fn.Name, out.output)
	return Result{Response: response, Logs: logs.String()}, err
}

// Close ends the evaluators: idle ones at once, busy ones after their call.
func (f *jsonnetFunction) Close() {
	f.closeOnce.Do(func() { close(f.closed) })
}

func (f *jsonnetFunction) spawn() {
	e := &jsonnetEvaluator{f: f}
	f.alive.Add(1)
	go func() {
		defer f.alive.Add(-1)
		e.run()
	}()
}

// errRetired ends a resident evaluation whose evaluator is closed or replaced.
var errRetired = errors.New("evaluator retired")

// jsonnetEvaluator runs resident evaluations one after another. Its fields belong
// to its goroutine: go-jsonnet calls next, reply and Write from the evaluation.
type jsonnetEvaluator struct {
	f *jsonnetFunction
	// take, when set, waits for the next call instead of the function's jobs
	// channel; an error retires the evaluator.
	take    func() (*jsonnetJob, error)
	current *jsonnetJob
	retired bool
	// served counts the calls the current evaluation answered.
	served int
	// replySize is the longest response so far, what the next one is given.
	replySize int
}

func (e *jsonnetEvaluator) run() {
	natives := residentNatives()
	for !e.retired {
		vm := jsonnet.MakeVM()
		vm.Importer(noImporter{})
		vm.SetTraceOut(e)
		for k, v := range e.f.fn.Env {
			vm.ExtVar(k, v)
		}
		vm.NativeFunction(&jsonnet.NativeFunction{Name: natives[0], Func: e.next})
		vm.NativeFunction(&jsonnet.NativeFunction{Name: natives[1], Params: ast.Identifiers{"response"}, Func: e.reply})
		vm.TLANode("f", e.f.node)
		vm.TLAVar("nextName", natives[0])
		vm.TLAVar("replyName", natives[1])
		e.served = 0
		_, err := vm.Evaluate(residentProgram())
		if job := e.current; job != nil {
			// The function failed: the evaluation ends with the call's error.
			e.finish(job, jsonnetOutcome{err: err})
		}
	}
}

// next waits for the first call of an evaluation and returns its request.
func (e *jsonnetEvaluator) next([]any) (any, error) {
	if e.current != nil || e.served > 0 {
		return nil, errors.New("next during a call")
	}
	return e.takeNext()
}

// takeNext waits for a call, makes it the current one and returns its request.
func (e *jsonnetEvaluator) takeNext() (any, error) {
	take := e.take
	if take == nil {
		take = e.fromJobs
	}
	job, err := take()
	if err != nil {
		e.retired = true
		return nil, errRetired
	}
	e.current = job
	e.f.running.n.Add(1)
	return job.request, nil
}

// fromJobs waits for a call on the function's jobs channel.
func (e *jsonnetEvaluator) fromJobs() (*jsonnetJob, error) {
	select {
	case job := <-e.f.jobs:
		return job, nil
	case <-e.f.closed:
		return nil, errRetired
	}
}

// reply answers the current call with the function's response, then waits for
// the next call and returns its request; after the evaluation's last call, it
// returns null.
func (e *jsonnetEvaluator) reply(args []any) (any, error) {
	job := e.current
	if job == nil {
		return nil, errors.New("reply without a call")
	}
	out, err := appendJSON(make([]byte, 0, e.replySize), args[0])
	e.replySize = max(e.replySize, len(out))
	e.finish(job, jsonnetOutcome{output: out, err: err})
	if e.retired {
		return nil, errRetired
	}
	if e.served++; e.served == residentCalls {
		return nil, nil
	}
	return e.takeNext()
}

// finish answers job unless its caller gave up, in which case a replacement
// evaluator already runs and this one retires.
func (e *jsonnetEvaluator) finish(job *jsonnetJob, out jsonnetOutcome) {
	e.current = nil
	e.f.running.n.Add(-1)
	if job.answer != nil {
		job.answer(out)
		return
	}
	if job.state.CompareAndSwap(jobPending, jobAnswered) {
		job.done <- out
		return
	}
	e.f.stuck.Add(-1)
	e.retired = true
}

// Write receives std.trace output for the current call.
func (e *jsonnetEvaluator) Write(p []byte) (int, error) {
	if e.current != nil {
		return e.current.logs.Write(p)
	}
	return len(p), nil
}

// maxStackFrames bounds the stack trace in an error message.
const maxStackFrames = 20

// jsonnetErrorMessage is a runtime error's message and stack.
func jsonnetErrorMessage(err error) string {
	var rt jsonnet.RuntimeError
	if !errors.As(err, &rt) {
		return err.Error()
	}
	var b strings.Builder
	b.WriteString(rt.Msg)
	frames := make([]jsonnet.TraceFrame, 0, len(rt.StackTrace))
	for _, frame := range rt.StackTrace {
		if frame.Loc.FileName != residentFile {
			frames = append(frames, frame)
		}
	}
	for i, frame := range frames {
		if i == maxStackFrames {
			fmt.Fprintf(&b, "\n\t... %d more frames", len(frames)-i)
			break
		}
		fmt.Fprintf(&b, "\n\t%s %s", frame.Loc.String(), frame.Name)
	}
	return b.String()
}

// noImporter refuses every import.
type noImporter struct{}

func (noImporter) Import(importedFrom, importedPath string) (jsonnet.Contents, string, error) {
	return jsonnet.Contents{}, "", fmt.Errorf("import %q: %w", importedPath, errNoImports)
}

// runningCount counts evaluations in progress.
type runningCount struct {
	n atomic.Int64
}

// serveWorker runs one resident evaluator on this goroutine whose next call is
// read straight from stdin and whose answer is written straight to stdout.
func (f *jsonnetFunction) serveWorker(frames *frameReader, w *frameWriter) int {
	code := 0
	logs := &logBuffer{}
	job := &jsonnetJob{logs: logs}
	job.answer = func(out jsonnetOutcome) {
		code = w.send(callReply(f.result(out, logs)))
	}
	e := &jsonnetEvaluator{f: f}
	var dec jsonDecoder
	e.take = func() (*jsonnetJob, error) {
		for code == 0 {
			request, c, ok := frames.next(w)
			if !ok {
				code = c
				break
			}
			decoded, err := dec.decode(request)
			if err != nil {
				code = w.send(callReply(Result{}, fmt.Errorf("function %s: %w: %v", f.fn.Name, ErrInvalidRequest, err)))
				continue
			}
			logs.reset()
			job.request = decoded
			return job, nil
		}
		return nil, errRetired
	}
	e.run()
	return code
}

// warmUpJsonnet parses the resident loop (see warmUp).
func warmUpJsonnet() error {
	residentProgram()
	residentNatives()
	return nil
}
