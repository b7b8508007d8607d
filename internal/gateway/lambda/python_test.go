package lambda

import (
	"bytes"
	"context"
	"encoding/json"
	"maps"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
)

const pyEcho = `
def sync(request):
    name = request["parent"]["metadata"]["name"]
    print("sync", name)
    return {
        "children": [{"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": name + "-echo"}, "data": {"parent": name}}],
        "status": {"echoed": name},
    }
`

func pyFn(name, source string) Function {
	return Function{Name: "test/" + name, Runtime: Python, Source: source, Timeout: 5 * time.Second}
}

func TestPythonEcho(t *testing.T) {
	rt := NewPython(sandboxed(t, Options{}))
	c := mustCompile(t, rt, pyFn("echo", pyEcho))
	for _, name := range []string{"demo", "second", "ünïcode"} {
		res := assertEcho(t, c, name)
		if want := "sync " + name + "\n"; res.Logs != want {
			t.Errorf("logs = %q, want %q", res.Logs, want)
		}
	}
}

func TestPythonLogs(t *testing.T) {
	source := `import sys, os
def reconcile(request):
    print("to stdout")
    print("to stderr", file=sys.stderr)
    os.write(1, b"raw fd 1\n")
    return {"ok": True}
`
	fn := pyFn("logs", source)
	fn.Handler = "reconcile"
	c := mustCompile(t, NewPython(sandboxed(t, Options{})), fn)
	res, err := invoke(t, c, echoRequest("x"))
	if err != nil {
		t.Fatal(err)
	}
	if want := "to stdout\nto stderr\n"; res.Logs != want {
		t.Errorf("logs = %q, want %q", res.Logs, want)
	}
	if diff := cmp.Diff(map[string]any{"ok": true}, decode(t, res.Response)); diff != "" {
		t.Errorf("response (-want +got):\n%s", diff)
	}
}

func TestPythonCompileErrors(t *testing.T) {
	tests := []struct {
		name         string
		source       string
		handler      string
		line, column int
		contains     string
	}{
		{name: "syntax", source: "def sync(request):\n    return {'a': 1,,}\n", line: 2, column: 20, contains: "SyntaxError"},
		{name: "indentation", source: "def sync(request):\nreturn {}\n", line: 2, column: 1, contains: "IndentationError"},
		{name: "top-level exception", source: "import json\n\nraise ValueError('nope')\n", line: 3, column: 0, contains: "ValueError: nope"},
		{name: "missing handler", source: "def other(request):\n    return {}\n", contains: "no handler"},
		{name: "missing named handler", source: pyEcho, handler: "reconcile", contains: "def reconcile(request)"},
		{name: "handler not callable", source: "sync = 1\n", contains: "no handler"},
		{name: "exit while loading", source: "import os\nos._exit(4)\n", contains: "exit status 4"},
	}
	rt := NewPython(sandboxed(t, Options{}))
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			fn := pyFn(tt.name, tt.source)
			fn.Handler = tt.handler
			_, err := rt.Compile(fn)
			assertCompileError(t, err, tt.line, tt.column, tt.contains)
		})
	}
}

func TestPythonFailures(t *testing.T) {
	tests := []struct {
		name     string
		source   string
		reason   string
		contains string
		wantLogs string
	}{
		{name: "exception", source: "def sync(r):\n    print('before')\n    raise RuntimeError('boom')\n", reason: ReasonException, contains: "RuntimeError: boom", wantLogs: "before\n"},
		{name: "traceback", source: "def helper():\n    return {}['x']\n\ndef sync(r):\n    return helper()\n", reason: ReasonException, contains: "in helper"},
		{name: "none", source: "def sync(r):\n    pass\n", reason: ReasonBadReturn, contains: "NoneType"},
		{name: "list", source: "def sync(r):\n    return [1]\n", reason: ReasonBadReturn, contains: "list"},
		{name: "unserializable", source: "def sync(r):\n    return {'a': object()}\n", reason: ReasonBadReturn, contains: "cannot be serialized"},
		{name: "nan", source: "def sync(r):\n    return {'a': float('nan')}\n", reason: ReasonBadReturn, contains: "cannot be serialized"},
		{name: "exit", source: "import sys\ndef sync(r):\n    sys.stderr.write('bye')\n    sys.exit(3)\n", reason: ReasonCrash, contains: "exit status 3"},
		{name: "abort", source: "import os\ndef sync(r):\n    os.abort()\n", reason: ReasonCrash, contains: "signal: aborted"},
		// What the worker wrote last on its stderr is read before its end is.
		{name: "last words", source: "import os\ndef sync(r):\n    os.write(2, b'x' * 100000 + b'last words')\n    os._exit(3)\n", reason: ReasonCrash, contains: "last words"},
	}
	rt := NewPython(sandboxed(t, Options{}))
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c := mustCompile(t, rt, pyFn(tt.name, tt.source))
			for range 2 { // the worker survives or is replaced
				res, err := invoke(t, c, echoRequest("demo"))
				assertInvokeError(t, err, tt.reason, tt.contains)
				if res.Logs != tt.wantLogs {
					t.Errorf("logs = %q, want %q", res.Logs, tt.wantLogs)
				}
			}
		})
	}
}

// pyEchoUnless is pyEcho preceded by a statement run for the parent called "bad".
func pyEchoUnless(statement string) string {
	return "def sync(request):\n    if request['parent']['metadata']['name'] == 'bad':\n        " + statement +
		"\n    return echo(request)\n" + strings.ReplaceAll(pyEcho, "def sync(", "def echo(")
}

func TestPythonTimeout(t *testing.T) {
	fn := pyFn("timeout", pyEchoUnless("while True: pass"))
	// The call after a timeout starts a fresh sandboxed worker within its own limit.
	fn.Timeout = time.Second
	c := mustCompile(t, NewPython(sandboxed(t, Options{PythonPoolSize: 1})), fn)
	for range 2 {
		_, err := invoke(t, c, echoRequest("bad"))
		assertInvokeError(t, err, ReasonTimeout, "1s")
		assertEcho(t, c, "after")
	}
}

func TestPythonMemoryLimit(t *testing.T) {
	rt := NewPython(sandboxed(t, Options{PythonPoolSize: 1}))
	hog := mustCompile(t, rt, pyFn("hog", pyEchoUnless("x = bytearray(2*1024**3)")))
	other := mustCompile(t, rt, pyFn("other", pyEcho))
	for range 2 {
		_, err := invoke(t, hog, echoRequest("bad"))
		assertInvokeError(t, err, ReasonException, "MemoryError")
		assertEcho(t, hog, "after")
		assertEcho(t, other, "other")
	}
}

// A sandboxed worker works in the private /tmp of its sandbox (bubblewrap sets
// PWD); an unsandboxed one in a temporary directory removed with it.
func TestPythonEnvironmentAndDirectory(t *testing.T) {
	t.Run("sandbox", func(t *testing.T) {
		if inLandlockChild() { // a directory of its own, removed with it
			testPythonEnvironmentAndDirectory(t, sandboxed(t, Options{}), map[string]string{"PWD": "", "TMPDIR": ""}, func(cwd string) bool {
				return strings.HasPrefix(filepath.Base(cwd), "metalambda-worker-")
			})
			return
		}
		testPythonEnvironmentAndDirectory(t, sandboxed(t, Options{}), map[string]string{"PWD": "/tmp"}, func(cwd string) bool { return cwd == "/tmp" })
	})
	t.Run("insecure", func(t *testing.T) {
		testPythonEnvironmentAndDirectory(t, Options{InsecureNoSandbox: true}, nil, func(cwd string) bool {
			return strings.HasPrefix(filepath.Base(cwd), "metalambda-python-")
		})
	})
}

func testPythonEnvironmentAndDirectory(t *testing.T, opts Options, extraEnv map[string]string, wantCwd func(string) bool) {
	source := `import os
def sync(request):
    return {"env": dict(os.environ), "cwd": os.getcwd(), "files": os.listdir(".")}
`
	fn := pyFn("env", source)
	fn.Env = map[string]string{"GREETING": "hello", "EMPTY": ""}
	t.Setenv("METALAMBDA_SECRET", "must-not-leak")
	c := mustCompile(t, NewPython(opts), fn)
	res, err := invoke(t, c, echoRequest("x"))
	if err != nil {
		t.Fatal(err)
	}
	var got struct {
		Env   map[string]string
		Cwd   string
		Files []string
	}
	if err := json.Unmarshal(res.Response, &got); err != nil {
		t.Fatal(err)
	}
	wantEnv := map[string]string{"GREETING": "hello", "EMPTY": "", "PATH": pythonBaseEnv["PATH"], "LANG": "C.UTF-8"}
	maps.Copy(wantEnv, extraEnv)
	for k, v := range wantEnv {
		if v == "" && k != "EMPTY" { // the worker's directory
			wantEnv[k] = got.Cwd
		}
	}
	if diff := cmp.Diff(wantEnv, got.Env); diff != "" {
		t.Errorf("environment (-want +got):\n%s", diff)
	}
	if !wantCwd(got.Cwd) || len(got.Files) != 0 {
		t.Errorf("cwd = %q with files %v, want an empty private directory", got.Cwd, got.Files)
	}
	c.Close()
	if !opts.InsecureNoSandbox && !inLandlockChild() { // the sandbox's /tmp is gone with it
		return
	}
	if inLandlockChild() { // removed once the worker has exited
		waitUntil(t, func() bool { _, err := os.Stat(got.Cwd); return os.IsNotExist(err) }, "the worker's directory to go")
	}
	if _, err := os.Stat(got.Cwd); !os.IsNotExist(err) {
		t.Errorf("directory %s still exists after Close (stat error %v)", got.Cwd, err)
	}
}

// 16 concurrent callers share at most PythonPoolSize workers.
func TestPythonConcurrency(t *testing.T) {
	rt := NewPython(sandboxed(t, Options{PythonPoolSize: 2}))
	c := mustCompile(t, rt, pyFn("concurrent", pyEcho))
	hammer(t, c, 16, 20)
	if stats := rt.(StatsReporter).Stats(); stats.Idle != 2 || stats.Busy != 0 {
		t.Errorf("stats = %+v, want 2 idle workers", stats)
	}
}

func TestPythonCloseKillsWorkers(t *testing.T) {
	rt := NewPython(sandboxed(t, Options{PythonPoolSize: 3}))
	fn := pyFn("close-"+time.Now().Format("150405.000000000"), pyEchoUnless("import time; time.sleep(60)"))
	c, err := rt.Compile(fn)
	if err != nil {
		t.Fatal(err)
	}
	assertEcho(t, c, "warm")
	go func() { _, _ = invoke(t, c, echoRequest("bad")) }() // busy in a worker
	deadline := time.Now().Add(10 * time.Second)
	for rt.(StatsReporter).Stats().Busy == 0 && time.Now().Before(deadline) {
		time.Sleep(10 * time.Millisecond)
	}
	if n := len(workerProcesses(fn.Name)); n == 0 {
		t.Fatal("no worker process found before Close")
	}
	c.Close()
	if left := workerProcesses(fn.Name); len(left) > 0 {
		t.Errorf("worker processes %v left after Close", left)
	}
	if stats := rt.(StatsReporter).Stats(); stats.Idle != 0 || stats.Busy != 0 {
		t.Errorf("stats after Close = %+v, want none idle or busy", stats)
	}
}

func TestPythonMissingBinary(t *testing.T) {
	_, err := NewPython(sandboxed(t, Options{PythonBinary: "/nonexistent/python3"})).Compile(pyFn("missing", pyEcho))
	if err == nil || !strings.Contains(err.Error(), "/nonexistent/python3") {
		t.Fatalf("error = %v, want one naming the binary", err)
	}
}

// An interpreter that answers for its paths but cannot compile the worker fails
// every Compile, each trying again: no half-resolved interpreter is kept.
func TestPythonInterpreterThatCannotCompileTheWorker(t *testing.T) {
	python, err := exec.LookPath(DefaultPythonBinary)
	if err != nil {
		t.Skip(err)
	}
	// It answers -I -c (the paths) as python3 does, itself as the executable,
	// and fails -I -S -c.
	fake := filepath.Join(t.TempDir(), "python3")
	script := "#!/bin/sh\nif [ \"$2\" = -S ]; then echo 'no compiler here' >&2; exit 1; fi\n" + python + " \"$@\" | sed \"1s|.*|$0|\"\n"
	if err := os.WriteFile(fake, []byte(script), 0o755); err != nil {
		t.Fatal(err)
	}
	rt := NewPython(Options{PythonBinary: fake, InsecureNoSandbox: true})
	for i := range 2 {
		_, err := rt.Compile(pyFn("uncompiled", pyEcho))
		if err == nil || !strings.Contains(err.Error(), "compiling the worker") || !strings.Contains(err.Error(), "no compiler here") {
			t.Fatalf("Compile %d: error = %v, want one about compiling the worker, with the interpreter's message", i+1, err)
		}
	}
}

func BenchmarkPythonEcho(b *testing.B) {
	c := mustCompile(b, NewPython(sandboxed(b, Options{})), pyFn("bench", strings.ReplaceAll(pyEcho, `print("sync", name)`, "")))
	benchEcho(b, c)
}

// BenchmarkPythonColdStart measures a new function's first answer: compile (start
// a worker, load the source), one call, close; in sandboxes launched from each
// executable of benchLaunchers, and without a sandbox.
func BenchmarkPythonColdStart(b *testing.B) {
	modes := []struct {
		name string
		opts Options
	}{{"insecure", Options{InsecureNoSandbox: true}}}
	for _, l := range benchLaunchers(b) {
		modes = append(modes, struct {
			name string
			opts Options
		}{"sandbox/" + l.name, Options{Sandbox: l.sandbox, PythonZygote: ZygoteOff}})
		if l.sandbox.ZygoteSupported() == nil {
			modes = append(modes, struct {
				name string
				opts Options
			}{"zygote/" + l.name, Options{Sandbox: l.sandbox, PythonZygote: ZygoteAuto}})
		}
	}
	for _, mode := range modes {
		b.Run(mode.name, func(b *testing.B) {
			rt := NewPython(mode.opts)
			for b.Loop() {
				c := mustCompile(b, rt, pyFn("cold", pyEcho))
				if _, err := c.Invoke(context.Background(), echoRequest("cold")); err != nil {
					b.Fatal(err)
				}
				c.Close()
			}
		})
	}
}

func TestTailBufferKeepsTheEndWithoutAllocating(t *testing.T) {
	var tb tailBuffer
	chunk := bytes.Repeat([]byte("abcdefgh"), 4<<10) // 32 KiB
	allocs := testing.AllocsPerRun(100, func() {
		_, _ = tb.Write(chunk)
		_, _ = tb.Write([]byte("tail"))
	})
	if allocs > 0 {
		t.Errorf("%.1f allocations per write pair, want 0", allocs)
	}
	got := tb.String()
	if !strings.HasPrefix(got, "abcdefgh") || !strings.HasSuffix(got, "abcdefghtail") || len(got) != headBytes+len("\n[...]\n")+tailBytes {
		t.Errorf("kept %d bytes: %.12q ... %q", len(got), got, got[len(got)-12:])
	}
}

// TestStderrFloodIsPaced: a worker that writes to its stderr without end gets
// it read a few MiB a second, not as fast as the gateway can copy (a core of
// it), and what it writes last before its stderr ends is still kept.
func TestStderrFloodIsPaced(t *testing.T) {
	r, w, err := os.Pipe()
	if err != nil {
		t.Fatal(err)
	}
	var tb tailBuffer
	var stop atomic.Bool
	drained := make(chan struct{})
	go func() {
		tb.drain(r, &stop)
		close(drained)
	}()
	var written atomic.Int64
	flooded := make(chan struct{})
	go func() {
		defer close(flooded)
		chunk := bytes.Repeat([]byte("x"), 64<<10)
		deadline := time.Now().Add(time.Second)
		for time.Now().Before(deadline) {
			n, err := w.Write(chunk)
			written.Add(int64(n))
			if err != nil {
				return
			}
		}
		_, _ = w.Write([]byte("the last words"))
		w.Close()
	}()
	<-flooded
	select {
	case <-drained:
	case <-time.After(5 * time.Second):
		stop.Store(true)
		r.Close()
		<-drained
		t.Fatal("the drain did not end 5s after its pipe was closed")
	}
	if limit := int64(16 << 20); written.Load() > limit {
		t.Errorf("%d MiB of stderr drained in a second, want at most %d", written.Load()>>20, limit>>20)
	}
	if got := tb.String(); !strings.HasSuffix(got, "the last words") {
		t.Errorf("the end of stderr was not kept: %q", got[max(0, len(got)-20):])
	}
}

// A worker runs without the installation's start-up hooks (python -S), yet
// finds what site would have put on sys.path, and site's builtins.
func TestPythonSitePackages(t *testing.T) {
	out, err := exec.Command(DefaultPythonBinary, "-I", "-c", "import os, site\nfor d in site.getsitepackages():\n    os.path.isdir(d) and print(os.path.abspath(d))").Output()
	if err != nil {
		t.Fatal(err)
	}
	want := strings.Fields(string(out))
	source := `import sys
def sync(request):
    return {"path": sys.path, "builtins": [callable(exit), callable(quit), callable(help)], "nosite": sys.flags.no_site}
`
	c := mustCompile(t, NewPython(sandboxed(t, Options{})), pyFn("site", source))
	res, err := invoke(t, c, echoRequest("x"))
	if err != nil {
		t.Fatal(err)
	}
	var got struct {
		Path     []string
		Builtins []bool
		NoSite   int
	}
	if err := json.Unmarshal(res.Response, &got); err != nil {
		t.Fatal(err)
	}
	if got.NoSite != 1 {
		t.Errorf("sys.flags.no_site = %d, want 1 (start-up hooks skipped)", got.NoSite)
	}
	for _, d := range want {
		if !slices.Contains(got.Path, d) {
			t.Errorf("sys.path %v lacks the site-packages directory %s", got.Path, d)
		}
	}
	if !slices.Equal(got.Builtins, []bool{true, true, true}) {
		t.Errorf("exit, quit, help callable: %v, want all", got.Builtins)
	}
}

// An interpreter of a virtual environment finds the environment's packages in
// a worker, though workers start with -S (which skips finding them).
func TestPythonVirtualEnvironmentPackages(t *testing.T) {
	base, err := exec.LookPath(DefaultPythonBinary)
	if err != nil {
		t.Skip("no python3")
	}
	venv := filepath.Join(t.TempDir(), "venv")
	if out, err := exec.Command(base, "-m", "venv", "--without-pip", venv).CombinedOutput(); err != nil {
		t.Skipf("no venv module: %v %s", err, out)
	}
	py := filepath.Join(venv, "bin", "python")
	out, err := exec.Command(py, "-I", "-c", "import site; print(site.getsitepackages()[0])").Output()
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(strings.TrimSpace(string(out)), "venvonly.py"), []byte("VALUE = 'from the venv'\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	c := mustCompile(t, NewPython(Options{PythonBinary: py, InsecureNoSandbox: true}), pyFn("venv", "import venvonly\ndef sync(request):\n    return {'v': venvonly.VALUE}\n"))
	res, err := invoke(t, c, echoRequest("x"))
	if err != nil || !strings.Contains(string(res.Response), "from the venv") {
		t.Errorf("a module of the virtual environment: %s, %v", res.Response, err)
	}
}

// A worker that could not start a thread or a process says it reached its
// process limit, and, when its user is the gateway's, how to give it one of
// its own; any other crash says nothing of it.
func TestProcessLimitMessage(t *testing.T) {
	goRuntime := "runtime: failed to create new OS thread (have 2 already; errno=11)\nruntime: may need to increase max user processes (ulimit -u)\nfatal error: newosproc"
	for _, c := range []struct {
		tail   string
		shared bool
		want   []string
	}{
		{tail: goRuntime, want: []string{"process limit (RLIMIT_NPROC, 32 tasks)"}},
		{tail: goRuntime, shared: true, want: []string{"RLIMIT_NPROC, 32 tasks beyond", "gateway.workerUsers own"}},
		{tail: "runtime/cgo: pthread_create failed: Resource temporarily unavailable\nSIGABRT: abort", want: []string{"RLIMIT_NPROC, 32 tasks)"}},
		{tail: "RuntimeError: can't start new thread", want: []string{"could not start a thread or process"}},
		{tail: "sandbox launcher: executing /usr/bin/python3: resource temporarily unavailable: user 1073741830 runs more tasks than its process limit (RLIMIT_NPROC)", want: []string{"reached its process limit"}},
		{tail: "Traceback (most recent call last):\nMemoryError", want: nil},
	} {
		got := processLimitMessage(c.tail, 32, c.shared)
		if c.want == nil && got != "" {
			t.Errorf("%q: %q, want nothing", c.tail, got)
		}
		for _, w := range c.want {
			if !strings.Contains(got, w) {
				t.Errorf("%q: %q, want it to say %q", c.tail, got, w)
			}
		}
	}
}
