package lambda

import (
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/metalambda/metalambda/internal/gateway/sandbox"
)

// landlockChildEnv marks the child process of TestLandlockSandbox: a gateway's
// test binary as a user in a restricted container, where user namespaces are
// refused.
const landlockChildEnv = "METALAMBDA_TEST_LANDLOCK_CHILD"

// landlockTests are the tests the child runs, with a Landlock sandbox.
const landlockTests = "^(TestLandlockChild|TestRequestWrittenBackIsNotDeliveredAgain|TestRequestLeftUnreadWasNotSeen|TestPythonEscapes|TestEscapeSuite|TestWorkerThatStopsReading|TestForgedReplyIsBounded|TestPythonGrandchildDiesWithWorker|TestPythonNetwork|TestPythonEnvironmentAndDirectory|TestPythonMemoryBomb|TestScriptWorkerSandboxView|TestScriptWorkersEcho|TestScriptWorkerJavaScriptMemoryBomb|TestWorkerDirectoryIsRemovedWhateverItsModes|TestLandlockWorkersKeepTheirTaskRoom)$"

// inLandlockChild reports whether this is the child of TestLandlockSandbox,
// whose runtimes get a Landlock sandbox.
func inLandlockChild() bool {
	return os.Getenv(landlockChildEnv) == "landlock"
}

// TestLandlockSandbox runs the sandbox tests again in a child process started as
// nobody under a seccomp filter that refuses new user namespaces, as a container
// runtime's RuntimeDefault profile does for a process without CAP_SYS_ADMIN:
// bubblewrap cannot build its namespaces there, so the runtimes' sandbox is
// Landlock, and every escape must fail again. A second child also finds no
// Landlock, and the runtime must refuse, naming both mechanisms.
func TestLandlockSandbox(t *testing.T) {
	if os.Getenv(landlockChildEnv) != "" {
		t.Skip("in a child already")
	}
	if os.Geteuid() != 0 {
		t.Skip("starting the child as nobody needs root")
	}
	dir := nobodyDir(t)
	exe := filepath.Join(dir, "runtime.test")
	copyExecutable(t, exe)
	for _, tt := range []struct {
		name            string
		withoutLandlock bool
		run             string
	}{
		{"landlock", false, landlockTests},
		{"none", true, "^TestNoSandboxMechanism$"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			cmd, err := sandbox.RestrictedCommand([]string{exe, "-test.run=" + tt.run, "-test.count=1", "-test.v"}, childUser, tt.withoutLandlock)
			if err != nil {
				t.Fatal(err)
			}
			out := runChild(t, cmd, tt.name, dir)
			if !strings.Contains(out, "--- PASS: TestLandlockChild") && tt.name == "landlock" || !strings.Contains(out, "\nPASS\n") {
				t.Errorf("the child did not run its tests")
			}
			if left, _ := filepath.Glob(filepath.Join(dir, "metalambda-worker-*")); len(left) > 0 {
				t.Errorf("worker directories left behind: %v", left)
			}
		})
	}
}

// childUser is the user the Landlock child runs as, a gateway that is not root.
// It is no other package's: RLIMIT_NPROC counts every task of a user on the
// host, and the sandbox package's fork-bomb tests run beside this package's as
// a user that is not root too.
const childUser = 65532

// nobodyDir is a directory under /tmp that childUser owns, removed at the end of
// the test: the test's own temporary directory may not be reachable by it.
func nobodyDir(t *testing.T) string {
	dir, err := os.MkdirTemp("/tmp", "metalambda-landlock-test-")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = os.RemoveAll(dir) })
	if err := os.Chown(dir, childUser, childUser); err != nil {
		t.Fatal(err)
	}
	return dir
}

// copyExecutable copies the test binary to path, where nobody can run it.
func copyExecutable(t *testing.T, path string) {
	exe, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	in, err := os.Open(exe)
	if err != nil {
		t.Fatal(err)
	}
	defer in.Close()
	out, err := os.OpenFile(path, os.O_CREATE|os.O_WRONLY|os.O_EXCL, 0o755)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := io.Copy(out, in); err != nil {
		t.Fatal(err)
	}
	if err := out.Close(); err != nil {
		t.Fatal(err)
	}
}

// TestLandlockChild: in the child, namespaces genuinely fail and the default
// sandbox is Landlock.
func TestLandlockChild(t *testing.T) {
	if !inLandlockChild() {
		t.Skip("runs in the child of TestLandlockSandbox")
	}
	if _, err := sandbox.New(sandbox.Options{Mode: sandbox.ModeNamespaces}); err == nil {
		t.Fatal("bubblewrap built its namespaces under a filter that refuses user namespaces")
	} else {
		t.Logf("namespaces: %v", err)
	}
	sb, err := sandbox.New(sandbox.Options{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(sb.Close)
	if sb.Mode() != sandbox.ModeLandlock {
		t.Fatalf("auto chose %s, want landlock", sb.Mode())
	}
	t.Logf("auto: %v", sb.Describe())
}

// TestNoSandboxMechanism: in the child without Landlock, no sandbox can be built,
// and the error names both mechanisms (the gateway refuses to start with it, adding
// --insecure-no-sandbox: cmd/gateway's tests); a runtime without a sandbox refuses
// to compile, naming --insecure-no-sandbox.
func TestNoSandboxMechanism(t *testing.T) {
	if os.Getenv(landlockChildEnv) != "none" {
		t.Skip("runs in the child of TestLandlockSandbox")
	}
	sb, err := sandbox.New(sandbox.Options{})
	if err == nil {
		sb.Close()
	}
	for _, want := range []string{"neither mechanism works here", "namespaces: bubblewrap cannot build a sandbox here", "Landlock: the kernel has no Landlock"} {
		if err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("sandbox.New: %v, want an error containing %q", err, want)
		}
	}
	_, err = NewPython(Options{}).Compile(pyFn("nowhere", pyEcho))
	if err == nil || !strings.Contains(err.Error(), "--insecure-no-sandbox") {
		t.Errorf("Python Compile: %v, want an error containing %q", err, "--insecure-no-sandbox")
	}
	_, err = NewSandboxedJavaScript(Options{}).Compile(jsFn("nowhere", jsEcho))
	if err == nil || !strings.Contains(err.Error(), "no sandbox") {
		t.Errorf("JavaScript Compile: %v, want an error saying it has no sandbox", err)
	}
}

// TestLandlockSandboxAsCappedRoot runs the Landlock child's tests again in a
// child that is root with CAP_SETUID, CAP_SETGID and CAP_KILL alone, no_new_privs
// and the RuntimeDefault filter: the chart's gateway (gateway.workerUsers own),
// whose workers each run as a user of their own, and where every escape must
// fail again.
func TestLandlockSandboxAsCappedRoot(t *testing.T) {
	if os.Getenv(landlockChildEnv) != "" {
		t.Skip("in a child already")
	}
	if os.Geteuid() != 0 {
		t.Skip("starting the child needs root")
	}
	// root's, which the child, root without CAP_DAC_OVERRIDE, may write in, and
	// every user may traverse, to run the launcher (the test binary).
	dir, err := os.MkdirTemp("/tmp", "metalambda-capped-test-")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = os.RemoveAll(dir) })
	if err := os.Chmod(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	exe := filepath.Join(dir, "runtime.test")
	copyExecutable(t, exe)
	// TestLandlockWorkersKeepTheirTaskRoom is for workers that share the gateway's user.
	run := strings.Replace(landlockTests, "|TestLandlockWorkersKeepTheirTaskRoom", "", 1)
	cmd, err := sandbox.CappedRootCommand([]string{exe, "-test.run=" + run, "-test.count=1", "-test.v"}, []string{"CAP_SETUID", "CAP_SETGID", "CAP_KILL"})
	if err != nil {
		t.Fatal(err)
	}
	out := runChild(t, cmd, "landlock", dir)
	if !strings.Contains(out, "--- PASS: TestLandlockChild") || !strings.Contains(out, "\nPASS\n") {
		t.Errorf("the child did not run its tests")
	}
	if left, _ := filepath.Glob(filepath.Join(dir, "metalambda-workers", "metalambda-worker-*")); len(left) > 0 {
		t.Errorf("worker directories left behind: %v", left)
	}
}

// runChild runs cmd, a copy of this test binary started as the Landlock child
// (landlockChildEnv=mode) with dir as its home and temporary directory, and
// returns its output; it fails the test when the child's tests fail.
func runChild(t *testing.T, cmd *sandbox.Command, mode, dir string) string {
	t.Helper()
	cmd.Env = []string{landlockChildEnv + "=" + mode, "PATH=/usr/local/bin:/usr/bin:/bin", "TMPDIR=" + dir, "HOME=" + dir}
	var err error
	if cmd.Dir, err = os.Getwd(); err != nil {
		t.Fatal(err)
	}
	var out strings.Builder
	cmd.Stdout, cmd.Stderr = &out, &out
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	err = cmd.Wait()
	t.Logf("the child's tests:\n%s", out.String())
	if err != nil {
		t.Fatalf("the child's tests failed: %v", err)
	}
	return out.String()
}
