package lambda

import (
	"context"
	"os"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/metalambda/metalambda/internal/gateway/sandbox"
)

// zygoteProbe is a function that attacks, from inside its worker, what a
// zygote's child shares with its init, its zygote and its siblings.
const zygoteProbe = `import os, ctypes, signal, socket, stat
libc = ctypes.CDLL(None, use_errno=True)
def attempt(f):
    try:
        r = f()
        return "ok" if r is None else r
    except OSError as e:
        return e.strerror
def sync(request):
    out = {}
    for sig in ("SIGKILL", "SIGTERM", "SIGINT", "SIGCONT", "SIGSTOP"):
        out["kill 1 " + sig] = attempt(lambda: os.kill(1, getattr(signal, sig)))
    out["kill -1"] = attempt(lambda: os.kill(-1, signal.SIGKILL))
    # PTRACE_ATTACH: the seccomp filter refuses it first; the reads of
    # /proc/1/mem below make the kernel's own check (as a tracer would).
    out["ptrace 1"] = "ok" if libc.ptrace(16, 1, None, None) == 0 else os.strerror(ctypes.get_errno())
    for f in ("mem", "environ", "maps", "fd", "root", "cwd", "oom_score_adj", "ns/mnt", "ns/pid", "ns/user"):
        p = "/proc/1/" + f
        def rd(p=p):
            if os.path.isdir(p):
                return "listed %d" % len(os.listdir(p))
            with open(p, "rb") as fh:
                return "read %d" % len(fh.read(64))
        out["read " + p] = attempt(rd)
    out["write /proc/1/oom_score_adj"] = attempt(lambda: open("/proc/1/oom_score_adj", "w").write("-1000") and None)
    out["dumpable"] = libc.prctl(3, 0, 0, 0, 0)
    st = os.stat("/proc/self")
    out["proc self owner"] = st.st_uid
    out["uid"] = os.getuid()
    # The init sets itself up beside the worker, which may get here first on a
    # loaded machine: what counts is what it holds once set up.
    import time
    for _ in range(250):
        status = {l.split(":")[0]: l.split(":", 1)[1].strip() for l in open("/proc/1/status") if l.split(":")[0] in ("Uid", "CapEff", "CapBnd", "CapPrm", "NoNewPrivs", "Seccomp_filters")}
        if status.get("Seccomp_filters") == "2":
            break
        time.sleep(0.02)
    out["init status"] = status
    writable = []
    for top in ("/", "/dev", "/run", "/var", "/usr", "/etc", "/home", "/root", "/opt", "/srv", "/mnt", "/media"):
        for root, dirs, files in os.walk(top):
            if root.startswith(("/proc", "/sys", "/tmp")):
                dirs[:] = []
                continue
            if os.access(root, os.W_OK):
                writable.append(root)
            if root.count("/") > 4:
                dirs[:] = []
        if top == "/":
            pass
    out["writable dirs"] = sorted(set(writable))
    out["mounts"] = [l.split()[4] for l in open("/proc/self/mountinfo")]
    try:
        s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        s.connect(b"\0metalambda")
        out["abstract"] = "connected"
    except OSError as e:
        out["abstract"] = e.strerror
    return out
`

// TestZygoteChildReachesNothing: a forked worker may neither signal nor trace
// its init (root of the zygote's user namespace, pid 1 of the worker's, the
// reaper where there is one), nor read its
// memory, environment, descriptors, root or namespaces, nor write anywhere but
// its own /tmp (no path shared with a sibling, the zygote or its init).
func TestZygoteChildReachesNothing(t *testing.T) {
	rt := zygoteRuntime(t, Options{})
	c := mustCompile(t, rt, pyFn("probe", zygoteProbe))
	out := report(t, c)
	for k, v := range out {
		switch {
		case strings.HasPrefix(k, "kill 1 "), k == "ptrace 1", k == "write /proc/1/oom_score_adj":
			if v != "Operation not permitted" && v != "Permission denied" {
				t.Errorf("%s: %v, want refused", k, v)
			}
		case k == "kill -1":
			if v != "No such process" { // no process it may signal
				t.Errorf("%s: %v, want No such process", k, v)
			}
		case k == "read /proc/1/oom_score_adj":
		case strings.HasPrefix(k, "read /proc/1/"):
			if v != "Permission denied" {
				t.Errorf("%s: %v, want Permission denied", k, v)
			}
		case k == "writable dirs":
			if len(v.([]any)) != 0 {
				t.Errorf("writable directories outside /tmp: %v", v)
			}
		case k == "abstract":
			if v == "connected" {
				t.Errorf("connected to an abstract socket outside its network namespace")
			}
		}
	}
	if status := out["init status"].(map[string]any); status["CapEff"] != "0000000000000000" || status["CapBnd"] != "0000000000000000" || status["Seccomp_filters"] != "2" {
		t.Errorf("the init holds %v: want no capability and both filters", status)
	}
	if _, ok := out["ptrace 1"]; !ok {
		t.Error("the probe did not try to trace its init")
	}
	// What was attacked is the reaper (on amd64), the init that executed it.
	assertReaperInit(t, initOf(t, rt, "test/probe"))
}

// TestZygoteNotKilledByItsChildrenPages: each live child keeps pages charged
// to its zygote's cgroup (the zygote's writes after a fork copy the pages it
// shared with the child; the copies left to the child stay charged to the
// zygote). Enough live children, of any tenants, must not fill the zygote's
// cgroup: the zygote would be killed, and every child with it.
func TestZygoteNotKilledByItsChildrenPages(t *testing.T) {
	rt := zygoteRuntime(t, Options{WorkerSpares: -1})
	c := mustCompile(t, rt, victimFn())
	zs := zygoteOf(t, rt, false)
	zs.mu.Lock()
	zs.spec.Memory = 40 << 20
	if zs.current != nil {
		zs.current.Close()
		zs.current = nil
	}
	zs.mu.Unlock()
	assertEcho(t, c, "before")
	zygote, _ := zs.stats()
	victim := forkedWorker(t, "test/victim", zygote)
	defer holdCall(t, c)()
	limits := rt.opts.workerLimits(rt.opts.PythonMemoryLimit, rt.opts.PythonMemoryLimit)
	var children []*sandbox.Forked
	defer func() { endForked(children) }()
	for i := range 60 {
		f, err := zs.fork(limits, true)
		if err == errNoZygote {
			continue // past its bounds, while the replacement starts
		}
		if err != nil {
			t.Fatalf("fork %d: %v", i, err)
		}
		children = append(children, f)
	}
	time.Sleep(2 * time.Second)
	if _, err := os.Stat("/proc/" + strconv.Itoa(victim)); err != nil {
		t.Errorf("the first function's worker was killed by the other children's pages: %v", err)
	}
	assertEcho(t, c, "after")
}

// TestZygoteBurstStaysBounded: a burst of cold starts (many functions called
// at once) while a replacement zygote starts must not fork past the bound
// from the old one, nor fill its cgroup with the pages its children pin.
func TestZygoteBurstStaysBounded(t *testing.T) {
	rt := zygoteRuntime(t, Options{WorkerSpares: -1})
	c := mustCompile(t, rt, victimFn())
	assertEcho(t, c, "before")
	zs := zygoteOf(t, rt, false)
	zygote, _ := zs.stats()
	victim := forkedWorker(t, "test/victim", zygote)
	defer holdCall(t, c)()
	limits := rt.opts.workerLimits(rt.opts.PythonMemoryLimit, rt.opts.PythonMemoryLimit)
	var mu sync.Mutex
	var children []*sandbox.Forked
	defer func() { endForked(children) }()
	maxForks := 0
	var wg sync.WaitGroup
	for range 8 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for range 30 {
				f, err := zs.fork(limits, true)
				if err != nil {
					continue
				}
				mu.Lock()
				children = append(children, f)
				if pid, forks := zs.stats(); pid == zygote && forks > maxForks {
					maxForks = forks
				}
				mu.Unlock()
			}
		}()
	}
	wg.Wait()
	time.Sleep(2 * time.Second)
	t.Logf("%d children; the first zygote forked up to %d", len(children), maxForks)
	if maxForks > zygoteMaxForks {
		t.Errorf("the first zygote forked %d children, past its bound of %d", maxForks, zygoteMaxForks)
	}
	if _, err := os.Stat("/proc/" + strconv.Itoa(victim)); err != nil {
		t.Errorf("the first function's worker was killed: %v", err)
	}
	assertEcho(t, c, "after")
}

// TestForkedChildThatDiesAtOnceIsSeenToExit: a child that fails while it
// specializes (here a file limit above the zygote's own) ends before its fork
// request has returned; its end must still be seen (its cgroup removed, its
// user given back), or whoever waits for it waits for ever.
func TestForkedChildThatDiesAtOnceIsSeenToExit(t *testing.T) {
	rt := zygoteRuntime(t, Options{})
	mustCompile(t, rt, pyFn("early", pyEcho))
	zs := zygoteOf(t, rt, false)
	limits := rt.opts.workerLimits(rt.opts.PythonMemoryLimit, rt.opts.PythonMemoryLimit)
	limits.OpenFiles = 1 << 30
	for i := range 20 {
		f, err := zs.fork(limits, true)
		if err != nil {
			t.Fatal(err)
		}
		f.Stdin.Close()
		select {
		case <-f.Exited():
		case <-time.After(10 * time.Second):
			t.Fatalf("child %d that failed to specialize was never seen to exit", i)
		}
	}
}

// victimFn answers as pyEcho; a parent named "hold" holds its call until the
// call's end.
func victimFn() Function {
	fn := pyFn("victim", `import time
def sync(request):
    name = request["parent"]["metadata"]["name"]
    if name == "hold":
        time.sleep(600)
    return {"children": [{"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": name + "-echo"}, "data": {"parent": name}}], "status": {"echoed": name}}
`)
	fn.Timeout = time.Minute
	return fn
}

// holdCall holds c's only worker in a call (victimFn), so that nothing but its
// death ends it (a retired zygote's idle workers are ended and replaced), and
// returns what ends the call.
func holdCall(t *testing.T, c Compiled) (end func()) {
	t.Helper()
	victim := workerProcesses("test/victim")
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() {
		defer close(done)
		_, _ = c.Invoke(ctx, echoRequest("hold"))
	}()
	waitUntil(t, func() bool {
		raw, _ := os.ReadFile("/proc/" + strconv.Itoa(victim[0]) + "/wchan")
		return string(raw) == "hrtimer_nanosleep" || string(raw) == "do_nanosleep"
	}, "the victim to hold its call")
	return func() {
		cancel()
		<-done
	}
}

// endForked kills the forked children and waits for their ends.
func endForked(children []*sandbox.Forked) {
	for _, f := range children {
		f.Kill()
		f.Stdin.Close()
		<-f.Exited()
	}
}
