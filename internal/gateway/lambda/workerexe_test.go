package lambda

import (
	"bytes"
	"encoding/json"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/metalambda/metalambda/internal/gateway/sandbox"
)

// buildRuntimeWorkers builds the executable of each Go worker runtime as make
// build does (cmd/metalambda-worker without the other runtime), by runtime.
func buildRuntimeWorkers(t testing.TB) map[string]string {
	t.Helper()
	return map[string]string{
		JavaScript: buildCommand(t, "metalambda-worker", "-tags", "nojsonnet", "-o", sandbox.WorkerExecutableFor(JavaScript)),
		Jsonnet:    buildCommand(t, "metalambda-worker", "-tags", "nojavascript", "-o", sandbox.WorkerExecutableFor(Jsonnet)),
	}
}

// buildCommand builds cmd/name (the tests' build cache makes it mostly a link
// step) into a directory of t's, with the flags given (-o names the file).
func buildCommand(t testing.TB, name string, flags ...string) string {
	t.Helper()
	if testing.Short() {
		t.Skip("builds cmd/" + name)
	}
	out := name
	if i := slices.Index(flags, "-o"); i >= 0 {
		out = flags[i+1]
		flags = slices.Delete(flags, i, i+2)
	}
	exe := filepath.Join(t.TempDir(), out)
	cmd := exec.Command("go", append(append([]string{"build"}, flags...), "-o", exe, "./cmd/"+name)...)
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
// gateway may use: cmd/metalambda-launcher launching workers of each runtime's
// executable, as the gateway does when they are installed beside it (make
// build, the image); cmd/metalambda-worker as both launcher and worker; the
// gateway's own, as it does otherwise; and this test binary, which links less
// than the gateway.
func benchLaunchers(b *testing.B) []launcherSandbox {
	b.Helper()
	self, err := os.Executable()
	if err != nil {
		b.Fatal(err)
	}
	worker := buildCommand(b, sandbox.WorkerExecutable)
	var out []launcherSandbox
	for _, l := range []struct {
		name, launcher, worker string
		workers                map[string]string
	}{
		{"metalambda-launcher", buildCommand(b, sandbox.LauncherExecutable), "", buildRuntimeWorkers(b)},
		{"metalambda-worker", worker, worker, nil},
		{"gateway", buildCommand(b, "gateway"), "", nil},
		{"test-binary", self, self, nil},
	} {
		if l.worker == "" && l.workers == nil {
			l.worker = l.launcher
		}
		sb, err := sandbox.New(sandbox.Options{Launcher: l.launcher, Worker: l.worker, Workers: l.workers})
		if err != nil {
			b.Fatal(err)
		}
		b.Cleanup(sb.Close)
		out = append(out, launcherSandbox{l.name, sb})
	}
	return out
}

// The gateway's functions run from cmd/metalambda-launcher and the worker
// executables of their runtimes when they are its sandbox's: the first launches
// each worker, and JavaScript and Jsonnet workers are each their runtime's
// executable, which does not work for the other runtime.
func TestFunctionsRunFromTheWorkerExecutable(t *testing.T) {
	launcher := buildCommand(t, sandbox.LauncherExecutable)
	workers := buildRuntimeWorkers(t)
	sb, err := sandbox.New(sandbox.Options{Launcher: launcher, Workers: workers})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(sb.Close)
	if sb.Launcher() != launcher || sb.WorkerFor(JavaScript) != workers[JavaScript] || sb.WorkerFor(Jsonnet) != workers[Jsonnet] {
		t.Fatalf("the sandbox launches from %s and starts Go workers from %s and %s, want %s and %v", sb.Launcher(), sb.WorkerFor(JavaScript), sb.WorkerFor(Jsonnet), launcher, workers)
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
				if got, err := os.Readlink("/proc/" + strconv.Itoa(pid) + "/exe"); err != nil || got != workers[tt.fn.Runtime] {
					t.Errorf("worker %d runs %q (%v), want %s", pid, got, err, workers[tt.fn.Runtime])
				}
			}
		})
	}
	// Each runtime's executable refuses the other runtime's function.
	for rt, exe := range workers {
		other := JavaScript
		if rt == JavaScript {
			other = Jsonnet
		}
		init, _ := json.Marshal(scriptInit{Protocol: scriptProtocol, Runtime: other, Name: "test/other", Source: jsEcho, Timeout: 5e9})
		cmd := exec.Command(exe, ScriptWorkerMarker)
		cmd.Stdin = bytes.NewReader(append(init, '\n'))
		out, _ := cmd.Output()
		if want := "built without the " + other + " runtime"; !strings.Contains(string(out), want) {
			t.Errorf("the %s worker executable given a %s function answered %q, want %q", rt, other, out, want)
		}
	}
}

// A worker executable of another build (here one that ignores the protocol the
// gateway sends, as those before the version did) fails the registration of a
// JavaScript or Jsonnet function with a message that says so, instead of
// serving a protocol it may misread; and a worker refuses an init frame of
// another protocol, with its own.
func TestAWorkerExecutableOfAnotherBuildIsRefused(t *testing.T) {
	if testing.Short() {
		t.Skip("builds testdata/otherbuild")
	}
	exe := filepath.Join(t.TempDir(), "otherbuild")
	build := exec.Command("go", "build", "-o", exe, "./testdata/otherbuild")
	build.Env = append(os.Environ(), "CGO_ENABLED=0")
	if out, err := build.CombinedOutput(); err != nil {
		t.Fatalf("%v: %v\n%s", build.Args, err, out)
	}
	if err := os.Chmod(filepath.Dir(exe), 0o755); err != nil {
		t.Fatal(err)
	}
	sb, err := sandbox.New(sandbox.Options{Worker: exe})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(sb.Close)
	opts := Options{Sandbox: sb}
	for _, tt := range []struct {
		rt Runtime
		fn Function
	}{
		{NewSandboxedJavaScript(opts), jsFn("other-build", jsEcho)},
		{NewSandboxedJsonnet(opts), jsonnetFn("other-build", jsonnetEcho)},
	} {
		c, err := tt.rt.Compile(tt.fn)
		if err == nil {
			c.Close()
			t.Fatalf("%s: a worker of another build loaded the function", tt.fn.Runtime)
		}
		if !strings.Contains(err.Error(), "another build") || !strings.Contains(err.Error(), exe) {
			t.Errorf("%s: %v; want it to say the worker executable is of another build", tt.fn.Runtime, err)
		}
	}

	init, _ := json.Marshal(scriptInit{Protocol: scriptProtocol + 1, Runtime: JavaScript, Name: "test/next", Source: jsEcho, Timeout: 5e9})
	var out bytes.Buffer
	if code := serveScriptWorker(bytes.NewReader(append(init, '\n')), &out); code != 2 {
		t.Errorf("a worker given an init frame of protocol %d exited %d, want 2", scriptProtocol+1, code)
	}
	if !strings.Contains(out.String(), "another build") {
		t.Errorf("a worker given an init frame of another protocol answered %s", out.String())
	}
}

// A worker executable of another known build (one an earlier make build left
// beside the gateway) is refused though it speaks the gateway's protocol, and
// one built without the function's runtime fails the registration as the
// install's fault (ErrWorkerLost, tried again later), not as the function's.
func TestWorkerExecutablesOfAnotherBuildOrRuntimeAreRefused(t *testing.T) {
	earlier := buildCommand(t, "metalambda-worker", "-ldflags", "-X github.com/metalambda/metalambda/internal/version.version=v0.0.1-earlier")
	jsOnly := buildRuntimeWorkers(t)[JavaScript]
	defer func(f func() string) { gatewayBuild = f }(gatewayBuild)
	gatewayBuild = func() string { return "v0.0.2-this" }
	sb, err := sandbox.New(sandbox.Options{Workers: map[string]string{JavaScript: earlier, Jsonnet: jsOnly}})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(sb.Close)
	opts := Options{Sandbox: sb}

	_, err = NewSandboxedJavaScript(opts).Compile(jsFn("earlier-build", jsEcho))
	if err == nil || !strings.Contains(err.Error(), "another build") || !strings.Contains(err.Error(), `"v0.0.1-earlier"`) || !errors.Is(err, ErrWorkerLost) {
		t.Errorf("a worker of an earlier build: %v; want a lost worker of another build, naming it", err)
	}
	_, err = NewSandboxedJsonnet(opts).Compile(jsonnetFn("no-runtime", jsonnetEcho))
	if err == nil || !strings.Contains(err.Error(), "built without the jsonnet runtime") || !errors.Is(err, ErrWorkerLost) {
		t.Errorf("a worker built without the function's runtime: %v; want a lost worker that says so", err)
	}

	gatewayBuild = func() string { return "v0.0.1-earlier" }
	assertEcho(t, mustCompile(t, NewSandboxedJavaScript(opts), jsFn("same-build", jsEcho)), "p")
}

// Builds are compared only when both are known.
func TestOtherBuild(t *testing.T) {
	defer func(f func() string) { gatewayBuild = f }(gatewayBuild)
	for _, tt := range []struct {
		gateway, worker string
		other           bool
	}{
		{"v1", "v1", false},
		{"v1", "v2", true},
		{"devel-abc", "v1", true},
		{"", "v1", false},
		{"v1", "", false},
	} {
		gatewayBuild = func() string { return tt.gateway }
		if got := otherBuild(tt.worker); got != tt.other {
			t.Errorf("gateway %q, worker %q: other build %v, want %v", tt.gateway, tt.worker, got, tt.other)
		}
	}
}
