package lambda

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"io"
	"os"
	"strconv"
	"strings"
	"testing"
	"time"

	"golang.org/x/sys/unix"
)

// rawPipe is a pipe's two descriptors, closed at the test's end.
func rawPipe(t *testing.T) (r, w int) {
	t.Helper()
	var fds [2]int
	if err := unix.Pipe2(fds[:], unix.O_CLOEXEC); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		unix.Close(fds[0])
		unix.Close(fds[1])
	})
	return fds[0], fds[1]
}

// TestCallPipeReadsEveryCallHoweverLateAndTheEnd reads through callPipe, before
// and after it polls, what is written at once, what is written later (a read
// that waits in the poller), in pieces larger than the reader's buffer, and then
// the end of input.
func TestCallPipeReadsEveryCallHoweverLateAndTheEnd(t *testing.T) {
	r, w := rawPipe(t)
	p := &callPipe{fd: r}
	write := func(s string) {
		if _, err := unix.Write(w, []byte(s)); err != nil {
			t.Error(err)
		}
	}
	read := func(want string) {
		t.Helper()
		var got []byte
		buf := make([]byte, 4)
		for len(got) < len(want) {
			n, err := p.Read(buf)
			if err != nil {
				t.Fatalf("read after %q: %v", got, err)
			}
			got = append(got, buf[:n]...)
		}
		if string(got) != want {
			t.Fatalf("read %q, want %q", got, want)
		}
	}

	write("the function\n")
	read("the function\n")
	if err := p.poll(); err != nil {
		t.Fatal(err)
	}
	write("soon\n")
	read("soon\n")

	late := time.AfterFunc(100*time.Millisecond, func() { write("late, after a wait in the poller\n") })
	defer late.Stop()
	start := time.Now()
	read("late, after a wait in the poller\n")
	if waited := time.Since(start); waited < 100*time.Millisecond {
		t.Fatalf("the read returned after %v, before anything was written", waited)
	}

	unix.Close(w)
	if n, err := p.Read(make([]byte, 8)); n != 0 || !errors.Is(err, io.EOF) {
		t.Fatalf("at the end of input: %d bytes, %v; want io.EOF", n, err)
	}
	if n, err := p.Read(nil); n != 0 || err != nil {
		t.Fatalf("an empty read: %d bytes, %v", n, err)
	}
}

// TestCallPipeWritesMoreThanThePipeHolds writes, after the switch to the poller,
// a reply larger than the pipe's buffer to a reader that drains it slowly: the
// write waits for room and writes every byte in order.
func TestCallPipeWritesMoreThanThePipeHolds(t *testing.T) {
	r, w := rawPipe(t)
	p := &callPipe{fd: w}
	if err := p.poll(); err != nil {
		t.Fatal(err)
	}
	reply := bytes.Repeat([]byte("0123456789abcdef"), 64<<10) // 1 MiB
	got := make(chan []byte, 1)
	go func() {
		var all []byte
		buf := make([]byte, 32<<10)
		for len(all) < len(reply) {
			time.Sleep(time.Millisecond)
			n, err := unix.Read(r, buf)
			if err != nil || n == 0 {
				break
			}
			all = append(all, buf[:n]...)
		}
		got <- all
	}()
	n, err := p.Write(reply)
	if err != nil || n != len(reply) {
		t.Fatalf("wrote %d bytes of %d: %v", n, len(reply), err)
	}
	select {
	case all := <-got:
		if !bytes.Equal(all, reply) {
			t.Fatalf("the reader got %d bytes, not the %d written in order", len(all), len(reply))
		}
	case <-time.After(time.Minute):
		t.Fatal("the reader got less than was written in a minute")
	}
}

// TestCallPipeReportsErrors gives callPipe a descriptor that is not open: the
// read and the switch to the poller report it, rather than hang or report the
// end of input; and a write to a pipe whose reader is gone fails.
func TestCallPipeReportsErrors(t *testing.T) {
	// A regular file is not one the poller takes: the pipe stays blocking and
	// still reads.
	f, err := os.CreateTemp(t.TempDir(), "calls")
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	if _, err := f.WriteString("call\n"); err != nil {
		t.Fatal(err)
	}
	file := &callPipe{fd: int(f.Fd())}
	if err := file.poll(); err == nil {
		t.Fatal("polling a regular file succeeded")
	}
	if flags, err := unix.FcntlInt(uintptr(file.fd), unix.F_GETFL, 0); err != nil || flags&unix.O_NONBLOCK != 0 {
		t.Fatalf("after the failed switch the file's flags are %#x (%v), want it blocking", flags, err)
	}
	buf := make([]byte, 16)
	if n, err := unix.Pread(file.fd, buf, 0); err != nil || string(buf[:n]) != "call\n" {
		t.Fatalf("reading the file after the failed switch: %q, %v", buf[:n], err)
	}

	closed := &callPipe{fd: -1}
	if _, err := closed.Read(make([]byte, 8)); err == nil || errors.Is(err, io.EOF) {
		t.Fatalf("reading a closed descriptor: %v, want its error", err)
	}
	if err := closed.poll(); err == nil {
		t.Fatal("polling a closed descriptor succeeded")
	}
	r, w := rawPipe(t)
	p := &callPipe{fd: w}
	if err := p.poll(); err != nil {
		t.Fatal(err)
	}
	if err := p.poll(); err != nil {
		t.Fatalf("polling again: %v", err)
	}
	unix.Close(r)
	if _, err := p.Write([]byte("reply\n")); !errors.Is(err, unix.EPIPE) {
		t.Fatalf("writing to a pipe with no reader: %v, want EPIPE", err)
	}
}

// BenchmarkScriptWorkerPaced calls a warm sandboxed worker one call at a time
// with a pause after each: none (back to back), 0.5 ms, as a worker among many
// of a busy gateway is called, 20 ms or 200 ms, as a hook is called now and then. It reports the
// worker's processor time and context switches per call: what waiting for the
// next call costs its Go runtime (callPipe).
func BenchmarkScriptWorkerPaced(b *testing.B) {
	for _, tt := range []struct {
		rt Runtime
		fn Function
	}{{NewSandboxedJavaScript(sandboxed(b, Options{})), jsFn("paced", jsEcho)}, {NewSandboxedJsonnet(sandboxed(b, Options{})), jsonnetFn("paced", jsonnetEcho)}} {
		for _, pace := range []time.Duration{0, 500 * time.Microsecond, 20 * time.Millisecond, 200 * time.Millisecond} {
			b.Run(tt.fn.Runtime+"/pause-"+pace.String(), func(b *testing.B) {
				benchmarkPaced(b, tt.rt, tt.fn, pace)
			})
		}
	}
}

// benchmarkPaced calls fn's worker, then waits pace before the next call.
func benchmarkPaced(b *testing.B, rt Runtime, fn Function, pace time.Duration) {
	c := mustCompile(b, rt, fn)
	defer c.Close()
	req := echoRequest("paced")
	if _, err := c.Invoke(context.Background(), req); err != nil {
		b.Fatal(err)
	}
	pids := ScriptWorkerPIDs(os.Getpid(), fn.Name)
	if len(pids) != 1 {
		b.Fatalf("workers of %s: %v, want one", fn.Name, pids)
	}
	cpu, switches := threadsUsage(b, pids[0])
	b.ResetTimer()
	for b.Loop() {
		if _, err := c.Invoke(context.Background(), req); err != nil {
			b.Fatal(err)
		}
		time.Sleep(pace)
	}
	cpu2, switches2 := threadsUsage(b, pids[0])
	b.ReportMetric(float64((cpu2-cpu).Microseconds())/float64(b.N), "worker-cpu-µs/op")
	b.ReportMetric(float64(switches2-switches)/float64(b.N), "worker-ctxsw/op")
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

// TestTopLevelLoopOfASpareTimesOutInTheWorker loads a function whose top-level
// code loops into a spare that has waited for it, with its runtime's monitor
// asleep. The worker's own timer ends the loop on time: the compile error is
// the worker's, not the gateway's kill of a worker past its load allowance.
// The timer needs the monitor awake (callPipe): had the worker waited for its
// function in the poller, and made no system call the runtime sees before the
// top-level code (wakeMonitor), the loop would run until the monitor's own
// wake-up a minute later.
func TestTopLevelLoopOfASpareTimesOutInTheWorker(t *testing.T) {
	rt := NewSandboxedJavaScript(sandboxed(t, Options{WorkerSpares: 1}))
	mustCompile(t, rt, jsFn("first", jsEcho))
	waitSpares(t, rt, 1)
	time.Sleep(time.Second) // every P of the spare idle, its monitor asleep
	fn := jsFn("top-loop", "while (true) {}")
	fn.Timeout = 300 * time.Millisecond
	_, err := rt.Compile(fn)
	assertCompileError(t, err, 0, 0, "top-level code did not finish within 300ms")
}

// TestSandboxedWorkersPassCallsLargerThanAPipe calls sandboxed JavaScript and
// Jsonnet workers, after their switch to the poller, with requests and replies
// of several times a pipe's buffer, and small calls between them: the worker
// reads a request in pieces and writes its reply as room comes.
func TestSandboxedWorkersPassCallsLargerThanAPipe(t *testing.T) {
	for _, tt := range []struct {
		rt Runtime
		fn Function
	}{
		{NewSandboxedJavaScript(sandboxed(t, Options{})), jsFn("large", "function sync(request) { return {blob: request.parent.spec.blob, n: request.parent.spec.blob.length}; }")},
		{NewSandboxedJsonnet(sandboxed(t, Options{})), jsonnetFn("large", "function(request) { blob: request.parent.spec.blob, n: std.length(request.parent.spec.blob) }")},
	} {
		t.Run(tt.fn.Runtime, func(t *testing.T) {
			c := mustCompile(t, tt.rt, tt.fn)
			defer c.Close()
			for _, size := range []int{10, 300 << 10, 10, 3 << 20, 10} {
				blob := strings.Repeat("0123456789abcdef", size/16+1)[:size]
				request := json.RawMessage(`{"parent": {"metadata": {"name": "x"}, "spec": {"blob": "` + blob + `"}}, "children": {}}`)
				res, err := invoke(t, c, request)
				if err != nil {
					t.Fatalf("a request of %d bytes: %v", size, err)
				}
				var got struct {
					Blob string `json:"blob"`
					N    int    `json:"n"`
				}
				if err := json.Unmarshal(res.Response, &got); err != nil || got.Blob != blob || got.N != size {
					t.Fatalf("a request of %d bytes: a reply of %d bytes, n %d (%v)", size, len(got.Blob), got.N, err)
				}
			}
		})
	}
}
