package lambda

import (
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"
)

// idleWorker is f's only idle worker.
func idleWorker(t *testing.T, c Compiled) *pyWorker {
	t.Helper()
	f := c.(*pyFunction)
	f.pool.mu.Lock()
	defer f.pool.mu.Unlock()
	if len(f.pool.idle) != 1 {
		t.Fatalf("idle workers: %d, want one", len(f.pool.idle))
	}
	return f.pool.idle[0]
}

// TestCallToAWorkerThatDiedIdleGoesToAnother: an idle worker killed (its idle
// time, a recycle, an eviction, the OOM killer) can be lent to a call before
// the pool has seen its end. It read none of the request, so the call goes to
// a fresh worker and succeeds, where it failed with "worker exited".
func TestCallToAWorkerThatDiedIdleGoesToAnother(t *testing.T) {
	for _, tt := range []struct {
		rt      Runtime
		fn      Function
		workers func(string) []int
	}{
		{NewPython(sandboxed(t, Options{PythonPoolSize: 1})), pyFn("diesidle", pyEcho), workerProcesses},
		{NewSandboxedJavaScript(sandboxed(t, Options{PythonPoolSize: 1})), jsFn("diesidle", jsEcho), scriptWorkers},
	} {
		t.Run(tt.fn.Runtime, func(t *testing.T) {
			c := mustCompile(t, tt.rt, tt.fn)
			defer c.Close()
			assertEcho(t, c, "a")
			w := idleWorker(t, c)
			pids := tt.workers(tt.fn.Name)
			if len(pids) != 1 {
				t.Fatalf("workers: %v, want one", pids)
			}
			if err := syscall.Kill(pids[0], syscall.SIGKILL); err != nil {
				t.Fatal(err)
			}
			<-w.exited
			// The pool sees the end a second late, as a loaded gateway may:
			// the call is lent the dead worker.
			late := make(chan struct{})
			w.exited = late
			timer := time.AfterFunc(time.Second, func() { close(late) })
			defer timer.Stop()
			assertEcho(t, c, "b")
			if !w.undelivered.Load() {
				t.Fatal("the call was not lent the dead worker (the machine was too slow for the test's second?)")
			}
			if got := tt.workers(tt.fn.Name); len(got) != 1 || got[0] == pids[0] {
				t.Fatalf("workers after the call: %v, want one new", got)
			}
		})
	}
}

// TestCallThatKillsItsWorkerIsNotRetried: a worker that read the request and
// died on it is a crash of the call, which is not tried again: the function's
// code ran, and may have acted, once.
func TestCallThatKillsItsWorkerIsNotRetried(t *testing.T) {
	rt := NewPython(sandboxed(t, Options{PythonPoolSize: 1}))
	c := mustCompile(t, rt, pyFn("suicide", `
import os, signal
def sync(request):
    os.kill(os.getpid(), signal.SIGKILL)
`))
	before := rt.(*python).Stats().Starts
	_, err := invoke(t, c, echoRequest("x"))
	assertInvokeError(t, err, ReasonCrash, "worker exited")
	if starts := rt.(*python).Stats().Starts - before; starts != 1 {
		t.Fatalf("the call started %d workers, want 1: it was tried again", starts)
	}
}

// TestSpareThatDiedWaitingIsReplaced: a spare killed while it waits, and taken
// before the gateway has seen its end, has read none of the function's
// source: the function loads in a fresh worker and answers.
func TestSpareThatDiedWaitingIsReplaced(t *testing.T) {
	rt := NewPython(sandboxed(t, Options{PythonPoolSize: 1, WorkerSpares: 1})).(*python)
	warm := mustCompile(t, rt, pyFn("warm", pyEcho)) // makes the spare set, and keeps it
	defer warm.Close()
	set := rt.spares.sets[false]
	waitUntil(t, func() bool { return set.count() == 1 }, "a spare")
	set.mu.Lock()
	spare := set.ready[0]
	set.mu.Unlock()
	// The spare starts at a low processor weight: under load, its process
	// may be found a while after the set counts it.
	var pid int
	waitUntil(t, func() bool {
		for _, p := range workerProcesses("") {
			if !slices.Contains(workerProcesses("test/warm"), p) {
				pid = p
			}
		}
		return pid != 0
	}, "the spare's process")
	if spare.fk != nil && spare.fk.Worker() != pid {
		t.Fatalf("the spare is %d, not %d", spare.fk.Worker(), pid)
	}
	// As if it died just after take gave it the usual weight: take drops a
	// spare whose cgroup is already gone, before it sends any source.
	if err := spare.foreground(); err != nil {
		t.Fatal(err)
	}
	if err := syscall.Kill(pid, syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	<-spare.exited
	late := make(chan struct{})
	spare.exited = late
	timer := time.AfterFunc(time.Second, func() { close(late) })
	defer timer.Stop()
	c := mustCompile(t, rt, pyFn("afterspare", pyEcho))
	defer c.Close()
	assertEcho(t, c, "a")
	if !spare.undelivered.Load() {
		t.Fatal("the dead spare was not taken (the machine was too slow for the test's second?)")
	}
}

// teePeeker reads each request without taking it from its stdin (tee(2) into
// a pipe of its own: the worker's loop is pointed at a pipe that never
// speaks), says on stderr whether it saw it, and dies: the gateway finds the
// request unread and gives the call to another worker.
const teePeeker = `import ctypes, os, select, sys, threading
libc = ctypes.CDLL(None, use_errno=True)
real = os.dup(3)  # the worker's copy of its stdin
r, w = os.pipe()
os.dup2(r, 3)
def peek():
    select.select([real], [], [])
    pr, pw = os.pipe()
    n = libc.tee(real, pw, 65536, 0)
    if n > 0:
        sys.__stderr__.write("saw %r\n" % os.read(pr, 65536)[:40])
    else:
        sys.__stderr__.write("tee: %s\n" % os.strerror(ctypes.get_errno()))
    sys.__stderr__.flush()
    os._exit(7)
threading.Thread(target=peek, daemon=True).start()
def sync(request):
    return {}
`

// TestRequestLeftUnreadWasNotSeen: a call goes to another worker only when
// the first left all of its request on its stdin, which must mean that the
// function never saw it. A worker that could read the pipe without taking
// what it read (tee) would act on the request and die, and the call would run
// again on up to maxDeliveries workers.
func TestRequestLeftUnreadWasNotSeen(t *testing.T) {
	rt := NewPython(sandboxed(t, Options{PythonPoolSize: 1, WorkerSpares: -1}))
	c := mustCompile(t, rt, pyFn("teepeek", teePeeker))
	before := rt.(*python).Stats().Starts
	_, err := invoke(t, c, echoRequest("x"))
	assertInvokeError(t, err, ReasonCrash, "exit status 7")
	starts := rt.(*python).Stats().Starts - before
	if strings.Contains(err.Error(), "saw ") {
		t.Fatalf("a worker read the request and left it for the next (%d workers started): %v", starts, err)
	}
	if !strings.Contains(err.Error(), "tee: Operation not permitted") {
		t.Fatalf("the peeker did not report tee refused: %v", err)
	}
}

// writeBack reads each request from its stdin, as the worker would, then
// opens its stdin again for writing and puts the request back, and dies: the
// request would look unread, and the call go to another worker.
const writeBack = `import os, select, sys, threading
real = os.dup(3)  # the worker's copy of its stdin
r, w = os.pipe()
os.dup2(r, 3)
def back():
    select.select([real], [], [])
    frame = os.read(real, 65536)
    try:
        try:
            os.fchmod(real, 0o600)  # its owner may give its mode back
        except OSError:
            pass
        fd = os.open("/proc/self/fd/%d" % real, os.O_WRONLY)
        os.write(fd, frame)
        sys.__stderr__.write("wrote back %d bytes\n" % len(frame))
    except OSError as e:
        sys.__stderr__.write("reopen: %s\n" % e.strerror)
    sys.__stderr__.flush()
    os._exit(7)
threading.Thread(target=back, daemon=True).start()
def sync(request):
    return {}
`

// TestRequestWrittenBackIsNotDeliveredAgain: a worker that writes a request it
// read back into its stdin (the gateway's pipe, its mode given back and
// reopened through /proc/self/fd) makes it look unread: the call must not run
// again on another worker. A namespace sandbox's worker is another user than
// the pipe's owner and can do neither; a Landlock worker of a gateway that is
// not root is the gateway's own user and can, so its calls are never tried
// again (run by TestLandlockSandbox).
func TestRequestWrittenBackIsNotDeliveredAgain(t *testing.T) {
	rt := NewPython(sandboxed(t, Options{PythonPoolSize: 1, WorkerSpares: -1}))
	c := mustCompile(t, rt, pyFn("writeback", writeBack))
	before := rt.(*python).Stats().Starts
	_, err := invoke(t, c, echoRequest("x"))
	assertInvokeError(t, err, ReasonCrash, "exit status 7")
	if starts := rt.(*python).Stats().Starts - before; starts != 1 {
		t.Fatalf("a worker put the request it read back on its stdin, and the call ran again (%d workers started): %v", starts, err)
	}
}
