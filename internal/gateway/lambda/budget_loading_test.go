package lambda

import (
	"os"
	"strconv"
	"strings"
	"testing"
	"time"
)

// loadHog holds 96 MiB from its top level, then takes its time to finish
// loading: a cold start's worker is neither idle nor busy in its pool until
// its source has loaded.
const loadHog = `import time
held = b"x" * (96 << 20)
time.sleep(4)
def sync(request):
    return {}
`

// rssOf is the resident memory of pid, 0 once it is gone.
func rssOf(pid int) int64 {
	raw, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/statm")
	if err != nil {
		return 0
	}
	f := strings.Fields(string(raw))
	if len(f) < 2 {
		return 0
	}
	pages, _ := strconv.ParseInt(f[1], 10, 64)
	return pages * int64(os.Getpagesize())
}

// TestMemoryBudgetCountsLoadingWorkers: a worker loading its function (a
// cold start, or a Function's compile) runs the function's top-level code for
// up to its timeout and pythonStartAllowance, and may fill its memory limit
// meanwhile. Its memory must count in the budget from the moment it is taken
// from the spares or started: a tenant whose functions hold memory while they
// load would otherwise take the gateway past its budget (three quarters of its
// container's limit), unseen, as many times over as it has loads at once.
func TestMemoryBudgetCountsLoadingWorkers(t *testing.T) {
	budget := NewMemoryBudget(1 << 40)
	rt := NewPython(sandboxed(t, Options{MemoryBudget: budget, WorkerSpares: -1}))
	compiled := make(chan error, 1)
	go func() {
		c, err := rt.Compile(pyFn("loadhog", loadHog))
		if err == nil {
			c.Close()
		}
		compiled <- err
	}()
	var pid int
	waitUntil(t, func() bool {
		for _, p := range workerProcesses("test/loadhog") {
			if rssOf(p) >= 96<<20 {
				pid = p
				return true
			}
		}
		return false
	}, "the loading worker to hold its 96 MiB")
	budget.enforce(true)
	used, rss := budget.Used(), rssOf(pid)
	if rss < 96<<20 {
		t.Fatalf("the worker ended before the budget's look (%d bytes left)", rss)
	}
	// The worker's cgroup counts a little less than its resident memory (its
	// shared libraries' pages are charged to whoever read them first).
	if used < 80<<20 {
		t.Errorf("the budget counts %d bytes while a loading worker holds %d", used, rss)
	}
	select {
	case err := <-compiled:
		if err != nil {
			t.Fatal(err)
		}
	case <-time.After(30 * time.Second):
		t.Fatal("the compile did not end")
	}
}
