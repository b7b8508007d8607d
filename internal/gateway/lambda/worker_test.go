package lambda

import (
	"context"
	"errors"
	"os"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/metalambda/metalambda/internal/gateway/sandbox"
)

// jsForms and jsonnetForms are each runtime in process and in sandboxed workers.
func jsForms(t *testing.T) map[string]Runtime {
	return map[string]Runtime{"in-process": NewJavaScript(Options{}), "sandboxed": NewSandboxedJavaScript(sandboxed(t, Options{PythonPoolSize: 2}))}
}

func jsonnetForms(t *testing.T) map[string]Runtime {
	return map[string]Runtime{"in-process": NewJsonnet(Options{}), "sandboxed": NewSandboxedJsonnet(sandboxed(t, Options{PythonPoolSize: 2}))}
}

func scriptWorkers(function string) []int {
	return ScriptWorkerPIDs(os.Getpid(), function)
}

func TestScriptWorkersEcho(t *testing.T) {
	for _, tt := range []struct {
		rt       Runtime
		fn       Function
		wantLogs string
	}{
		{NewSandboxedJavaScript(sandboxed(t, Options{})), jsFn("echo", jsEcho), "sync w {\"n\":1}\n"},
		{NewSandboxedJavaScript(sandboxed(t, Options{})), jsFn("fission", jsFissionEcho), "fission application/json\n"},
		{NewSandboxedJsonnet(sandboxed(t, Options{})), jsonnetFn("echo", jsonnetEcho), "TRACE: test/echo:3 sync w\n"},
	} {
		t.Run(tt.fn.Runtime+"/"+tt.fn.Name, func(t *testing.T) {
			start := time.Now()
			c := mustCompile(t, tt.rt, tt.fn)
			t.Logf("compiled (a first worker started) in %s", time.Since(start))
			if res := assertEcho(t, c, "w"); res.Logs != tt.wantLogs {
				t.Errorf("logs = %q, want %q", res.Logs, tt.wantLogs)
			}
			if n := len(scriptWorkers(tt.fn.Name)); n == 0 {
				t.Errorf("no worker process of %s", tt.fn.Name)
			}
			c.Close()
			if left := scriptWorkers(tt.fn.Name); len(left) > 0 {
				t.Errorf("workers %v outlive Close", left)
			}
		})
	}
}

// heapInUse is this process's Go heap after a collection.
func heapInUse() uint64 {
	runtime.GC()
	var m runtime.MemStats
	runtime.ReadMemStats(&m)
	return m.HeapInuse
}

// assertGone waits for the worker processes pids to be gone.
func assertGone(t *testing.T, pids []int) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for _, pid := range pids {
		for syscall.Kill(pid, 0) == nil {
			if time.Now().After(deadline) {
				t.Fatalf("worker %d still runs", pid)
			}
			time.Sleep(10 * time.Millisecond)
		}
	}
}

// A JavaScript string of 1 GiB ends at the worker's address-space limit, not on
// the gateway's heap; the worker is gone and a fresh one serves the next call.
func TestScriptWorkerJavaScriptMemoryBomb(t *testing.T) {
	rt := NewSandboxedJavaScript(sandboxed(t, Options{PythonPoolSize: 1}))
	other := mustCompile(t, rt, jsFn("other", jsEcho))
	source := `function sync(request) {
  if (request.parent.metadata.name === "bomb") { const s = "x".repeat(1 << 30); return {n: s.length}; }
  return (` + strings.TrimSpace(jsEcho) + `)(request);
}`
	c := mustCompile(t, rt, jsFn("bomb", source))
	before := heapInUse()
	workers := scriptWorkers("test/bomb")
	_, err := invoke(t, c, echoRequest("bomb"))
	assertInvokeError(t, err, ReasonCrash, "fatal error: out of memory")
	t.Logf("the bomb: %v", err)
	if ie := (*InvokeError)(nil); errors.As(err, &ie) && strings.Contains(ie.Message, "goroutine") {
		t.Errorf("the error quotes the worker's goroutines: %s", ie.Message)
	}
	if grown := int64(heapInUse()) - int64(before); grown > 64<<20 {
		t.Errorf("the test process's heap grew by %d MiB", grown>>20)
	}
	assertGone(t, workers)
	assertEcho(t, other, "neighbour")
	assertEcho(t, c, "after")
}

// A Jsonnet evaluation past its timeout is killed with its worker, not left to
// run on.
func TestScriptWorkerJsonnetRunaway(t *testing.T) {
	rt := NewSandboxedJsonnet(sandboxed(t, Options{PythonPoolSize: 1}))
	other := mustCompile(t, rt, jsonnetFn("other", jsonnetEcho))
	source := `function(request)
  if request.parent.metadata.name == "spin" then {n: std.foldl(function(a, i) a + i, std.range(1, 2e7), 0)}
  else (` + jsonnetEcho + `)(request)`
	fn := jsonnetFn("runaway", source)
	fn.Timeout = time.Second
	c := mustCompile(t, rt, fn)
	assertEcho(t, c, "warm")
	workers := scriptWorkers(fn.Name)
	if len(workers) != 1 {
		t.Fatalf("workers of %s: %v, want one", fn.Name, workers)
	}
	start := time.Now()
	_, err := invoke(t, c, echoRequest("spin"))
	assertInvokeError(t, err, ReasonTimeout, "1s")
	if elapsed := time.Since(start); elapsed > 10*time.Second {
		t.Errorf("the call returned after %s, want it to end at its timeout of 1s", elapsed)
	}
	assertGone(t, workers)
	assertEcho(t, other, "neighbour")
	assertEcho(t, c, "after")
	if now := scriptWorkers(fn.Name); len(now) != 1 || slices.Contains(workers, now[0]) {
		t.Errorf("workers after the timeout: %v, want one fresh one (the killed one was %v)", now, workers)
	}
}

// The worker's sandbox leaves a function no files of the host: JavaScript and
// Jsonnet have no file access of their own, and this checks that the worker
// process itself sees only the system directories and the gateway's executable.
func TestScriptWorkerSandboxView(t *testing.T) {
	c := mustCompile(t, NewSandboxedJavaScript(sandboxed(t, Options{PythonPoolSize: 1})), jsFn("view", jsEcho))
	assertEcho(t, c, "view")
	pids := scriptWorkers("test/view")
	if len(pids) != 1 {
		t.Fatalf("workers: %v, want one", pids)
	}
	status, err := os.ReadFile("/proc/" + strconv.Itoa(pids[0]) + "/status")
	if err != nil {
		t.Fatal(err)
	}
	if os.Geteuid() == 0 && strings.Contains(string(status), "\nUid:\t0\t") {
		t.Errorf("the worker runs as root:\n%s", status)
	}
	if !strings.Contains(string(status), "NoNewPrivs:\t1") || !strings.Contains(string(status), "CapEff:\t0000000000000000") {
		t.Errorf("the worker keeps privileges:\n%s", status)
	}
	if inLandlockChild() { // its root is the host's; TestPythonEscapes tries Landlock's rules
		return
	}
	if _, err := os.Stat("/proc/" + strconv.Itoa(pids[0]) + "/root/etc/passwd"); err == nil {
		t.Error("the worker sees /etc/passwd")
	}
}

// BenchmarkScriptWorkerEcho measures a call through a warm sandboxed worker.
func BenchmarkScriptWorkerEcho(b *testing.B) {
	for _, tt := range []struct {
		rt Runtime
		fn Function
	}{{NewSandboxedJavaScript(sandboxed(b, Options{})), jsFn("echo", jsEcho)}, {NewSandboxedJsonnet(sandboxed(b, Options{})), jsonnetFn("echo", jsonnetEcho)}} {
		b.Run(tt.fn.Runtime, func(b *testing.B) {
			benchEcho(b, mustCompile(b, tt.rt, tt.fn))
		})
	}
}

// BenchmarkScriptWorkerColdStart measures a new JavaScript or Jsonnet function's
// first answer: compile (start a sandboxed worker, load the source), one call,
// close; with workers started from each executable of benchLaunchers.
func BenchmarkScriptWorkerColdStart(b *testing.B) {
	launchers := benchLaunchers(b)
	for _, rt := range []string{JavaScript, Jsonnet} {
		for _, l := range launchers {
			b.Run(rt+"/"+l.name, func(b *testing.B) {
				opts := Options{Sandbox: l.sandbox}
				run, fn := NewSandboxedJavaScript(opts), jsFn("cold", jsEcho)
				if rt == Jsonnet {
					run, fn = NewSandboxedJsonnet(opts), jsonnetFn("cold", jsonnetEcho)
				}
				for b.Loop() {
					c := mustCompile(b, run, fn)
					if _, err := c.Invoke(context.Background(), echoRequest("cold")); err != nil {
						b.Fatal(err)
					}
					c.Close()
				}
			})
		}
	}
}

// BenchmarkScriptWorkerSpareStart measures a new function's first answer when
// a spare is ready, as most cold calls find one: take the spare, load the
// function's source into it, one call (call-ms/op). The function is registered
// (compiled) first, and each call waits for a spare: "settled" 200 ms more, as
// paced calls find their spares; "fresh" not at all, so that the call finds a
// spare whose executable is still starting, as calls back to back do. Workers
// run from the executables make build makes. ns/op counts the waits.
func BenchmarkScriptWorkerSpareStart(b *testing.B) {
	sb, err := sandbox.New(sandbox.Options{Launcher: buildCommand(b, sandbox.LauncherExecutable), Workers: buildRuntimeWorkers(b)})
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(sb.Close)
	for _, rt := range []string{JavaScript, Jsonnet} {
		for _, settle := range []time.Duration{200 * time.Millisecond, 0} {
			b.Run(rt+"/"+map[bool]string{true: "settled", false: "fresh"}[settle > 0], func(b *testing.B) {
				opts := Options{Sandbox: sb, WorkerSpares: 1}
				run, fn := NewSandboxedJavaScript(opts), jsFn("spare", jsEcho)
				if rt == Jsonnet {
					run, fn = NewSandboxedJsonnet(opts), jsonnetFn("spare", jsonnetEcho)
				}
				s := run.(*scripts)
				// The first function makes the spare set, and keeps it while open.
				defer mustCompile(b, run, fn).Close()
				var calls time.Duration
				i := 0
				for b.Loop() {
					i++
					fn.Name = "spare-" + strconv.Itoa(i)
					c := mustCompile(b, run, fn) // checks the source in a worker it does not keep
					waitForSpare(b, s)
					time.Sleep(settle)
					start := time.Now()
					if _, err := c.Invoke(context.Background(), echoRequest("cold")); err != nil {
						b.Fatal(err)
					}
					calls += time.Since(start)
					c.Close()
				}
				b.ReportMetric(float64(calls.Microseconds())/1000/float64(b.N), "call-ms/op")
			})
		}
	}
}

// waitForSpare waits until s's spare set holds a spare.
func waitForSpare(b *testing.B, s *scripts) {
	b.Helper()
	for deadline := time.Now().Add(30 * time.Second); ; time.Sleep(5 * time.Millisecond) {
		s.spares.mu.Lock()
		set := s.spares.sets[false]
		s.spares.mu.Unlock()
		if set != nil && set.count() > 0 {
			return
		}
		if time.Now().After(deadline) {
			b.Fatal("no spare after 30 s")
		}
	}
}
