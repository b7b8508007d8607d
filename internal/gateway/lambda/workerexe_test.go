package lambda

import (
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"testing"

	"github.com/metalambda/metalambda/internal/gateway/sandbox"
)

// buildWorkerExecutable builds cmd/metalambda-worker as make build does.
func buildWorkerExecutable(t testing.TB) string {
	t.Helper()
	return buildCommand(t, "metalambda-worker")
}

// buildCommand builds cmd/name (the tests' build cache makes it mostly a link
// step) into a directory of t's.
func buildCommand(t testing.TB, name string) string {
	t.Helper()
	if testing.Short() {
		t.Skip("builds cmd/" + name)
	}
	exe := filepath.Join(t.TempDir(), name)
	cmd := exec.Command("go", "build", "-o", exe, "./cmd/"+name)
	cmd.Dir = "../../.."
	if name == sandbox.WorkerExecutable || name == sandbox.LauncherExecutable {
		cmd.Env = append(os.Environ(), "CGO_ENABLED=0") // static, as make build and the image build it
	}
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("%v: %v\n%s", cmd.Args, err, out)
	}
	return exe
}

// launcherSandbox is a sandbox whose commands start from launcher.
type launcherSandbox struct {
	name    string
	sandbox *sandbox.Sandbox
}

// benchLaunchers are sandboxes that start workers from each executable a
// gateway may use: cmd/metalambda-launcher launching workers of
// cmd/metalambda-worker, as the gateway does when both are installed beside it
// (make build, the image); cmd/metalambda-worker as both; the gateway's own, as
// it does otherwise; and this test binary, which links less than the gateway.
func benchLaunchers(b *testing.B) []launcherSandbox {
	b.Helper()
	self, err := os.Executable()
	if err != nil {
		b.Fatal(err)
	}
	worker := buildCommand(b, sandbox.WorkerExecutable)
	var out []launcherSandbox
	for _, l := range []struct{ name, launcher, worker string }{
		{"metalambda-launcher", buildCommand(b, sandbox.LauncherExecutable), worker},
		{"metalambda-worker", worker, worker},
		{"gateway", buildCommand(b, "gateway"), ""},
		{"test-binary", self, self},
	} {
		if l.worker == "" {
			l.worker = l.launcher
		}
		sb, err := sandbox.New(sandbox.Options{Launcher: l.launcher, Worker: l.worker})
		if err != nil {
			b.Fatal(err)
		}
		b.Cleanup(sb.Close)
		out = append(out, launcherSandbox{l.name, sb})
	}
	return out
}

// The gateway's functions run from cmd/metalambda-launcher and
// cmd/metalambda-worker when they are its sandbox's: the first launches each
// worker, and JavaScript and Jsonnet workers are the second.
func TestFunctionsRunFromTheWorkerExecutable(t *testing.T) {
	launcher := buildCommand(t, sandbox.LauncherExecutable)
	exe := buildWorkerExecutable(t)
	sb, err := sandbox.New(sandbox.Options{Launcher: launcher, Worker: exe})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(sb.Close)
	if sb.Launcher() != launcher || sb.Worker() != exe {
		t.Fatalf("the sandbox launches from %s and starts Go workers from %s, want %s and %s", sb.Launcher(), sb.Worker(), launcher, exe)
	}
	opts := Options{Sandbox: sb}
	for _, tt := range []struct {
		rt Runtime
		fn Function
	}{
		{NewSandboxedJavaScript(opts), jsFn("exe-js", jsEcho)},
		{NewSandboxedJsonnet(opts), jsonnetFn("exe-jsonnet", jsonnetEcho)},
		{NewPython(opts), pyFn("exe-python", pyEcho)},
	} {
		t.Run(tt.fn.Runtime, func(t *testing.T) {
			c := mustCompile(t, tt.rt, tt.fn)
			assertEcho(t, c, "p")
			if tt.fn.Runtime == Python {
				return
			}
			pids := ScriptWorkerPIDs(os.Getpid(), tt.fn.Name)
			if len(pids) == 0 {
				t.Fatal("no worker found")
			}
			for _, pid := range pids {
				if got, err := os.Readlink("/proc/" + strconv.Itoa(pid) + "/exe"); err != nil || got != exe {
					t.Errorf("worker %d runs %q (%v), want %s", pid, got, err, exe)
				}
			}
		})
	}
}
