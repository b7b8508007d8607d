package lambda

import (
	"bytes"
	"crypto/rand"
	"encoding/hex"
	"os"
	"strconv"
	"strings"
	"testing"

	"github.com/metalambda/metalambda/internal/gateway/sandbox"
)

// zygoteRuntime is a Python runtime whose workers a zygote forks; the test is
// skipped where the sandbox cannot start one.
func zygoteRuntime(t *testing.T, opts Options) *python {
	t.Helper()
	opts.PythonZygote = ZygoteAuto
	opts = sandboxed(t, opts)
	if err := opts.Sandbox.ZygoteSupported(); err != nil {
		t.Skip(err)
	}
	return NewPython(opts).(*python)
}

// zygoteOf is the running zygote of rt's network view.
func zygoteOf(t *testing.T, rt *python, network bool) *zygotes {
	t.Helper()
	rt.mu.Lock()
	zs := rt.zygotes[network]
	rt.mu.Unlock()
	if zs == nil {
		t.Fatal("no zygote for the network view")
	}
	return zs
}

func TestZygoteForksWorkers(t *testing.T) {
	rt := zygoteRuntime(t, Options{})
	c := mustCompile(t, rt, pyFn("zecho", pyEcho))
	assertEcho(t, c, "a")
	pid, forks := zygoteOf(t, rt, false).stats()
	if pid == 0 || forks == 0 {
		t.Fatalf("zygote pid %d, forks %d: the worker was not forked", pid, forks)
	}
	pids := workerProcesses("test/zecho")
	if len(pids) != 1 {
		t.Fatalf("workers of the function: %v", pids)
	}
	parent := statusField(t, pids[0], "PPid")
	if parent != strconv.Itoa(pid) {
		t.Errorf("the worker's parent is %s, want the zygote %d", parent, pid)
	}
}

// statusField is a field of /proc/pid/status.
func statusField(t *testing.T, pid int, name string) string {
	t.Helper()
	raw, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/status")
	if err != nil {
		t.Fatal(err)
	}
	for _, line := range strings.Split(string(raw), "\n") {
		if v, ok := strings.CutPrefix(line, name+":"); ok {
			return strings.TrimSpace(v)
		}
	}
	t.Fatalf("no %s in /proc/%d/status", name, pid)
	return ""
}

func token(t *testing.T) string {
	b := make([]byte, 16)
	_, _ = rand.Read(b)
	return "tok" + hex.EncodeToString(b)
}

var _ = bytes.Contains
var _ = sandbox.DefaultUID
