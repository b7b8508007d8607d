package lambda

import (
	"context"
	"encoding/json"
	"fmt"
	"maps"
	"sort"
	"strings"
	"time"

	"github.com/metalambda/metalambda/internal/tracing"
)

// BuiltinFunc is a hook function written in Go and compiled into the gateway.
type BuiltinFunc func(ctx context.Context, request json.RawMessage) (json.RawMessage, error)

// Builtins maps names to builtin functions.
type Builtins map[string]BuiltinFunc

// Names returns the registered names, sorted.
func (b Builtins) Names() []string {
	names := make([]string, 0, len(b))
	for name := range b {
		names = append(names, name)
	}
	sort.Strings(names)
	return names
}

type envKey struct{}

// FunctionEnv is the env of the Function a builtin runs as (its spec.env), from the
// context the builtin is called with; nil outside a builtin call. It lets an
// operator configure a builtin through its Function.
func FunctionEnv(ctx context.Context) map[string]string {
	env, _ := ctx.Value(envKey{}).(map[string]string)
	return env
}

// builtinRuntime runs the functions of Options.Builtins.
type builtinRuntime struct {
	opts Options
}

// NewBuiltin returns the builtin runtime: Function.Handler, or if empty the
// trimmed Function.Source, names a function of opts.Builtins.
func NewBuiltin(opts Options) Runtime {
	return &builtinRuntime{opts: opts.withDefaults()}
}

// Compile looks the function up.
func (b *builtinRuntime) Compile(fn Function) (Compiled, error) {
	name := fn.Handler
	if name == "" {
		name = strings.TrimSpace(fn.Source)
	}
	call, ok := b.opts.Builtins[name]
	if !ok || call == nil {
		return nil, &CompileError{Function: fn.Name, Message: fmt.Sprintf("no builtin function %q (known: %s)", name, strings.Join(b.opts.Builtins.Names(), ", "))}
	}
	return &builtinFunction{fn: fn, call: call, timeout: b.opts.timeout(fn)}, nil
}

type builtinFunction struct {
	fn      Function
	call    BuiltinFunc
	timeout time.Duration
}

type builtinOutcome struct {
	response json.RawMessage
	err      error
}

// Invoke calls the function with a context ending at the timeout; one that ignores
// its context is abandoned there.
func (f *builtinFunction) Invoke(ctx context.Context, request json.RawMessage) (Result, error) {
	if !json.Valid(request) {
		return Result{}, fmt.Errorf("function %s: %w", f.fn.Name, ErrInvalidRequest)
	}
	ctx, cancel := context.WithTimeout(context.WithValue(ctx, envKey{}, maps.Clone(f.fn.Env)), f.timeout)
	defer cancel()
	_, span := workerSpan(ctx, Builtin)
	res, err := f.wait(ctx, request)
	tracing.End(span, err)
	return res, err
}

// wait runs the call on a goroutine of its own, abandoned at ctx's end.
func (f *builtinFunction) wait(ctx context.Context, request json.RawMessage) (Result, error) {
	done := make(chan builtinOutcome, 1)
	go func() {
		done <- f.safeCall(ctx, request)
	}()
	select {
	case out := <-done:
		return f.result(ctx, out)
	case <-ctx.Done():
		return Result{}, doneError(ctx, f.fn.Name, f.timeout)
	}
}

// safeCall turns a panic into an exception.
func (f *builtinFunction) safeCall(ctx context.Context, request json.RawMessage) (out builtinOutcome) {
	defer func() {
		if p := recover(); p != nil {
			out = builtinOutcome{err: exception(f.fn.Name, fmt.Sprintf("panic: %v", p))}
		}
	}()
	response, err := f.call(ctx, request)
	return builtinOutcome{response: response, err: err}
}

func (f *builtinFunction) result(ctx context.Context, out builtinOutcome) (Result, error) {
	if out.err != nil && ctx.Err() != nil {
		return Result{}, doneError(ctx, f.fn.Name, f.timeout)
	}
	if _, isInvoke := out.err.(*InvokeError); isInvoke {
		return Result{}, out.err
	}
	if out.err != nil {
		return Result{}, &InvokeError{Function: f.fn.Name, Reason: ReasonException, Message: out.err.Error()}
	}
	response, err := objectResponse(f.fn.Name, out.response)
	return Result{Response: response}, err
}

// Close does nothing: a builtin holds no resources.
func (f *builtinFunction) Close() {}
