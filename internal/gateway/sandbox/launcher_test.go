package sandbox

import (
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"unsafe"

	"golang.org/x/sys/unix"
)

// A LauncherExecutable beside the running executable is the default launcher,
// else a WorkerExecutable there; anything else of those names (missing, not
// executable, a directory) leaves the running executable its own launcher.
// The Go workers' executable is a WorkerExecutable beside it, never the
// launcher, which cannot serve them.
func TestTheLauncherIsTheLauncherExecutableBesideTheCaller(t *testing.T) {
	dir := t.TempDir()
	self := filepath.Join(dir, "gateway")
	launcher := filepath.Join(dir, LauncherExecutable)
	worker := filepath.Join(dir, WorkerExecutable)
	launchers := []string{LauncherExecutable, WorkerExecutable}
	if got := besideOrSelf(self, launchers...); got != self {
		t.Errorf("with neither executable: %s, want %s", got, self)
	}
	if err := os.Mkdir(worker, 0o755); err != nil {
		t.Fatal(err)
	}
	if got := besideOrSelf(self, launchers...); got != self {
		t.Errorf("with a directory of the worker's name: %s, want %s", got, self)
	}
	os.Remove(worker)
	if err := os.WriteFile(worker, []byte("#!/bin/true\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	if got := besideOrSelf(self, launchers...); got != self {
		t.Errorf("with a worker file that is not executable: %s, want %s", got, self)
	}
	if err := os.Chmod(worker, 0o755); err != nil {
		t.Fatal(err)
	}
	if got := besideOrSelf(self, launchers...); got != worker {
		t.Errorf("with a worker executable: %s, want %s", got, worker)
	}
	if err := os.WriteFile(launcher, []byte("#!/bin/true\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	if got := besideOrSelf(self, launchers...); got != worker {
		t.Errorf("with a launcher file that is not executable: %s, want %s", got, worker)
	}
	if err := os.Chmod(launcher, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.Chmod(launcher, 0o775); err != nil {
		t.Fatal(err)
	}
	if got := besideOrSelf(self, launchers...); got != worker {
		t.Errorf("with a launcher its group may write: %s, want %s", got, worker)
	}
	if err := os.Chmod(launcher, 0o755); err != nil {
		t.Fatal(err)
	}
	if os.Geteuid() == 0 {
		if err := os.Chown(launcher, 12345, 12345); err != nil {
			t.Fatal(err)
		}
		if got := besideOrSelf(self, launchers...); got != worker {
			t.Errorf("with a launcher of another user: %s, want %s", got, worker)
		}
		if err := os.Chown(launcher, 0, 0); err != nil {
			t.Fatal(err)
		}
	}
	if got := besideOrSelf(self, launchers...); got != launcher {
		t.Errorf("with both executables: %s, want the launcher %s", got, launcher)
	}
	if got := besideOrSelf(self, WorkerExecutable); got != worker {
		t.Errorf("the Go workers' executable with both: %s, want %s", got, worker)
	}
}

// A launcher given a launch of another protocol (a worker executable left from
// another build) refuses it, naming itself and what to do.
func TestTheLauncherRefusesAnotherProtocol(t *testing.T) {
	self, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	r, err := filterPipe([]byte(`{"protocol": 1, "args": ["/bin/true"]}`))
	if err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(self, LauncherMarker)
	cmd.ExtraFiles = []*os.File{r}
	out, err := cmd.CombinedOutput()
	r.Close()
	if cmd.ProcessState == nil || cmd.ProcessState.ExitCode() != 126 {
		t.Fatalf("the launcher ran a launch of protocol 1: %v, %s", err, out)
	}
	for _, want := range []string{self, "launch protocol " + strconv.Itoa(launchProtocol) + " and was given 1", "rebuild"} {
		if !strings.Contains(string(out), want) {
			t.Errorf("%q does not say %q", out, want)
		}
	}
}

// Each Go worker runtime starts from its own executable when one is given or
// installed, else from the general worker executable.
func TestEachRuntimeHasTheWorkerExecutableItIsGiven(t *testing.T) {
	self, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	if self, err = filepath.EvalSymlinks(self); err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	general, jsonnet := filepath.Join(dir, WorkerExecutable), filepath.Join(dir, WorkerExecutableFor("jsonnet"))
	for _, tt := range []struct {
		name    string
		worker  string
		workers map[string]string
		want    map[string]string // by runtime; the general one under ""
	}{
		{"none given, none beside the test binary", "", nil, map[string]string{"": self, "javascript": self, "jsonnet": self}},
		{"a general one", general, nil, map[string]string{"": general, "javascript": general, "jsonnet": general}},
		{"a general one and Jsonnet's", general, map[string]string{"jsonnet": jsonnet}, map[string]string{"": general, "javascript": general, "jsonnet": jsonnet}},
		{"Jsonnet's alone", "", map[string]string{"jsonnet": jsonnet}, map[string]string{"": self, "javascript": self, "jsonnet": jsonnet}},
	} {
		for _, exe := range []string{general, jsonnet} {
			if err := os.WriteFile(exe, []byte("#!/bin/true\n"), 0o755); err != nil {
				t.Fatal(err)
			}
		}
		got, byRuntime, err := workerPaths(tt.worker, tt.workers)
		if err != nil {
			t.Fatalf("%s: %v", tt.name, err)
		}
		if got != tt.want[""] {
			t.Errorf("%s: the general worker executable is %s, want %s", tt.name, got, tt.want[""])
		}
		for _, rt := range WorkerRuntimes {
			if byRuntime[rt] != tt.want[rt] {
				t.Errorf("%s: %s workers start from %s, want %s", tt.name, rt, byRuntime[rt], tt.want[rt])
			}
		}
	}

	// Beside a gateway in dir: Jsonnet's own executable is taken, and a
	// JavaScript one that its group may write is not (the general one is).
	gateway := filepath.Join(dir, "gateway")
	javascript := filepath.Join(dir, WorkerExecutableFor("javascript"))
	if err := os.WriteFile(javascript, []byte("#!/bin/true\n"), 0o775); err != nil {
		t.Fatal(err)
	}
	if err := os.Chmod(javascript, 0o775); err != nil { // past the umask
		t.Fatal(err)
	}
	got, byRuntime, err := workerPathsBeside(gateway, "", nil)
	if err != nil {
		t.Fatal(err)
	}
	if got != general || byRuntime["jsonnet"] != jsonnet || byRuntime["javascript"] != general {
		t.Errorf("beside %s: general %s, by runtime %v; want %s, jsonnet %s, javascript %s", gateway, got, byRuntime, general, jsonnet, general)
	}
}

// allocatorChild is set in the environment of the child of
// TestLauncherRuntimeSurvivesTheAddressSpaceLimit.
const allocatorChild = "METALAMBDA_TEST_ALLOCATOR_CHILD"

// A launcher sets the command's address-space limit, below what its Go
// runtime holds, before it executes the command: from then on, any mapping the
// runtime makes in the background (for a collection under way, a new thread)
// ends the process with "fatal error: runtime: cannot allocate memory", as a
// CI run's launcher, a test binary collecting its initialization's garbage,
// did. The child sets the limit right after a collection, as the launcher
// does (holdAllocator, settleAllocator), and must live on under it; with
// METALAMBDA_TEST_ALLOCATOR_CHILD=bare it skips them and dies in most traced
// runs.
func TestLauncherRuntimeSurvivesTheAddressSpaceLimit(t *testing.T) {
	if mode := os.Getenv(allocatorChild); mode != "" {
		allocatorChildMain(mode == "held")
		return
	}
	self, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	args := []string{self, "-test.run=^TestLauncherRuntimeSurvivesTheAddressSpaceLimit$", "-test.count=1"}
	// Traced, each of the child's system calls waits for strace: the runtime's
	// background work then meets the limit in most runs without holdAllocator
	// (12 of 20 when it was written), in few untraced.
	if strace, err := exec.LookPath("strace"); err == nil {
		args = append([]string{strace, "-f", "-o", "/dev/null"}, args...)
	} else {
		t.Log("without strace, which widens the window the runtime's background work has")
	}
	crashed := 0
	const runs = 10
	for range runs {
		cmd := exec.Command(args[0], args[1:]...)
		cmd.Env = append(os.Environ(), allocatorChild+"=held")
		out, err := cmd.CombinedOutput()
		if err != nil {
			crashed++
			t.Logf("the child: %v\n%.2000s", err, out)
		}
	}
	if crashed > 0 {
		t.Errorf("%d of %d children died under the address-space limit", crashed, runs)
	}
}

// garbage keeps some of allocatorChildMain's allocations alive, so that its
// collections leave many spans to sweep.
var garbage [][]byte

func allocatorChildMain(held bool) {
	// Another goroutine collects garbage until just before the limit is set, so
	// that a collection is still under way then, as one started by the
	// launcher's own initialization would be.
	var stop atomic.Bool
	stopped := make(chan struct{})
	go func() {
		defer close(stopped)
		for i := 0; !stop.Load(); i++ {
			b := make([]byte, 64+i%512)
			if i%4 == 0 {
				garbage = append(garbage, b)
			}
			if len(garbage) > 1<<15 {
				garbage = garbage[:0]
			}
		}
	}()
	sleepWithoutAllocating(50e6)
	stop.Store(true)
	<-stopped
	if held {
		holdAllocator()
		settleAllocator()
	}
	limit := unix.Rlimit{Cur: 64 << 20, Max: 64 << 20}
	if _, _, errno := unix.RawSyscall6(unix.SYS_PRLIMIT64, 0, unix.RLIMIT_AS, uintptr(unsafe.Pointer(&limit)), 0, 0, 0); errno != 0 {
		os.Exit(3)
	}
	// The runtime's background work, if any, runs meanwhile; this goroutine
	// allocates nothing.
	sleepWithoutAllocating(300e6)
	unix.Exit(0)
}

// sleepWithoutAllocating sleeps ns nanoseconds, through the signals that
// interrupt it (the runtime's preemption).
func sleepWithoutAllocating(ns int64) {
	ts := unix.NsecToTimespec(ns)
	for {
		_, _, errno := unix.RawSyscall(unix.SYS_NANOSLEEP, uintptr(unsafe.Pointer(&ts)), uintptr(unsafe.Pointer(&ts)), 0)
		if errno != unix.EINTR {
			return
		}
	}
}
