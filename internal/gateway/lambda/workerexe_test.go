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
	if name == sandbox.WorkerExecutable {
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
// gateway may use: cmd/metalambda-worker, as the gateway does when it is
// installed beside it (make build, the image); the gateway's own, as it does
// otherwise; and this test binary, which links less than the gateway.
func benchLaunchers(b *testing.B) []launcherSandbox {
	b.Helper()
	self, err := os.Executable()
	if err != nil {
		b.Fatal(err)
	}
	var out []launcherSandbox
	for _, l := range []struct{ name, exe string }{
		{"metalambda-worker", buildCommand(b, "metalambda-worker")},
		{"gateway", buildCommand(b, "gateway")},
		{"test-binary", self},
	} {
		sb, err := sandbox.New(sandbox.Options{Launcher: l.exe})
		if err != nil {
			b.Fatal(err)
		}
		b.Cleanup(sb.Close)
		out = append(out, launcherSandbox{l.name, sb})
	}
	return out
}

// The gateway's functions run from cmd/metalambda-worker when it is its
// sandbox's launcher: it launches each worker, and JavaScript and Jsonnet
// workers are that executable.
func TestFunctionsRunFromTheWorkerExecutable(t *testing.T) {
	exe := buildWorkerExecutable(t)
	sb, err := sandbox.New(sandbox.Options{Launcher: exe})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(sb.Close)
	if sb.Launcher() != exe {
		t.Fatalf("the sandbox launches from %s, want %s", sb.Launcher(), exe)
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
