// Package starter owns the starter sync hook of each runtime and a sample sync
// request it answers: what `metalambda fn init` writes and the dashboard offers as a
// new function's source and a test request.
package starter

import (
	"embed"
	"fmt"
)

//go:embed hook.js hook.py hook.jsonnet sample-request.json
var files embed.FS

// SampleRequestFile is the sample request's file name.
const SampleRequestFile = "sample-request.json"

// Extension is the file extension of a runtime's starter hook (".js", ".py",
// ".jsonnet"); false for a runtime without a starter.
func Extension(runtime string) (string, bool) {
	ext, ok := map[string]string{"javascript": ".js", "python": ".py", "jsonnet": ".jsonnet"}[runtime]
	return ext, ok
}

// Runtimes are the runtimes with a starter hook, sorted.
func Runtimes() []string {
	return []string{"javascript", "jsonnet", "python"}
}

// Hook is a runtime's starter hook.
func Hook(runtime string) ([]byte, error) {
	ext, ok := Extension(runtime)
	if !ok {
		return nil, fmt.Errorf("no starter hook for runtime %q: want javascript, python or jsonnet", runtime)
	}
	return files.ReadFile("hook" + ext)
}

// SampleRequest is a sync request every starter hook answers.
func SampleRequest() []byte {
	data, err := files.ReadFile(SampleRequestFile)
	if err != nil {
		panic(err) // embedded above; a unit test reads it
	}
	return data
}
