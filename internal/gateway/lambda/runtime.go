// Package lambda compiles and runs hook functions written in JavaScript (goja),
// Python (CPython) or Jsonnet (go-jsonnet), each in warm sandboxed worker
// processes, or Go (builtin functions compiled into the gateway, in process). A
// function takes the hook's JSON request and returns its JSON response.
package lambda

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"time"
)

// Names of the runtimes.
const (
	JavaScript = "javascript"
	Python     = "python"
	Jsonnet    = "jsonnet"
	Builtin    = "builtin"
)

// Function is what a runtime compiles.
type Function struct {
	// Name identifies the function in errors and logs ("namespace/name").
	Name    string
	Runtime string
	Source  string
	// Handler is the entry point; empty means the runtime's default.
	Handler string
	Timeout time.Duration
	Env     map[string]string
	// Network gives a sandboxed Python worker the host's network instead of a
	// loopback of its own; the caller decides whether a function may have it.
	// The other runtimes have no network API.
	Network bool
}

// Result is one invocation's outcome.
type Result struct {
	Response json.RawMessage
	// Logs is what the function printed (console.log, print, std.trace).
	Logs string
}

// Compiled is a function ready to be invoked concurrently.
type Compiled interface {
	// Invoke runs the function with a JSON request. A failure (exception, bad return
	// value, timeout) is an *InvokeError; Result.Logs holds the logs even then.
	Invoke(ctx context.Context, request json.RawMessage) (Result, error)
	// Close releases the function's resources (pooled VMs, worker processes).
	Close()
}

// Runtime compiles functions of one language.
type Runtime interface {
	// Compile checks and prepares fn; a syntax or load error is a *CompileError.
	Compile(fn Function) (Compiled, error)
}

// CompileError is a function that does not compile, with the position the runtime
// reports (0 when unknown).
type CompileError struct {
	Function string
	Line     int
	Column   int
	Message  string
	// Cause is ErrWorkerLost when the worker failed while loading the source, rather
	// than the source failing to load: loading it again may succeed.
	Cause error
}

// ErrWorkerLost is the cause of a load that failed because its worker did not
// answer: it exited or was killed (a process or thread it could not start, its
// memory), or ran out of time on a busy host.
var ErrWorkerLost = errors.New("the worker was lost while loading the source")

func (e *CompileError) Unwrap() error { return e.Cause }

func (e *CompileError) Error() string {
	if e.Line > 0 {
		return fmt.Sprintf("function %s does not compile: line %d, column %d: %s", e.Function, e.Line, e.Column, e.Message)
	}
	return fmt.Sprintf("function %s does not compile: %s", e.Function, e.Message)
}

// InvokeError is a failed invocation.
type InvokeError struct {
	Function string
	// Reason is "exception", "timeout", "bad-return" or "crash".
	Reason  string
	Message string
}

func (e *InvokeError) Error() string {
	return fmt.Sprintf("function %s failed (%s): %s", e.Function, e.Reason, e.Message)
}
