//go:build !nojavascript

package lambda

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"reflect"
	"strings"
	"time"

	"github.com/dop251/goja"
	"github.com/dop251/goja/parser"
	"github.com/go-json-experiment/json/jsontext"

	"github.com/metalambda/metalambda/internal/tracing"
)

// DefaultJavaScriptHandler is the function a JavaScript source defines when
// Function.Handler is empty.
const DefaultJavaScriptHandler = "sync"

// jsMaxCallStack bounds recursion so a runaway function throws a RangeError.
const jsMaxCallStack = 10000

// errInterrupted is the value a VM is interrupted with when its call's context ends.
var errInterrupted = errors.New("interrupted")

// javaScript runs functions in goja VMs, in process. A function has no file system,
// network, timers or modules: only the ECMAScript built-ins, console and
// process.env (Function.Env). There is no memory limit: the gateway runs it in a
// sandboxed worker (NewSandboxedJavaScript), which runs this runtime.
type javaScript struct {
	opts  Options
	pools *poolSet
}

// NewJavaScript returns the JavaScript runtime. A source either defines
//
//	function sync(request) { return response }
//
// (the handler named by Function.Handler, default "sync", called with the request
// object) or, in the fission style of Metacontroller's examples,
//
//	module.exports = async function(context) { return {status: 200, body: response} }
//
// where context.request.body is the request. Either may be async.
func NewJavaScript(opts Options) Runtime {
	return &javaScript{opts: opts.withDefaults(), pools: newPoolSet(opts.MemoryBudget)}
}

// Stats counts the VMs of all open JavaScript functions.
func (j *javaScript) Stats() PoolStats {
	return j.pools.Stats()
}

// Compile compiles the source once and loads it into a first VM, so that top-level
// exceptions and a missing handler are compile errors.
func (j *javaScript) Compile(fn Function) (Compiled, error) {
	program, err := jsCompile(fn)
	if err != nil {
		return nil, err
	}
	f := &jsFunction{fn: fn, program: program, timeout: j.opts.timeout(fn)}
	f.pool = newPool(j.opts.JavaScriptPoolSize, j.pools, f.newVM, (*jsVM).interrupt, nil)
	vm, err := f.pool.get(context.Background())
	if err != nil {
		f.pool.close()
		return nil, err
	}
	f.pool.put(vm, true)
	return f, nil
}

// jsCompile parses and compiles the source; parsing first keeps the position of a
// syntax error, which goja.Compile folds into its message.
func jsCompile(fn Function) (*goja.Program, error) {
	ast, err := parser.ParseFile(nil, fn.Name, fn.Source, 0)
	if err != nil {
		return nil, jsCompileError(fn.Name, err)
	}
	program, err := goja.CompileAST(ast, false)
	if err != nil {
		return nil, jsCompileError(fn.Name, err)
	}
	return program, nil
}

// jsCompileError converts goja's parse and compile errors.
func jsCompileError(name string, err error) *CompileError {
	ce := &CompileError{Function: name, Message: err.Error()}
	var list parser.ErrorList
	var syntax *goja.CompilerSyntaxError
	switch {
	case errors.As(err, &list) && len(list) > 0:
		ce.Line, ce.Column, ce.Message = list[0].Position.Line, list[0].Position.Column, list[0].Message
	case errors.As(err, &syntax) && syntax.File != nil:
		pos := syntax.File.Position(syntax.Offset)
		ce.Line, ce.Column, ce.Message = pos.Line, pos.Column, syntax.Message
	}
	return ce
}

// jsFunction is a compiled JavaScript function and its pool of VMs.
type jsFunction struct {
	fn      Function
	program *goja.Program
	timeout time.Duration
	pool    *pool[*jsVM]
}

// Invoke runs the function in a pooled VM. A VM whose call timed out is discarded.
func (f *jsFunction) Invoke(ctx context.Context, request json.RawMessage) (Result, error) {
	ctx, cancel := context.WithTimeout(ctx, f.timeout)
	defer cancel()
	vm, err := f.pool.get(ctx)
	if err != nil {
		return Result{}, f.getError(ctx, err)
	}
	logs := &logBuffer{}
	vm.logs = logs
	_, span := workerSpan(ctx, JavaScript)
	response, interrupted, err := vm.invoke(ctx, f.fn.Name, request)
	tracing.End(span, err)
	vm.logs = nil
	f.pool.put(vm, !interrupted)
	if interrupted {
		err = doneError(ctx, f.fn.Name, f.timeout)
	}
	return Result{Response: response, Logs: logs.String()}, err
}

func (f *jsFunction) getError(ctx context.Context, err error) error {
	if ctx.Err() != nil {
		return doneError(ctx, f.fn.Name, f.timeout)
	}
	return fmt.Errorf("function %s: %w", f.fn.Name, err)
}

// Close drops the VMs; calls in progress are interrupted.
func (f *jsFunction) Close() {
	f.pool.close()
}

// newVM creates a VM with the function loaded.
func (f *jsFunction) newVM() (*jsVM, error) {
	vm := &jsVM{rt: goja.New()}
	vm.rt.SetMaxCallStackSize(jsMaxCallStack)
	if err := vm.installGlobals(f.fn.Env); err != nil {
		return nil, err
	}
	ctx, cancel := context.WithTimeout(context.Background(), f.timeout)
	defer cancel()
	interrupted, err := vm.guard(ctx, func() error {
		_, err := vm.rt.RunProgram(f.program)
		return err
	})
	if interrupted {
		return nil, &CompileError{Function: f.fn.Name, Message: fmt.Sprintf("top-level code did not finish within %s", f.timeout)}
	}
	if err != nil {
		return nil, jsLoadError(f.fn.Name, err)
	}
	return vm, vm.findEntry(f.fn)
}

// jsLoadError is an exception thrown by top-level code, at its position.
func jsLoadError(name string, err error) *CompileError {
	ce := &CompileError{Function: name, Message: "top-level code threw: " + err.Error()}
	var ex *goja.Exception
	if errors.As(err, &ex) && len(ex.Stack()) > 0 {
		pos := ex.Stack()[0].Position()
		ce.Line, ce.Column, ce.Message = pos.Line, pos.Column, "top-level code threw: "+ex.Value().String()
	}
	return ce
}

// jsVM is one goja runtime with the function loaded. It serves one call at a time.
type jsVM struct {
	rt *goja.Runtime
	// logs receives console output of the current call.
	logs *logBuffer
	// entry is the handler; contextStyle means it takes a fission context.
	entry        goja.Callable
	contextStyle bool
	stringify    goja.Callable
	// dec and src read a call's request (fromJSON).
	dec *jsontext.Decoder
	src bytes.Reader
}

// interrupt stops the VM's current call, if any; it is the pool's destroy.
func (vm *jsVM) interrupt() {
	vm.rt.Interrupt(ErrClosed)
}

func (vm *jsVM) installGlobals(env map[string]string) error {
	stringify, ok := goja.AssertFunction(vm.rt.Get("JSON").ToObject(vm.rt).Get("stringify"))
	if !ok {
		return errors.New("goja has no JSON.stringify")
	}
	vm.stringify = stringify
	module := vm.rt.NewObject()
	exports := vm.rt.NewObject()
	return errors.Join(
		module.Set("exports", exports),
		vm.rt.Set("module", module),
		vm.rt.Set("exports", exports),
		vm.rt.Set("require", vm.require),
		vm.rt.Set("console", vm.console()),
		vm.rt.Set("process", vm.process(env)),
	)
}

// process is {env: Function.Env}, as Node.js functions read their configuration.
func (vm *jsVM) process(env map[string]string) *goja.Object {
	envObj := vm.rt.NewObject()
	for k, v := range env {
		_ = envObj.Set(k, v)
	}
	process := vm.rt.NewObject()
	_ = process.Set("env", envObj)
	return process
}

// require throws: functions have no modules.
func (vm *jsVM) require(call goja.FunctionCall) goja.Value {
	name := call.Argument(0).String()
	panic(vm.rt.NewGoError(fmt.Errorf("require(%q) is not available: functions run without modules, file system or network", name)))
}

func (vm *jsVM) console() *goja.Object {
	console := vm.rt.NewObject()
	for _, level := range []string{"log", "info", "warn", "error", "debug"} {
		_ = console.Set(level, vm.consoleLog)
	}
	return console
}

// consoleLog writes its arguments, objects as JSON, on one line of the call's logs.
func (vm *jsVM) consoleLog(call goja.FunctionCall) goja.Value {
	if vm.logs == nil {
		return goja.Undefined()
	}
	parts := make([]string, len(call.Arguments))
	for i, arg := range call.Arguments {
		parts[i] = vm.format(arg)
	}
	_, _ = vm.logs.Write([]byte(strings.Join(parts, " ") + "\n"))
	return goja.Undefined()
}

func (vm *jsVM) format(v goja.Value) string {
	obj, ok := v.(*goja.Object)
	if !ok {
		return v.String()
	}
	if _, isFunc := goja.AssertFunction(obj); isFunc {
		return v.String()
	}
	if _, isError := obj.Export().(error); isError || obj.ClassName() == "Error" {
		return v.String()
	}
	s, err := vm.stringify(goja.Undefined(), v)
	if err != nil || goja.IsUndefined(s) {
		return v.String()
	}
	return s.String()
}

// findEntry resolves the handler: a global function or module.exports.
func (vm *jsVM) findEntry(fn Function) error {
	handler := fn.Handler
	if handler == "" {
		handler = DefaultJavaScriptHandler
	}
	exports := vm.rt.Get("module").ToObject(vm.rt).Get("exports")
	exportsFn, exportsIsFn := goja.AssertFunction(exports)
	if exportsIsFn && fn.Handler == "" {
		vm.entry, vm.contextStyle = exportsFn, true
		return nil
	}
	if entry, ok := goja.AssertFunction(vm.rt.Get(handler)); ok {
		vm.entry = entry
		return nil
	}
	if obj, ok := exports.(*goja.Object); ok {
		if entry, ok := goja.AssertFunction(obj.Get(handler)); ok {
			vm.entry = entry
			return nil
		}
	}
	if exportsIsFn {
		vm.entry, vm.contextStyle = exportsFn, true
		return nil
	}
	return &CompileError{Function: fn.Name, Message: fmt.Sprintf("no handler: define function %s(request) or set module.exports to a function", handler)}
}

// guard runs f, interrupting the VM when ctx ends; interrupted reports whether it
// was, in which case the VM may hold half-updated state and should be dropped.
func (vm *jsVM) guard(ctx context.Context, f func() error) (interrupted bool, err error) {
	sent := make(chan struct{})
	stop := context.AfterFunc(ctx, func() {
		vm.rt.Interrupt(errInterrupted)
		close(sent)
	})
	err = f()
	if !stop() {
		<-sent // the VM is dropped; let the interrupt land before it is
		return true, err
	}
	return false, err
}

// invoke calls the entry with the request and returns the response JSON.
func (vm *jsVM) invoke(ctx context.Context, name string, request []byte) (response json.RawMessage, interrupted bool, err error) {
	interrupted, err = vm.guard(ctx, func() error {
		var callErr error
		response, callErr = vm.call(name, request)
		return callErr
	})
	return response, interrupted, err
}

func (vm *jsVM) call(name string, request []byte) (json.RawMessage, error) {
	arg, err := vm.fromJSON(request)
	if err != nil {
		return nil, fmt.Errorf("function %s: %w: %v", name, ErrInvalidRequest, err)
	}
	if vm.contextStyle {
		arg = vm.fissionContext(arg)
	}
	ret, err := vm.entry(goja.Undefined(), arg)
	if err != nil {
		return nil, jsException(name, err)
	}
	ret, err = settle(name, ret)
	if err != nil {
		return nil, err
	}
	if vm.contextStyle {
		return vm.fissionResponse(name, ret)
	}
	return vm.toJSON(name, ret)
}

// fissionContext is {request: {body: request, headers: {...}}}.
func (vm *jsVM) fissionContext(body goja.Value) goja.Value {
	headers := vm.rt.NewObject()
	_ = headers.Set("content-type", "application/json")
	request := vm.rt.NewObject()
	_ = request.Set("body", body)
	_ = request.Set("headers", headers)
	ctx := vm.rt.NewObject()
	_ = ctx.Set("request", request)
	return ctx
}

// fissionResponse reads {status, body}: a status other than 200 is a failure, the
// body is the response, as an object or a JSON string.
func (vm *jsVM) fissionResponse(name string, ret goja.Value) (json.RawMessage, error) {
	obj, ok := ret.(*goja.Object)
	if !ok {
		return nil, badReturn(name, "returned %s, want {status: 200, body: response}", describe(ret))
	}
	body := obj.Get("body")
	if status := obj.Get("status"); status != nil && !goja.IsUndefined(status) && status.ToInteger() != 200 {
		return nil, exception(name, fmt.Sprintf("returned status %d: %s", status.ToInteger(), vm.format(nilSafe(body))))
	}
	if body == nil || goja.IsUndefined(body) || goja.IsNull(body) {
		return nil, badReturn(name, "returned no body, want {status: 200, body: response}")
	}
	if s, isString := body.Export().(string); isString {
		return objectResponse(name, []byte(s))
	}
	return vm.toJSON(name, body)
}

func (vm *jsVM) toJSON(name string, v goja.Value) (json.RawMessage, error) {
	if _, ok := v.(*goja.Object); !ok {
		return nil, badReturn(name, "returned %s, want an object", describe(v))
	}
	s, err := vm.stringify(goja.Undefined(), v)
	if err != nil {
		return nil, badReturn(name, "the response cannot be serialized: %v", err)
	}
	if goja.IsUndefined(s) {
		return nil, badReturn(name, "returned %s, want an object", describe(v))
	}
	// Only a toJSON method can make JSON.stringify of an object something else.
	return compactObject(name, []byte(s.String()))
}

// promiseType is what a promise exports as.
var promiseType = reflect.TypeFor[*goja.Promise]()

// settle unwraps a settled promise; the job queue has run when the call returned.
// Only a promise is exported: exporting an object converts all of it.
func settle(name string, v goja.Value) (goja.Value, error) {
	obj, ok := v.(*goja.Object)
	if !ok || obj.ExportType() != promiseType {
		return v, nil
	}
	p, ok := obj.Export().(*goja.Promise)
	if !ok {
		return v, nil
	}
	switch p.State() {
	case goja.PromiseStateFulfilled:
		return p.Result(), nil
	case goja.PromiseStateRejected:
		return nil, exception(name, describeThrown(p.Result()))
	default:
		return nil, badReturn(name, "the returned promise never settled (it awaits something that cannot happen here)")
	}
}

// jsException converts a thrown exception; an interrupt is passed through.
func jsException(name string, err error) error {
	var ex *goja.Exception
	if errors.As(err, &ex) {
		return exception(name, describeThrown(ex.Value()))
	}
	var interrupted *goja.InterruptedError
	if errors.As(err, &interrupted) {
		return err
	}
	var overflow *goja.StackOverflowError
	if errors.As(err, &overflow) {
		return exception(name, "RangeError: maximum call stack size exceeded"+err.Error())
	}
	return exception(name, err.Error())
}

// describeThrown is an Error's stack (which starts with its message) or the value.
func describeThrown(v goja.Value) string {
	if obj, ok := v.(*goja.Object); ok {
		if stack := obj.Get("stack"); stack != nil && !goja.IsUndefined(stack) {
			return strings.TrimRight(stack.String(), "\n")
		}
	}
	return nilSafe(v).String()
}

func describe(v goja.Value) string {
	if v == nil || goja.IsUndefined(v) {
		return "undefined"
	}
	if goja.IsNull(v) {
		return "null"
	}
	return fmt.Sprintf("%s %.100s", v.ExportType(), v.String())
}

func nilSafe(v goja.Value) goja.Value {
	if v == nil {
		return goja.Undefined()
	}
	return v
}

// serveWorker answers calls in the VM that compiling the function loaded,
// until the gateway closes the worker's stdin. The gateway kills a worker whose
// call runs past its timeout, so a call here has none.
func (f *jsFunction) serveWorker(frames *frameReader, w *frameWriter) int {
	vm, err := f.pool.get(context.Background())
	if err != nil {
		return w.send(compileReply(err))
	}
	logs := &logBuffer{}
	for {
		request, code, ok := frames.next(w)
		if !ok {
			return code
		}
		logs.reset()
		vm.logs = logs
		response, err := vm.call(f.fn.Name, request)
		vm.logs = nil
		if code := w.send(callReply(Result{Response: response, Logs: logs.String()}, err)); code != 0 {
			return code
		}
	}
}
