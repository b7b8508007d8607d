//go:build nojavascript || nojsonnet

package lambda

import "fmt"

// A script worker executable serves one runtime (Makefile: the build tags
// nojavascript and nojsonnet), so that it does not initialize the other's
// packages at every start (sandbox.WorkerExecutableFor). Such an executable
// has a stand-in for the runtime left out, which refuses every function.

// missingRuntime stands in for a runtime that this executable was built
// without.
type missingRuntime struct{ name, tag string }

func (m missingRuntime) Compile(fn Function) (Compiled, error) {
	return nil, &CompileError{Function: fn.Name, Cause: errNoRuntime, Message: fmt.Sprintf("this executable was built without the %s runtime (build tag %s)", m.name, m.tag)}
}
