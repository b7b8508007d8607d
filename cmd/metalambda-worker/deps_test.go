package main

import (
	"os/exec"
	"strings"
	"testing"
)

// The Go runtime initializes every package an executable links at each of its
// starts, and the sandbox starts the launcher for every sandboxed process and
// this executable for every JavaScript and Jsonnet worker: neither may link
// what it does not use (net/http came through the span helpers, and cost a
// worker's start 2 ms of processor time; the runtimes cost a launcher's two
// thirds of it).
func TestWorkerExecutablesLinkOnlyWhatTheyUse(t *testing.T) {
	if testing.Short() {
		t.Skip("runs go list")
	}
	worker := []string{"net/http", "crypto/tls", "k8s.io/", "sigs.k8s.io/controller-runtime", "github.com/prometheus/"}
	for _, tt := range []struct {
		pkg, tags string
		denied    []string
	}{
		{".", "", worker},
		// Each runtime's worker executable (make build) links not the other
		// runtime: goja's dependencies cost a Jsonnet worker's start 4 ms of
		// processor time and 0.5 MiB of memory.
		{".", "nojsonnet", append(worker, "github.com/google/go-jsonnet")},
		{".", "nojavascript", append(worker, "github.com/dop251/goja", "github.com/google/pprof/", "github.com/dlclark/regexp2")},
		{"../metalambda-launcher", "", []string{"net/http", "github.com/dop251/goja", "github.com/google/go-jsonnet", "go.opentelemetry.io/", "internal/gateway/lambda"}},
	} {
		out, err := exec.Command("go", "list", "-deps", "-tags", tt.tags, tt.pkg).CombinedOutput()
		if err != nil {
			t.Fatalf("go list -deps %s: %v\n%s", tt.pkg, err, out)
		}
		for _, dep := range strings.Fields(string(out)) {
			for _, denied := range tt.denied {
				if dep == denied || strings.HasPrefix(dep, denied) || strings.HasSuffix(dep, "/"+denied) {
					t.Errorf("%s (tags %q) links %s", tt.pkg, tt.tags, dep)
				}
			}
		}
	}
}
