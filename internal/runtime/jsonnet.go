package runtime

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"sync/atomic"
	"time"

	"github.com/google/go-jsonnet"
	"github.com/google/go-jsonnet/ast"
)

// errNoImports is what an import in a Jsonnet function fails with.
var errNoImports = errors.New("imports are not available: functions run without a file system")

// jsonnetRuntime evaluates Jsonnet functions with go-jsonnet, in process.
type jsonnetRuntime struct {
	opts    Options
	running *runningCount
}

// NewJsonnet returns the Jsonnet runtime. A source is, as in Metacontroller's
// examples, a function of the request:
//
//	function(request) { local parent = request.parent, children: [...], status: {...} }
//
// called with the request as the top-level argument "request"; std.trace output is
// the call's logs and std.extVar reads Function.Env. Imports are refused. go-jsonnet cannot be interrupted: at the timeout the call
// returns, but its evaluation goroutine runs on until it ends by itself (Stats
// counts it as busy meanwhile).
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
	return &jsonnetFunction{fn: fn, node: node, timeout: j.opts.timeout(fn), running: j.running}, nil
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

// jsonnetFunction is a parsed Jsonnet function.
type jsonnetFunction struct {
	fn      Function
	node    ast.Node
	timeout time.Duration
	running *runningCount
}

type jsonnetOutcome struct {
	output string
	err    error
}

// Invoke evaluates the function in a fresh VM, in a goroutine abandoned at the
// timeout.
func (f *jsonnetFunction) Invoke(ctx context.Context, request json.RawMessage) (Result, error) {
	req, err := compactRequest(f.fn.Name, request)
	if err != nil {
		return Result{}, err
	}
	ctx, cancel := context.WithTimeout(ctx, f.timeout)
	defer cancel()
	logs := &logBuffer{}
	done := make(chan jsonnetOutcome, 1)
	f.running.n.Add(1)
	go func() {
		defer f.running.n.Add(-1)
		output, err := f.evaluate(req, logs)
		done <- jsonnetOutcome{output: output, err: err}
	}()
	select {
	case out := <-done:
		return f.result(out, logs)
	case <-ctx.Done():
		return Result{Logs: logs.String()}, doneError(ctx, f.fn.Name, f.timeout)
	}
}

func (f *jsonnetFunction) evaluate(request []byte, logs *logBuffer) (string, error) {
	vm := jsonnet.MakeVM()
	vm.Importer(noImporter{})
	vm.SetTraceOut(logs)
	vm.TLACode("request", string(request))
	for k, v := range f.fn.Env {
		vm.ExtVar(k, v)
	}
	return vm.Evaluate(f.node)
}

func (f *jsonnetFunction) result(out jsonnetOutcome, logs *logBuffer) (Result, error) {
	if out.err != nil {
		return Result{Logs: logs.String()}, exception(f.fn.Name, jsonnetErrorMessage(out.err))
	}
	response, err := objectResponse(f.fn.Name, []byte(out.output))
	return Result{Response: response, Logs: logs.String()}, err
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
	for i, frame := range rt.StackTrace {
		if i == maxStackFrames {
			fmt.Fprintf(&b, "\n\t... %d more frames", len(rt.StackTrace)-i)
			break
		}
		where := frame.Loc
		fmt.Fprintf(&b, "\n\t%s %s", where.String(), frame.Name)
	}
	return b.String()
}

// Close does nothing: a Jsonnet function holds no resources.
func (f *jsonnetFunction) Close() {}

// noImporter refuses every import.
type noImporter struct{}

func (noImporter) Import(importedFrom, importedPath string) (jsonnet.Contents, string, error) {
	return jsonnet.Contents{}, "", fmt.Errorf("import %q: %w", importedPath, errNoImports)
}

// runningCount counts evaluations in progress.
type runningCount struct {
	n atomic.Int64
}
