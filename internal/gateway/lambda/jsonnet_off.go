//go:build nojsonnet

package lambda

// NewJsonnet returns a runtime that refuses every function: this executable was
// built without Jsonnet (runtime_off.go).
func NewJsonnet(Options) Runtime { return missingRuntime{Jsonnet, "nojsonnet"} }

// warmUpJsonnet has nothing to warm up here.
func warmUpJsonnet() error { return nil }
