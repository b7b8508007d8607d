package lambda

import (
	"bytes"
	"context"
	"errors"
	"io"
	"os"
	"strconv"
	"strings"
	"testing"
	"time"
)

// TestCallReaderReadsEveryCallHoweverLateAndTheEnd reads through callReader what
// is written at once (the busy wait's read), after its busy wait (the blocking
// read's), in pieces larger than the reader's buffer, and then the end of input.
func TestCallReaderReadsEveryCallHoweverLateAndTheEnd(t *testing.T) {
	pr, pw, err := os.Pipe()
	if err != nil {
		t.Fatal(err)
	}
	defer pr.Close()
	r := &callReader{fd: int(pr.Fd()), wait: 20 * time.Millisecond}
	read := func(want string) {
		t.Helper()
		var got []byte
		buf := make([]byte, 4)
		for len(got) < len(want) {
			n, err := r.Read(buf)
			if err != nil {
				t.Fatalf("read after %q: %v", got, err)
			}
			got = append(got, buf[:n]...)
		}
		if string(got) != want {
			t.Fatalf("read %q, want %q", got, want)
		}
	}

	pw.WriteString("soon\n")
	read("soon\n")

	late := time.AfterFunc(100*time.Millisecond, func() { pw.WriteString("late, past the busy wait\n") })
	defer late.Stop()
	start := time.Now()
	read("late, past the busy wait\n")
	if waited := time.Since(start); waited < 100*time.Millisecond {
		t.Fatalf("the read returned after %v, before anything was written", waited)
	}

	pw.Close()
	if n, err := r.Read(make([]byte, 8)); n != 0 || !errors.Is(err, io.EOF) {
		t.Fatalf("at the end of input: %d bytes, %v; want io.EOF", n, err)
	}
	if n, err := r.Read(nil); n != 0 || err != nil {
		t.Fatalf("an empty read: %d bytes, %v", n, err)
	}
}

// TestCallReaderReportsAReadError gives callReader a descriptor that is not
// open: the error is the read's, not a hang or the end of input.
func TestCallReaderReportsAReadError(t *testing.T) {
	r := &callReader{fd: -1, wait: time.Millisecond}
	if _, err := r.Read(make([]byte, 8)); err == nil || errors.Is(err, io.EOF) {
		t.Fatalf("reading a closed descriptor: %v, want its error", err)
	}
}

// BenchmarkScriptWorkerPaced calls a warm sandboxed worker one call at a time
// with a pause of 0.5 ms after each, as a worker among many of a busy gateway is
// called, and reports the worker's processor time and context switches per call:
// what waiting for the next call costs its Go runtime (callReader).
func BenchmarkScriptWorkerPaced(b *testing.B) {
	for _, tt := range []struct {
		rt Runtime
		fn Function
	}{{NewSandboxedJavaScript(sandboxed(b, Options{})), jsFn("paced", jsEcho)}, {NewSandboxedJsonnet(sandboxed(b, Options{})), jsonnetFn("paced", jsonnetEcho)}} {
		b.Run(tt.fn.Runtime, func(b *testing.B) {
			c := mustCompile(b, tt.rt, tt.fn)
			defer c.Close()
			req := echoRequest("paced")
			if _, err := c.Invoke(context.Background(), req); err != nil {
				b.Fatal(err)
			}
			pids := ScriptWorkerPIDs(os.Getpid(), tt.fn.Name)
			if len(pids) != 1 {
				b.Fatalf("workers of %s: %v, want one", tt.fn.Name, pids)
			}
			cpu, switches := threadsUsage(b, pids[0])
			b.ResetTimer()
			for b.Loop() {
				if _, err := c.Invoke(context.Background(), req); err != nil {
					b.Fatal(err)
				}
				time.Sleep(500 * time.Microsecond)
			}
			cpu2, switches2 := threadsUsage(b, pids[0])
			b.ReportMetric(float64((cpu2-cpu).Microseconds())/float64(b.N), "worker-cpu-µs/op")
			b.ReportMetric(float64(switches2-switches)/float64(b.N), "worker-ctxsw/op")
		})
	}
}

// threadsUsage is the processor time (from the scheduler's statistics, in
// nanoseconds) and the context switches of all threads of process pid.
func threadsUsage(tb testing.TB, pid int) (cpu time.Duration, switches int64) {
	tb.Helper()
	dir := "/proc/" + strconv.Itoa(pid) + "/task/"
	tasks, err := os.ReadDir(dir)
	if err != nil {
		tb.Fatal(err)
	}
	for _, task := range tasks {
		if sched, err := os.ReadFile(dir + task.Name() + "/schedstat"); err == nil {
			ns, _ := strconv.ParseInt(strings.Fields(string(sched))[0], 10, 64)
			cpu += time.Duration(ns)
		}
		status, err := os.ReadFile(dir + task.Name() + "/status")
		if err != nil {
			continue
		}
		for line := range bytes.Lines(status) {
			if k, v, ok := strings.Cut(string(line), ":"); ok && strings.HasSuffix(k, "ctxt_switches") {
				n, _ := strconv.ParseInt(strings.TrimSpace(v), 10, 64)
				switches += n
			}
		}
	}
	return cpu, switches
}
