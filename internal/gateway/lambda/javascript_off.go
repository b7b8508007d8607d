//go:build nojavascript

package lambda

// NewJavaScript returns a runtime that refuses every function: this executable
// was built without JavaScript (runtime_off.go).
func NewJavaScript(Options) Runtime { return missingRuntime{JavaScript, "nojavascript"} }
