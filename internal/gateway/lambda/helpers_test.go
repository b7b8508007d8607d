package lambda

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/metalambda/metalambda/internal/gateway/sandbox"
)

// TestMain fails the run if a worker of this process outlives the tests.
func TestMain(m *testing.M) {
	ServeWorker() // the tests' sandboxes start this binary as their launcher and workers
	serveTestPrograms()
	code := m.Run()
	closeZygotesNow()
	if left := workerProcesses(""); len(left) > 0 {
		fmt.Fprintf(os.Stderr, "python workers left behind: %v\n", left)
		code = 1
	}
	if left := ScriptWorkerPIDs(os.Getpid(), ""); len(left) > 0 {
		fmt.Fprintf(os.Stderr, "script workers left behind: %v\n", left)
		code = 1
	}
	os.Exit(code)
}

// sandboxed is opts with a sandbox of the host's default mode, closed when the test
// ends: a runtime without a sandbox (or InsecureNoSandbox) refuses to compile.
func sandboxed(tb testing.TB, opts Options) Options {
	tb.Helper()
	sb, err := sandbox.New(sandbox.Options{})
	if err != nil {
		tb.Fatal(err)
	}
	tb.Cleanup(sb.Close)
	opts.Sandbox = sb
	if opts.PythonZygote == "" {
		// METALAMBDA_TEST_PYTHON_ZYGOTE=off runs the package's tests with every
		// Python worker starting its own interpreter; auto (the default) forks
		// them from a zygote where the sandbox starts one.
		opts.PythonZygote = os.Getenv("METALAMBDA_TEST_PYTHON_ZYGOTE")
		if opts.PythonZygote == "" {
			opts.PythonZygote = DefaultPythonZygote
		}
	}
	return opts
}

// workerProcesses returns the pids of this process's Python workers of function
// (all of them when function is empty).
func workerProcesses(function string) []int {
	return PythonWorkerPIDs(os.Getpid(), function)
}

// echoRequest is a sync request for a parent called name.
func echoRequest(name string) json.RawMessage {
	return json.RawMessage(`{"controller": {"metadata": {"name": "echo"}},
	"parent": {"apiVersion": "example.com/v1", "kind": "Echo", "metadata": {"name": "` + name + `", "namespace": "default"}},
	"children": {}}`)
}

// wantEcho is the response of the echo functions for a parent called name.
func wantEcho(name string) any {
	return map[string]any{
		"children": []any{map[string]any{
			"apiVersion": "v1",
			"kind":       "ConfigMap",
			"metadata":   map[string]any{"name": name + "-echo"},
			"data":       map[string]any{"parent": name},
		}},
		"status": map[string]any{"echoed": name},
	}
}

func decode(t testing.TB, raw json.RawMessage) any {
	t.Helper()
	var v any
	dec := json.NewDecoder(bytes.NewReader(raw))
	if err := dec.Decode(&v); err != nil {
		t.Fatalf("response %q is not JSON: %v", raw, err)
	}
	return v
}

// invoke calls c with a generous overall bound.
func invoke(t testing.TB, c Compiled, request json.RawMessage) (Result, error) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	start := time.Now()
	res, err := c.Invoke(ctx, request)
	if elapsed := time.Since(start); elapsed > 10*time.Second {
		t.Errorf("Invoke took %s, want under 10s", elapsed)
	}
	return res, err
}

func assertEcho(t testing.TB, c Compiled, name string) Result {
	t.Helper()
	res, err := invoke(t, c, echoRequest(name))
	if err != nil {
		t.Fatalf("Invoke: %v (logs %q)", err, res.Logs)
	}
	if diff := cmp.Diff(wantEcho(name), decode(t, res.Response)); diff != "" {
		t.Fatalf("response (-want +got):\n%s", diff)
	}
	return res
}

func assertInvokeError(t testing.TB, err error, reason, contains string) {
	t.Helper()
	var ie *InvokeError
	if !errors.As(err, &ie) {
		t.Fatalf("error = %v (%T), want an *InvokeError", err, err)
	}
	if ie.Reason != reason || !strings.Contains(ie.Message, contains) {
		t.Fatalf("error = %q, want reason %q and a message containing %q", err, reason, contains)
	}
}

func assertCompileError(t testing.TB, err error, line, column int, contains string) {
	t.Helper()
	var ce *CompileError
	if !errors.As(err, &ce) {
		t.Fatalf("error = %v (%T), want a *CompileError", err, err)
	}
	if ce.Line != line || (column >= 0 && ce.Column != column) || !strings.Contains(ce.Message, contains) {
		t.Fatalf("error = %+v, want line %d column %d and a message containing %q", ce, line, column, contains)
	}
}

func mustCompile(t testing.TB, rt Runtime, fn Function) Compiled {
	t.Helper()
	c, err := rt.Compile(fn)
	if err != nil {
		t.Fatalf("Compile: %v", err)
	}
	t.Cleanup(c.Close)
	return c
}

// hammer calls c from goroutines×calls concurrently and reports the failures.
func hammer(t *testing.T, c Compiled, goroutines, calls int) {
	t.Helper()
	var wg sync.WaitGroup
	errs := make(chan error, goroutines*calls)
	for g := range goroutines {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range calls {
				name := fmt.Sprintf("p-%d-%d", g, i)
				res, err := c.Invoke(context.Background(), echoRequest(name))
				var got any
				if err == nil && (json.Unmarshal(res.Response, &got) != nil || !cmp.Equal(wantEcho(name), got)) {
					err = fmt.Errorf("call %s: response %s", name, res.Response)
				}
				if err != nil {
					errs <- err
				}
			}
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Error(err)
	}
}

// benchEcho calls c from parallel goroutines and reports, besides the time, the
// processor time of a call: this process's and its workers' (what a call costs the
// machine, which the time per call on a shared machine does not tell).
func benchEcho(b *testing.B, c Compiled) {
	b.ReportAllocs()
	self, workers := processCPU()
	defer func() {
		self2, workers2 := processCPU()
		perCall := func(d time.Duration) float64 { return float64(d.Nanoseconds()) / float64(b.N) / 1e3 }
		b.ReportMetric(perCall(self2-self+workers2-workers), "cpu-µs/op")
		b.ReportMetric(perCall(workers2-workers), "worker-cpu-µs/op")
	}()
	b.RunParallel(func(pb *testing.PB) {
		req := echoRequest("bench")
		for pb.Next() {
			if _, err := c.Invoke(context.Background(), req); err != nil {
				b.Error(err)
				return
			}
		}
	})
}

// processCPU is the user and system time of this process and of its live
// workers (in clock ticks of 10 ms for the workers: a benchmark runs long
// enough).
func processCPU() (self, workers time.Duration) {
	var ru syscall.Rusage
	_ = syscall.Getrusage(syscall.RUSAGE_SELF, &ru)
	self = time.Duration(syscall.TimevalToNsec(ru.Utime) + syscall.TimevalToNsec(ru.Stime))
	for _, pid := range append(workerProcesses(""), ScriptWorkerPIDs(os.Getpid(), "")...) {
		raw, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
		if err != nil {
			continue
		}
		// The fields after the command, which is in parentheses and may hold spaces.
		f := strings.Fields(string(raw[bytes.LastIndexByte(raw, ')')+1:]))
		if len(f) > 12 {
			utime, _ := strconv.ParseInt(f[11], 10, 64)
			stime, _ := strconv.ParseInt(f[12], 10, 64)
			workers += time.Duration(utime+stime) * 10 * time.Millisecond
		}
	}
	return self, workers
}
