package lambda

import (
	"bufio"
	"bytes"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"
)

// spareForms are the runtimes whose workers come from spares, each with a
// function that answers its environment variable TOKEN and holds marker in its
// source.
func spareForms(opts Options, marker string) map[string]struct {
	rt Runtime
	fn Function
} {
	return map[string]struct {
		rt Runtime
		fn Function
	}{
		"python": {NewPython(opts), pyFn("spare", "MARK = '"+marker+"'\nimport os\ndef sync(request):\n    return {'token': os.environ['TOKEN'], 'mark': MARK}\n")},
		"javascript": {NewSandboxedJavaScript(opts), jsFn("spare", "const MARK = '"+marker+"';\n"+
			"function sync(request) { return {token: process.env.TOKEN, mark: MARK}; }")},
	}
}

// waitSpares waits until rt keeps n spares.
func waitSpares(t *testing.T, rt Runtime, n int) {
	t.Helper()
	deadline := time.Now().Add(60 * time.Second)
	for rt.(StatsReporter).Stats().Spares != n {
		if time.Now().After(deadline) {
			t.Fatalf("spares = %d after a minute, want %d", rt.(StatsReporter).Stats().Spares, n)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// workersOf is every worker of this process, spares included, for the runtime.
func workersOf(runtime string, function string) []int {
	if runtime == Python {
		return PythonWorkerPIDs(os.Getpid(), function)
	}
	return ScriptWorkerPIDs(os.Getpid(), function)
}

// waitSpareProcesses waits until the runtime reports n spares and n worker
// processes besides fn's own are found, and returns both sets. The two are
// read at different moments: under load a Python fork can miss its deadline
// and the zygote, with its spares, is replaced between them, so the pair is
// read again until they agree.
func waitSpareProcesses(t *testing.T, rt Runtime, fn Function, n int) (own, spares []int) {
	t.Helper()
	deadline := time.Now().Add(60 * time.Second)
	for {
		waitSpares(t, rt, n)
		own = workersOf(fn.Runtime, fn.Name)
		spares = spares[:0]
		for _, pid := range workersOf(fn.Runtime, "") {
			if !slices.Contains(own, pid) {
				spares = append(spares, pid)
			}
		}
		if len(own) > 0 && len(spares) == n {
			return own, spares
		}
		if time.Now().After(deadline) {
			t.Fatalf("after a minute: the function's workers %v, spare workers %v, want %d spares", own, spares, n)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// A spare is started before any function is known, and nothing of a function
// reaches one until it is given that function: not its source, not its
// environment, in the spare's command line, environment or memory. The
// function's own worker holds them (the control: the scan finds what is
// there).
func TestSparesHoldNoFunction(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("reading another process's memory needs root")
	}
	secret, marker := "token-"+strconv.FormatInt(time.Now().UnixNano(), 36), "mark-"+strconv.Itoa(os.Getpid())
	for name, tt := range spareForms(sandboxed(t, Options{WorkerSpares: 2}), marker) {
		t.Run(name, func(t *testing.T) {
			tt.fn.Env = map[string]string{"TOKEN": secret}
			c := mustCompile(t, tt.rt, tt.fn)
			res, err := invoke(t, c, echoRequest("x"))
			if err != nil {
				t.Fatal(err)
			}
			if !strings.Contains(string(res.Response), secret) {
				t.Fatalf("the function did not see its environment: %s", res.Response)
			}
			own, spares := waitSpareProcesses(t, tt.rt, tt.fn, 2)
			for _, pid := range own {
				if !processHolds(t, pid, marker) || !processHolds(t, pid, secret) {
					t.Fatalf("the function's worker %d does not hold its source and environment in memory, so the scan proves nothing", pid)
				}
			}
			for _, pid := range spares {
				for _, file := range []string{"cmdline", "environ"} {
					raw, _ := os.ReadFile(fmt.Sprintf("/proc/%d/%s", pid, file))
					if bytes.Contains(raw, []byte(secret)) || bytes.Contains(raw, []byte(marker)) || bytes.Contains(raw, []byte(tt.fn.Name)) {
						t.Errorf("spare %d's %s shows the function: %q", pid, file, raw)
					}
				}
				if processHolds(t, pid, secret) || processHolds(t, pid, marker) {
					t.Errorf("spare %d holds the function's source or environment in memory", pid)
				}
			}
		})
	}
}

// processHolds reports whether s is in the writable memory of process pid.
func processHolds(t *testing.T, pid int, s string) bool {
	t.Helper()
	maps, err := os.Open(fmt.Sprintf("/proc/%d/maps", pid))
	if err != nil {
		t.Fatal(err)
	}
	defer maps.Close()
	mem, err := os.Open(fmt.Sprintf("/proc/%d/mem", pid))
	if err != nil {
		t.Fatal(err)
	}
	defer mem.Close()
	lines := bufio.NewScanner(maps)
	for lines.Scan() {
		f := strings.Fields(lines.Text())
		if len(f) < 2 || !strings.HasPrefix(f[1], "rw") {
			continue
		}
		from, to, _ := strings.Cut(f[0], "-")
		start, _ := strconv.ParseUint(from, 16, 64)
		end, _ := strconv.ParseUint(to, 16, 64)
		for off := start; off < end; off += 1 << 20 { // overlapping chunks: a match may cross a boundary
			buf := make([]byte, min(end-off, 1<<20+uint64(len(s))))
			n, _ := mem.ReadAt(buf, int64(off))
			if bytes.Contains(buf[:n], []byte(s)) {
				return true
			}
		}
	}
	return false
}

// A spare serves one function, once: a worker that was given a function is
// never given another, and is stopped with it.
func TestSpareServesOneFunction(t *testing.T) {
	for name, tt := range spareForms(sandboxed(t, Options{WorkerSpares: 2}), "one") {
		t.Run(name, func(t *testing.T) {
			first := tt.fn
			first.Env = map[string]string{"TOKEN": "first"}
			a, err := tt.rt.Compile(first)
			if err != nil {
				t.Fatal(err)
			}
			if _, err := invoke(t, a, echoRequest("x")); err != nil {
				t.Fatal(err)
			}
			served := workersOf(first.Runtime, first.Name)
			a.Close()
			for _, pid := range served {
				if _, err := os.Stat(fmt.Sprintf("/proc/%d", pid)); err == nil {
					t.Errorf("worker %d of a closed function still runs", pid)
				}
			}
			second := tt.fn
			second.Name += "-2"
			second.Env = map[string]string{"TOKEN": "second"}
			b := mustCompile(t, tt.rt, second)
			res, err := invoke(t, b, echoRequest("x"))
			if err != nil {
				t.Fatal(err)
			}
			if !strings.Contains(string(res.Response), `"second"`) {
				t.Errorf("the second function answered %s", res.Response)
			}
			for _, pid := range workersOf(second.Runtime, second.Name) {
				if slices.Contains(served, pid) {
					t.Errorf("worker %d served both functions", pid)
				}
			}
		})
	}
}

// A call that needs a new worker takes a spare when one is ready; without
// spares (the control) it starts one.
func TestColdStartTakesASpare(t *testing.T) {
	for _, spares := range []int{2, 0} {
		for name, tt := range spareForms(sandboxed(t, Options{WorkerSpares: spares}), "cold") {
			t.Run(fmt.Sprintf("%s/spares=%d", name, spares), func(t *testing.T) {
				mustCompile(t, tt.rt, tt.fn)
				if spares > 0 {
					waitSpares(t, tt.rt, spares)
				}
				before := tt.rt.(StatsReporter).Stats()
				next := tt.fn
				next.Name += "-next"
				next.Env = map[string]string{"TOKEN": "t"}
				c := mustCompile(t, tt.rt, next)
				if _, err := invoke(t, c, echoRequest("x")); err != nil {
					t.Fatal(err)
				}
				after := tt.rt.(StatsReporter).Stats()
				if after.Starts-before.Starts != 2 { // the compile's check and the call's worker
					t.Errorf("starts %d, want 2", after.Starts-before.Starts)
				}
				misses := after.SpareMisses - before.SpareMisses
				if spares > 0 && misses != 0 {
					t.Errorf("%d starts found no spare, want none", misses)
				}
				if spares == 0 && (misses != 2 || after.Spares != 0) {
					t.Errorf("without spares: %d misses and %d spares, want 2 and 0", misses, after.Spares)
				}
			})
		}
	}
}

// The spares stop with the runtime's last function: nothing runs for a runtime
// without functions.
func TestSparesStopWithTheLastFunction(t *testing.T) {
	for name, tt := range spareForms(sandboxed(t, Options{WorkerSpares: 2}), "last") {
		t.Run(name, func(t *testing.T) {
			c, err := tt.rt.Compile(tt.fn)
			if err != nil {
				t.Fatal(err)
			}
			waitSpares(t, tt.rt, 2)
			c.Close()
			if left := workersOf(tt.fn.Runtime, ""); len(left) > 0 {
				t.Errorf("workers %v run after the last function closed", left)
			}
			if s := tt.rt.(StatsReporter).Stats(); s.Spares != 0 {
				t.Errorf("%d spares after the last function closed", s.Spares)
			}
		})
	}
}

// The spares of a network view stop with the last function of that view, not
// only with the runtime's last function: one function with spec.network, even
// one that does not compile, leaves no spares behind it.
func TestSparesOfAViewStopWithItsLastFunction(t *testing.T) {
	rt := NewPython(sandboxed(t, Options{WorkerSpares: 2}))
	mustCompile(t, rt, pyFn("plain", "def sync(request):\n    return {}\n"))
	waitSpares(t, rt, 2)
	bad := pyFn("networked", "def sync(:\n")
	bad.Network = true
	if _, err := rt.Compile(bad); err == nil {
		t.Fatal("a source that does not parse compiled")
	}
	good := pyFn("networked", "def sync(request):\n    return {}\n")
	good.Network = true
	c, err := rt.Compile(good)
	if err != nil {
		t.Fatal(err)
	}
	waitSpares(t, rt, 4)
	c.Close()
	if n := rt.(StatsReporter).Stats().Spares; n != 2 {
		t.Errorf("%d spares once the network view's last function closed, want the other view's 2", n)
	}
}

// A source that does not compile starts one worker, the one that checks it: a
// failed compile refills no spares.
func TestFailingCompileStartsOneWorker(t *testing.T) {
	rt := NewPython(sandboxed(t, Options{WorkerSpares: 2}))
	before := workerIDs.Load()
	const n = 5
	for i := range n {
		if _, err := rt.Compile(pyFn("broken-"+strconv.Itoa(i), "def sync(:\n")); err == nil {
			t.Fatal("a source that does not parse compiled")
		}
	}
	if started := workerIDs.Load() - before; started != n {
		t.Errorf("%d failing compiles started %d workers, want %d", n, started, n)
	}
}

// Where every worker runs as one user (Landlock, a gateway that is not root),
// RLIMIT_NPROC counts the tasks of all of them, and a worker's limit is set
// when it starts: a spare started ahead would have its room taken by the
// workers started after it (the red team's attack: another function holding
// threads left a victim's spare unable to start one). There a runtime keeps
// no spares, and every worker is started for its function. (The attack itself
// is not run here: its threads, as nobody, would change the room of the
// sandbox package's fork-bomb tests, which run beside this one as nobody too.)
func TestLandlockWorkersKeepTheirTaskRoom(t *testing.T) {
	if !inLandlockChild() {
		t.Skip("runs in the child of TestLandlockSandbox")
	}
	opts := sandboxed(t, Options{WorkerSpares: 2})
	if !opts.Sandbox.SharesUser() {
		t.Fatalf("the child's sandbox (%s) does not share one user, so this proves nothing", opts.Sandbox.Mode())
	}
	rt := NewPython(opts)
	c := mustCompile(t, rt, pyFn("victim", "import threading\nt = threading.Thread(target=lambda: None); t.start(); t.join()\ndef sync(request):\n    return {'ok': True}\n"))
	if _, err := invoke(t, c, echoRequest("x")); err != nil {
		t.Fatal(err)
	}
	s := rt.(StatsReporter).Stats()
	if s.Spares != 0 || s.Starts != 2 || s.SpareMisses != s.Starts {
		t.Errorf("stats %+v: want no spares, and both starts (the check and the call) made for the function", s)
	}
}

// Spares start in the background, at a low processor weight, and a spare
// taken for a function is given the usual weight before the function loads:
// a function's worker never runs at the spares' weight.
func TestSparesStartInTheBackground(t *testing.T) {
	for name, tt := range spareForms(sandboxed(t, Options{WorkerSpares: 2}), "weight") {
		t.Run(name, func(t *testing.T) {
			fn := tt.fn
			fn.Env = map[string]string{"TOKEN": "t"}
			c := mustCompile(t, tt.rt, fn)
			waitSpares(t, tt.rt, 2)
			if _, err := invoke(t, c, echoRequest("x")); err != nil { // takes a spare
				t.Fatal(err)
			}
			own, spares := waitSpareProcesses(t, tt.rt, fn, 2)
			read := 0
			for _, pid := range own {
				if w, ok := cpuWeight(t, pid); ok {
					read++
					if w != "1024" && w != "100" {
						t.Errorf("the function's worker %d has the processor weight %s, want the usual one", pid, w)
					}
				}
			}
			for _, pid := range spares {
				if w, ok := cpuWeight(t, pid); ok {
					read++
					if w != "128" && w != "12" {
						t.Errorf("spare %d has the processor weight %s, want an eighth of the usual one", pid, w)
					}
				}
			}
			if read == 0 {
				t.Skip("the workers have no cgroups of their own here")
			}
		})
	}
}

// cpuWeight reads the processor weight of pid's cgroup: cgroup v1's cpu.shares
// or v2's cpu.weight; false when the process has no cgroup of its own.
func cpuWeight(t *testing.T, pid int) (string, bool) {
	t.Helper()
	raw, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/cgroup")
	if err != nil {
		t.Fatal(err)
	}
	for line := range strings.Lines(string(raw)) {
		parts := strings.SplitN(strings.TrimSpace(line), ":", 3)
		if len(parts) != 3 || !strings.Contains(parts[2], "/w-") {
			continue
		}
		files := []string{filepath.Join("/sys/fs/cgroup", parts[2], "cpu.weight"), filepath.Join("/sys/fs/cgroup/unified", parts[2], "cpu.weight")}
		if parts[1] != "" {
			if !slices.Contains(strings.Split(parts[1], ","), "cpu") {
				continue
			}
			files = []string{filepath.Join("/sys/fs/cgroup", parts[1], parts[2], "cpu.shares"), filepath.Join("/sys/fs/cgroup/cpu", parts[2], "cpu.shares")}
		}
		for _, file := range files {
			if w, err := os.ReadFile(file); err == nil {
				return strings.TrimSpace(string(w)), true
			}
		}
	}
	t.Logf("process %d has no cgroup of its own:\n%s", pid, raw)
	return "", false
}

// A spare taken for a function has the usual processor weight before the
// function's code runs: read here while its top-level code sleeps.
func TestSpareLoadsAtTheUsualWeight(t *testing.T) {
	rt := NewPython(sandboxed(t, Options{WorkerSpares: 2}))
	mustCompile(t, rt, pyFn("weight-warm", "def sync(request):\n    return {}\n")) // the spares' user
	waitSpares(t, rt, 2)
	fn := pyFn("weight-load", "import time\ntime.sleep(1.5)\ndef sync(request):\n    return {}\n")
	done := make(chan error, 1)
	go func() {
		c, err := rt.Compile(fn) // takes a spare and loads the function into it
		if err == nil {
			c.Close()
		}
		done <- err
	}()
	deadline := time.Now().Add(time.Second)
	for {
		pids := workersOf(Python, fn.Name)
		if len(pids) > 0 {
			w, ok := cpuWeight(t, pids[0])
			if !ok {
				t.Skip("the workers have no cgroups of their own here")
			}
			if w != "1024" && w != "100" {
				t.Errorf("the worker loading the function has the processor weight %s, want the usual one", w)
			}
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("no worker loads the function after a second")
		}
		time.Sleep(10 * time.Millisecond)
	}
	if err := <-done; err != nil {
		t.Fatal(err)
	}
}
