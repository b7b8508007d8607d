package sandbox

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
)

// memoryLimitChild, set in a child's environment, makes TestMemoryLimit print
// MemoryLimit in that child.
const memoryLimitChild = "METALAMBDA_TEST_MEMORY_LIMIT_CHILD"

// MemoryLimit finds the limit of the caller's cgroup, and a smaller one above it
// wins over a larger one below.
func TestMemoryLimit(t *testing.T) {
	if os.Getenv(memoryLimitChild) != "" {
		limit, ok := MemoryLimit()
		fmt.Printf("limit=%d ok=%v\n", limit, ok)
		return
	}
	own, err := ownCgroups()
	if err != nil || own["memory"] == "" || os.Geteuid() != 0 {
		t.Skipf("needs root and the cgroup v1 memory hierarchy (%v)", err)
	}
	outer := filepath.Join(cgroupRoot, "memory", own["memory"], "metalambda-test-limit-"+strconv.Itoa(os.Getpid()))
	inner := filepath.Join(outer, "inner")
	for _, dir := range []string{outer, inner} {
		if err := os.Mkdir(dir, 0o755); err != nil {
			t.Skipf("cannot make a cgroup here: %v", err)
		}
	}
	t.Cleanup(func() { os.Remove(inner); os.Remove(outer) })
	child := func(dir string) string {
		t.Helper()
		self, _ := os.Executable()
		cmd := exec.Command("sh", "-c", `echo $$ > "$1/cgroup.procs" && exec "$2" -test.run '^TestMemoryLimit$'`, "sh", dir, self)
		cmd.Env = append(os.Environ(), memoryLimitChild+"=1")
		out, err := cmd.CombinedOutput()
		if err != nil {
			t.Fatalf("%v: %s", err, out)
		}
		return strings.Fields(string(out))[0]
	}
	// The test's own cgroup and those above it may have a limit already.
	above, _ := MemoryLimit()
	want := func(v int64) string {
		if above > 0 && above < v {
			v = above
		}
		return fmt.Sprintf("limit=%d", v)
	}
	if got := child(inner); got != fmt.Sprintf("limit=%d", above) {
		t.Errorf("without limits of their own: %s, want limit=%d", got, above)
	}
	write := func(dir string, v int64) {
		t.Helper()
		if err := os.WriteFile(filepath.Join(dir, "memory.limit_in_bytes"), []byte(strconv.FormatInt(v, 10)), 0); err != nil {
			t.Fatal(err)
		}
	}
	write(outer, 300<<20)
	if got := child(inner); got != want(300<<20) {
		t.Errorf("with the parent's limit: %s, want %s", got, want(300<<20))
	}
	write(inner, 200<<20)
	if got := child(inner); got != want(200<<20) {
		t.Errorf("with a smaller limit of its own: %s, want %s", got, want(200<<20))
	}
}
