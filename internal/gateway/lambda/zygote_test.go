package lambda

import (
	"bufio"
	"bytes"
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/metalambda/metalambda/internal/gateway/sandbox"
)

// zygoteRuntime is a Python runtime whose workers a zygote forks; the test is
// skipped where the sandbox cannot start one.
func zygoteRuntime(t *testing.T, opts Options) *python {
	t.Helper()
	opts.PythonZygote = ZygoteAuto
	opts = sandboxed(t, opts)
	if err := opts.Sandbox.ZygoteSupported(); err != nil {
		t.Skip(err)
	}
	return NewPython(opts).(*python)
}

// zygoteOf is the zygotes of rt's network view.
func zygoteOf(t *testing.T, rt *python, network bool) *zygotes {
	t.Helper()
	rt.mu.Lock()
	zs := rt.zygotes[network]
	rt.mu.Unlock()
	if zs == nil {
		t.Fatal("no zygote for the network view")
	}
	return zs
}

// forkedWorker is the only worker of function, which its zygote forked.
func forkedWorker(t *testing.T, function string, zygote int) int {
	t.Helper()
	pids := workerProcesses(function)
	if len(pids) != 1 {
		t.Fatalf("workers of %s: %v, want one", function, pids)
	}
	init, _ := strconv.Atoi(statusField(t, pids[0], "PPid"))
	if parent := statusField(t, init, "PPid"); parent != strconv.Itoa(zygote) {
		t.Fatalf("the worker's init's parent is %s, want the zygote %d", parent, zygote)
	}
	return pids[0]
}

func TestZygoteForksWorkers(t *testing.T) {
	rt := zygoteRuntime(t, Options{})
	c := mustCompile(t, rt, pyFn("zecho", pyEcho))
	assertEcho(t, c, "a")
	pid, forks := zygoteOf(t, rt, false).stats()
	if pid == 0 || forks == 0 {
		t.Fatalf("zygote pid %d, forks %d: the worker was not forked", pid, forks)
	}
	forkedWorker(t, "test/zecho", pid)
	// The worker's count of tasks when it loaded holds its init: otherwise the
	// init, counted later, would look like a process its call left behind.
	f := c.(*pyFunction)
	f.pool.mu.Lock()
	idle := slices.Clone(f.pool.idle)
	f.pool.mu.Unlock()
	if len(idle) != 1 {
		t.Fatalf("idle workers after the call: %d, want 1 (the worker was stopped)", len(idle))
	}
	if tasks := idle[0].loaded.Tasks; tasks != 2 {
		t.Fatalf("the worker counted %d tasks when it loaded, want 2: itself and its init", tasks)
	}
}

// parentOf is the parent of process pid, 0 when it is gone.
func parentOf(pid int) int {
	raw, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/status")
	if err != nil {
		return 0
	}
	for _, line := range strings.Split(string(raw), "\n") {
		if v, ok := strings.CutPrefix(line, "PPid:"); ok {
			ppid, _ := strconv.Atoi(strings.TrimSpace(v))
			return ppid
		}
	}
	return 0
}

// statusField is a field of /proc/pid/status.
func statusField(t *testing.T, pid int, name string) string {
	t.Helper()
	raw, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/status")
	if err != nil {
		t.Fatal(err)
	}
	for _, line := range strings.Split(string(raw), "\n") {
		if v, ok := strings.CutPrefix(line, name+":"); ok {
			return strings.TrimSpace(v)
		}
	}
	t.Fatalf("no %s in /proc/%d/status", name, pid)
	return ""
}

func token() string {
	b := make([]byte, 16)
	_, _ = rand.Read(b)
	return "tok" + hex.EncodeToString(b)
}

// memoryHolds reports whether the readable memory, environment or command
// line of process pid holds s.
func memoryHolds(t *testing.T, pid int, s string) bool {
	t.Helper()
	dir := "/proc/" + strconv.Itoa(pid) + "/"
	for _, f := range []string{"environ", "cmdline"} {
		raw, err := os.ReadFile(dir + f)
		if err != nil {
			t.Fatal(err)
		}
		if bytes.Contains(raw, []byte(s)) {
			return true
		}
	}
	maps, err := os.Open(dir + "maps")
	if err != nil {
		t.Fatal(err)
	}
	defer maps.Close()
	mem, err := os.Open(dir + "mem")
	if err != nil {
		t.Fatal(err)
	}
	defer mem.Close()
	sc := bufio.NewScanner(maps)
	for sc.Scan() {
		f := strings.Fields(sc.Text())
		if len(f) < 2 || f[1][0] != 'r' || strings.HasSuffix(sc.Text(), "[vvar]") {
			continue
		}
		var start, end uint64
		if _, err := fmt.Sscanf(f[0], "%x-%x", &start, &end); err != nil {
			continue
		}
		buf := make([]byte, end-start)
		n, _ := mem.ReadAt(buf, int64(start))
		if bytes.Contains(buf[:n], []byte(s)) {
			return true
		}
	}
	return false
}

// TestTemplateHoldsNoFunctionData registers a function whose source and
// environment hold a token: neither the zygote nor a spare ever holds it; the
// worker that serves the function does.
func TestTemplateHoldsNoFunctionData(t *testing.T) {
	rt := zygoteRuntime(t, Options{WorkerSpares: DefaultWorkerSpares})
	src, env := token(), token()
	fn := pyFn("secret", "SECRET = '"+src+"'\n"+pyEcho)
	fn.Env = map[string]string{"FUNCTION_TOKEN": env}
	c := mustCompile(t, rt, fn)
	zs := zygoteOf(t, rt, false)
	// A worker forked by a zygote that was replaced meanwhile (a second start
	// raced the first on a loaded machine) is recycled once idle: call until
	// the worker that answered is the current zygote's child.
	var zygote, worker int
	for attempt := 1; ; attempt++ {
		assertEcho(t, c, "x")
		zygote, _ = zs.stats()
		if pids := workerProcesses(fn.Name); len(pids) == 1 && zygote != 0 && parentOf(parentOf(pids[0])) == zygote {
			worker = pids[0]
			break
		}
		if attempt == 5 {
			worker = forkedWorker(t, fn.Name, zygote) // fails, saying why, unless it is now
			break
		}
		time.Sleep(time.Second)
	}
	// The spares refill in the background.
	waitUntil(t, func() bool { return rt.spares.sets[false].count() == DefaultWorkerSpares }, "the spares to refill")
	if !memoryHolds(t, worker, src) || !memoryHolds(t, worker, env) {
		t.Fatal("the worker's memory holds neither token: the scan cannot find them")
	}
	for _, tok := range []string{src, env} {
		if memoryHolds(t, zygote, tok) {
			t.Errorf("the zygote %d holds the function's token", zygote)
		}
		rt.spares.sets[false].mu.Lock()
		spares := append([]*pyWorker(nil), rt.spares.sets[false].ready...)
		rt.spares.sets[false].mu.Unlock()
		for _, w := range spares {
			// A spare whose fork the zygote did not answer in time (a loaded
			// machine) was started with an interpreter of its own: its process
			// must not hold the token either.
			pids := spareProcesses(t, w)
			for _, pid := range pids {
				if memoryHolds(t, pid, tok) {
					t.Errorf("spare %s (process %d of %v) holds the function's token", w.id, pid, pids)
				}
			}
		}
		init, _ := strconv.Atoi(statusField(t, worker, "PPid"))
		if memoryHolds(t, init, tok) {
			t.Errorf("the worker's init %d holds the function's token", init)
		}
	}
}

// childReport is what a function reports of its own process.
const childReport = `import os, ctypes, socket, random
def sync(request):
    status = dict(l.split(":", 1) for l in open("/proc/self/status").read().splitlines() if ":" in l)
    fds = {}
    for fd in os.listdir("/proc/self/fd"):
        try:
            fds[fd] = os.readlink("/proc/self/fd/" + fd)
        except OSError as e:
            fds[fd] = type(e).__name__
    libc = ctypes.CDLL(None, use_errno=True)
    def attempt(ret):
        return "ok" if ret == 0 else os.strerror(ctypes.get_errno())
    def tmp_size():
        st = os.statvfs("/tmp")
        return st.f_blocks * st.f_frsize
    try:
        os.setuid(0)
        setuid = "ok"
    except OSError as e:
        setuid = e.strerror
    return {"status": {k: v.strip() for k, v in status.items()}, "fds": fds,
            "unshare": attempt(libc.unshare(0x00020000)), "mount": attempt(libc.mount(b"none", b"/tmp", b"tmpfs", 0, None)),
            "setuid": setuid, "hostname": socket.gethostname(), "cgroup": open("/proc/self/cgroup").read(),
            "procs": sorted(p for p in os.listdir("/proc") if p.isdigit()), "tmp": tmp_size(),
            "rootWritable": os.access("/", os.W_OK), "random": random.random(), "pid": os.getpid()}
`

func report(t *testing.T, c Compiled) map[string]any {
	t.Helper()
	res, err := invoke(t, c, echoRequest("r"))
	if err != nil {
		t.Fatal(err)
	}
	var out map[string]any
	if err := json.Unmarshal(res.Response, &out); err != nil {
		t.Fatal(err)
	}
	return out
}

// TestZygoteChildBounds checks what each forked worker holds: no capability,
// no_new_privs, two seccomp filters (the zygote's and its own), its own PID
// namespace, /tmp, hostname and cgroup namespace, only its pipes (fds 0-2 and
// the worker's private copies: no socket, no other worker's pipe), a user of
// its own distinct from its siblings', and a different random seed.
func TestZygoteChildBounds(t *testing.T) {
	rt := zygoteRuntime(t, Options{})
	zygote := 0
	uids := map[string]bool{}
	randoms := map[float64]bool{}
	const n = 6
	for i := range n {
		fn := pyFn("bounds-"+strconv.Itoa(i), childReport)
		c := mustCompile(t, rt, fn)
		r := report(t, c)
		if zygote == 0 {
			zygote, _ = zygoteOf(t, rt, false).stats()
		}
		host := forkedWorker(t, fn.Name, zygote)
		status := r["status"].(map[string]any)
		for _, k := range []string{"CapInh", "CapPrm", "CapEff", "CapBnd", "CapAmb"} {
			if status[k] != "0000000000000000" {
				t.Errorf("%s = %v, want none", k, status[k])
			}
		}
		if status["NoNewPrivs"] != "1" || status["Seccomp"] != "2" || status["Seccomp_filters"] != "2" {
			t.Errorf("NoNewPrivs %v, Seccomp %v, Seccomp_filters %v: want 1, 2 (filter) and 2 (the zygote's and the worker's)", status["NoNewPrivs"], status["Seccomp"], status["Seccomp_filters"])
		}
		for fd, target := range r["fds"].(map[string]any) {
			s := target.(string)
			// FileNotFoundError: the listing's own descriptor, closed since.
			if !strings.HasPrefix(s, "pipe:") && s != "/dev/null" && s != "FileNotFoundError" {
				t.Errorf("fd %s is %s: want only the worker's pipes", fd, s)
			}
		}
		if len(r["fds"].(map[string]any)) > 6 {
			t.Errorf("fds %v: want 0-2, the protocol's copies and the listing's", r["fds"])
		}
		for _, k := range []string{"unshare", "mount", "setuid"} {
			if r[k] != "Operation not permitted" {
				t.Errorf("%s: %v, want Operation not permitted", k, r[k])
			}
		}
		if r["hostname"] != "sandbox" || r["cgroup"] == "" || !strings.Contains(r["cgroup"].(string), ":/\n") || r["rootWritable"] != false {
			t.Errorf("hostname %v, cgroup %q, / writable %v: want sandbox, the cgroup namespace's root, false", r["hostname"], r["cgroup"], r["rootWritable"])
		}
		if fmt.Sprint(r["procs"]) != "[1 2]" || r["pid"] != 2.0 {
			t.Errorf("processes seen %v, own pid %v: want its init and itself, pid 2", r["procs"], r["pid"])
		}
		if tmp := r["tmp"].(float64); tmp <= 0 || tmp > sandbox.DefaultTmpSize {
			t.Errorf("/tmp holds %v bytes, want at most %d", tmp, sandbox.DefaultTmpSize)
		}
		hostUID := strings.Fields(statusField(t, host, "Uid"))[0]
		if id, _ := strconv.Atoi(hostUID); id < sandbox.DefaultUIDBase+1 || id >= sandbox.DefaultUIDBase+1<<20 {
			t.Errorf("host user %s: want one of the range, not its first (the zygote's)", hostUID)
		}
		uids[hostUID] = true
		randoms[r["random"].(float64)] = true
	}
	if len(uids) != n {
		t.Errorf("host users %v: want %d distinct", uids, n)
	}
	if len(randoms) != n {
		t.Errorf("random.random() gave %v: want %d distinct values", randoms, n)
	}
	if got := statusField(t, zygote, "Uid"); strings.Fields(got)[0] != strconv.Itoa(sandbox.DefaultUIDBase) {
		t.Errorf("the zygote runs as host user %s, want %d (root of its user namespace only)", got, sandbox.DefaultUIDBase)
	}
	// CAP_SETGID, CAP_SETUID, CAP_SETPCAP, CAP_NET_ADMIN and CAP_SYS_ADMIN, in
	// its user namespace.
	if got := statusField(t, zygote, "CapEff"); got != "00000000002011c0" {
		t.Errorf("the zygote's capabilities: %s, want 00000000002011c0", got)
	}
	if got := statusField(t, zygote, "CapBnd"); got != "00000000002011c0" {
		t.Errorf("the zygote's bounding set: %s, want 00000000002011c0", got)
	}
}

// TestNoFdLeakAcrossChildren closes the stdin of the first of several
// children: it sees the end at once, which it would not if a later sibling
// held a copy of the pipe's write end.
func TestNoFdLeakAcrossChildren(t *testing.T) {
	rt := zygoteRuntime(t, Options{})
	mustCompile(t, rt, pyFn("fds", pyEcho)) // starts the zygote
	zs := zygoteOf(t, rt, false)
	limits := rt.opts.workerLimits(rt.opts.PythonMemoryLimit, rt.opts.PythonMemoryLimit)
	var children []*sandbox.Forked
	for range 11 {
		f, err := zs.fork(limits, true)
		if err != nil {
			t.Fatal(err)
		}
		children = append(children, f)
	}
	defer func() {
		for _, f := range children {
			f.Kill()
			f.Stdin.Close()
			<-f.Exited()
		}
	}()
	children[0].Stdin.Close()
	select {
	case <-children[0].Exited():
	case <-time.After(10 * time.Second):
		t.Fatal("the first child did not end when its stdin closed: a sibling holds its pipe")
	}
	for i, f := range children[1:] {
		select {
		case <-f.Exited():
			t.Errorf("child %d ended with the first", i+1)
		default:
		}
	}
}

// TestZygoteRotates: past zygoteMaxForks a new zygote (a new layout and hash
// secret) takes over, and the old one ends with its last child.
func TestZygoteRotates(t *testing.T) {
	saved := zygoteMaxForks
	zygoteMaxForks = 3
	defer func() { zygoteMaxForks = saved }()
	rt := zygoteRuntime(t, Options{WorkerSpares: -1})
	c := mustCompile(t, rt, pyFn("rot-0", childReport))
	zs := zygoteOf(t, rt, false)
	first, _ := zs.stats()
	report(t, c)
	firstMaps := mapsStart(t, forkedWorker(t, "test/rot-0", first))
	for i := 1; i < 6; i++ {
		mustCompile(t, rt, pyFn("rot-"+strconv.Itoa(i), pyEcho))
	}
	// A zygote past its bounds forks no more (its workers start their own
	// interpreter until the replacement is ready): the new one may fork the
	// next worker whatever the earlier calls took of it.
	zs.mu.Lock()
	zygoteMaxForks = 100
	zs.mu.Unlock()
	waitUntil(t, func() bool {
		zs.mu.Lock()
		defer zs.mu.Unlock()
		return zs.current != nil && zs.current.PID() != first && !zs.starting
	}, "a new zygote")
	second, _ := zs.stats()
	c2 := mustCompile(t, rt, pyFn("rot-new", childReport))
	report(t, c2)
	if mapsStart(t, forkedWorker(t, "test/rot-new", second)) == firstMaps {
		t.Errorf("the new zygote's child maps the interpreter at %s, as the old one's: want a new layout", firstMaps)
	}
}

// mapsStart is the first mapping of process pid.
func mapsStart(t *testing.T, pid int) string {
	t.Helper()
	raw, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/maps")
	if err != nil {
		t.Fatal(err)
	}
	first, _, _ := strings.Cut(string(raw), " ")
	return first
}

// TestZygoteDeath kills the zygote: its spares die with it, calls go on
// (workers started with their own interpreter meanwhile), and a new zygote
// is started.
func TestZygoteDeath(t *testing.T) {
	rt := zygoteRuntime(t, Options{WorkerSpares: DefaultWorkerSpares})
	c := mustCompile(t, rt, pyFn("death", pyEcho))
	assertEcho(t, c, "before")
	zs := zygoteOf(t, rt, false)
	set := rt.spares.sets[false]
	waitUntil(t, func() bool { return set.count() == DefaultWorkerSpares }, "the spares to refill")
	zygote, _ := zs.stats()
	set.mu.Lock()
	spares := append([]*pyWorker(nil), set.ready...)
	set.mu.Unlock()
	if err := syscallKill(zygote); err != nil {
		t.Fatal(err)
	}
	for _, w := range spares {
		select {
		case <-w.exited:
		case <-time.After(10 * time.Second):
			t.Fatalf("spare %d outlived its zygote", w.fk.PID())
		}
	}
	other := mustCompile(t, rt, pyFn("after", pyEcho))
	assertEcho(t, other, "after")
	assertEcho(t, c, "again")
	waitUntil(t, func() bool { pid, _ := zs.stats(); return pid != 0 && pid != zygote }, "a new zygote")
}

func syscallKill(pid int) error {
	p, err := os.FindProcess(pid)
	if err != nil {
		return err
	}
	return p.Kill()
}

var _ = context.Background

// TestZygoteSurvivesItsChildren: a worker that exhausts its memory or its
// tasks is stopped in its own cgroup; the zygote lives on and forks the next.
func TestZygoteSurvivesItsChildren(t *testing.T) {
	rt := zygoteRuntime(t, Options{PythonMemoryLimit: 64 << 20})
	bomb := mustCompile(t, rt, pyFn("zbomb", `def sync(request):
    hog = []
    while True:
        hog.append(bytearray(1 << 20))
`))
	zs := zygoteOf(t, rt, false)
	zygote, _ := zs.stats()
	if _, err := invoke(t, bomb, echoRequest("x")); err == nil {
		t.Fatal("the memory bomb answered")
	}
	forks := mustCompile(t, rt, pyFn("zforks", `import os, time
def sync(request):
    n = 0
    try:
        while n < 1000:
            if os.fork() == 0:
                time.sleep(30)
                os._exit(0)
            n += 1
    except OSError as e:
        return {"forked": n, "error": e.strerror}
    return {"forked": n}
`))
	res, err := invoke(t, forks, echoRequest("x"))
	if err != nil {
		t.Fatal(err)
	}
	var out map[string]any
	if err := json.Unmarshal(res.Response, &out); err != nil {
		t.Fatal(err)
	}
	if n := out["forked"].(float64); n >= sandbox.DefaultProcesses {
		t.Errorf("the worker forked %v processes, want fewer than its limit of %d", n, sandbox.DefaultProcesses)
	}
	if pid, _ := zs.stats(); pid != zygote {
		t.Fatalf("the zygote changed from %d to %d", zygote, pid)
	}
	assertEcho(t, mustCompile(t, rt, pyFn("zafter", pyEcho)), "after")
}

// closeZygotesNow kills every zygote of the process at once, and with it
// its children, so that none outlives a test binary's run (its stage
// directory with it).
func closeZygotesNow() {
	allZygotes.Range(func(k, _ any) bool {
		zs := k.(*zygotes)
		zs.mu.Lock()
		z := zs.current
		zs.current = nil
		zs.mu.Unlock()
		if z != nil {
			z.Close()
		}
		return true
	})
	retiring.Range(func(k, _ any) bool {
		k.(*sandbox.Zygote).Close()
		return true
	})
	// A zygote started in the background as the tests ended may have left its
	// (empty) stage directory.
	time.Sleep(100 * time.Millisecond)
	for _, parent := range []string{"/run", os.TempDir()} {
		dirs, _ := filepath.Glob(filepath.Join(parent, "metalambda-zygote-"+strconv.Itoa(os.Getpid())+"-*"))
		for _, dir := range dirs {
			_ = syscall.Rmdir(dir)
		}
	}
}

// TestStalledZygoteIsReplacedNotKilled: a zygote that stops answering fork
// requests is replaced, and the call that asked starts its worker with its own
// interpreter; the workers it forked before, of other functions, keep serving
// (killing it would kill them all).
func TestStalledZygoteIsReplacedNotKilled(t *testing.T) {
	rt := zygoteRuntime(t, Options{})
	fn := pyFn("stall-a", pyEchoOrWait)
	fn.Timeout = time.Minute
	a := mustCompile(t, rt, fn)
	assertEcho(t, a, "before")
	before := workerProcesses("test/stall-a")
	if len(before) != 1 {
		t.Fatalf("workers of test/stall-a: %v, want one", before)
	}
	zs := zygoteOf(t, rt, false)
	zygote, _ := zs.stats()
	p, err := os.FindProcess(zygote)
	if err != nil {
		t.Fatal(err)
	}
	if err := p.Signal(syscall.SIGSTOP); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = p.Signal(syscall.SIGCONT) })
	// a's worker stays busy through the stall and the replacement: an idle
	// worker of a stalled zygote is recycled once another zygote is current
	// (on a loaded machine, before the check below), a busy one never is, so
	// only a kill at the replacement could end it.
	busy := make(chan error, 1)
	go func() {
		_, err := a.Invoke(context.Background(), echoRequest("wait"))
		busy <- err
	}()
	waitUntil(t, func() bool { return rt.Stats().Busy == 1 }, "a's call to start")
	b := mustCompile(t, rt, pyFn("stall-b", pyEcho)) // after the fork request's allowance
	if got := workerProcesses("test/stall-a"); !slices.Equal(got, before) {
		t.Errorf("workers of test/stall-a after the stall: %v, want %v (the stalled zygote's children were killed)", got, before)
	}
	assertEcho(t, b, "while stalled")
	if err := <-busy; err != nil {
		t.Errorf("a's call through the stall: %v", err)
	}
	assertEcho(t, a, "after")
	zs.mu.Lock()
	current := zs.current
	zs.mu.Unlock()
	if current != nil && current.PID() == zygote {
		t.Errorf("the stalled zygote %d is still the one forking", zygote)
	}
	// Once a's worker is idle it is replaced by one of the new zygote, and the
	// stalled zygote, which reports no child's end, ends all the same.
	deadline := time.Now().Add(30 * time.Second)
	for _, err := os.Stat("/proc/" + strconv.Itoa(zygote)); err == nil; _, err = os.Stat("/proc/" + strconv.Itoa(zygote)) {
		if time.Now().After(deadline) {
			t.Fatalf("the stalled zygote %d lives on; workers of test/stall-a: %v", zygote, workerProcesses("test/stall-a"))
		}
		time.Sleep(100 * time.Millisecond)
	}
	assertEcho(t, a, "at last")
}

// pyEchoOrWait is pyEcho, but a parent named "wait" is answered after 40 s.
const pyEchoOrWait = `import time
` + pyEcho + `
_echo = sync
def sync(request):
    if request["parent"]["metadata"]["name"] == "wait":
        time.sleep(40)
    return _echo(request)
`

// forkedBy is the host pid of the zygote that forked function's only worker;
// 0 when it has not one worker, or that one was not forked.
func forkedBy(function string) int {
	pids := workerProcesses(function)
	if len(pids) != 1 {
		return 0
	}
	parent := func(pid int) int {
		raw, _ := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/status")
		for _, line := range strings.Split(string(raw), "\n") {
			if v, ok := strings.CutPrefix(line, "PPid:"); ok {
				n, _ := strconv.Atoi(strings.TrimSpace(v))
				return n
			}
		}
		return 0
	}
	return parent(parent(pids[0]))
}

// TestRetiredZygoteEndsUnderLoad: a function called without a pause across a
// rotation past zygoteMaxAge comes to be served by a worker of a newer zygote:
// its worker, once idle between two calls, is ended and replaced, the retired
// zygote's spares are dropped, and the retired zygote ends. No call fails. (A
// rotation past zygoteMaxForks ends no other tenant's worker:
// TestCrashingFunctionDoesNotRecycleOthersWarmWorkers.)
func TestRetiredZygoteEndsUnderLoad(t *testing.T) {
	for _, tc := range []struct {
		name  string
		forks int
		age   time.Duration
	}{
		{"age", 100, 4 * time.Second},
	} {
		t.Run(tc.name, func(t *testing.T) {
			savedForks, savedAge := zygoteMaxForks, zygoteMaxAge
			zygoteMaxForks, zygoteMaxAge = tc.forks, tc.age
			rt := zygoteRuntime(t, Options{WorkerSpares: DefaultWorkerSpares})
			fn := pyFn("busy-"+tc.name, pyEcho)
			c := mustCompile(t, rt, fn)
			zs := zygoteOf(t, rt, false)
			t.Cleanup(func() {
				zs.mu.Lock()
				zygoteMaxForks, zygoteMaxAge = savedForks, savedAge
				zs.mu.Unlock()
			})
			assertEcho(t, c, "first")
			zs.mu.Lock()
			old := zs.current
			zs.mu.Unlock()
			if old == nil || forkedBy(fn.Name) != old.PID() {
				t.Fatalf("the worker of %s was not forked by the zygote", fn.Name)
			}
			oldPID := old.PID()
			stop := make(chan struct{})
			done := make(chan struct{})
			var calls int
			var failed []error
			go func() {
				defer close(done)
				for {
					select {
					case <-stop:
						return
					default:
					}
					ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
					_, err := c.Invoke(ctx, echoRequest("busy"))
					cancel()
					if err != nil {
						failed = append(failed, err)
					}
					calls++
				}
			}()
			defer func() {
				close(stop)
				<-done
				t.Logf("%d calls", calls)
				if len(failed) > 0 {
					t.Errorf("%d of %d calls failed, the first: %v", len(failed), calls, failed[0])
				}
			}()
			deadline := time.Now().Add(30 * time.Second)
			for !isDone(old.Done()) || forkedBy(fn.Name) == oldPID || forkedBy(fn.Name) == 0 {
				if time.Now().After(deadline) {
					t.Fatalf("after 30 s the old zygote %d has ended: %v; %s's worker is forked by %d", oldPID, isDone(old.Done()), fn.Name, forkedBy(fn.Name))
				}
				time.Sleep(50 * time.Millisecond)
			}
			if _, err := os.Stat("/proc/" + strconv.Itoa(oldPID)); err == nil {
				t.Errorf("the old zygote's process %d lives on", oldPID)
			}
		})
	}
}

// TestClosingTheSandboxEndsItsZygotes checks that a gateway that stops (its
// functions closed, then its sandbox) leaves no zygote, forked worker, stage
// directory or cgroup behind, though a zygote outlives its last function by
// zygoteIdle.
func TestClosingTheSandboxEndsItsZygotes(t *testing.T) {
	opts := Options{PythonZygote: ZygoteAuto, WorkerSpares: DefaultWorkerSpares}
	sb, err := sandbox.New(sandbox.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer sb.Close()
	if err := sb.ZygoteSupported(); err != nil {
		t.Skip(err)
	}
	opts.Sandbox = sb
	rt := NewPython(opts).(*python)
	c := mustCompile(t, rt, pyFn("zclose", pyEcho))
	assertEcho(t, c, "a")
	zs := zygoteOf(t, rt, false)
	zygote, _ := zs.stats()
	worker := forkedWorker(t, "test/zclose", zygote)
	stages, _ := filepath.Glob(fmt.Sprintf("/run/metalambda-zygote-%d-*", os.Getpid()))
	if len(stages) == 0 {
		t.Fatal("no stage directory of this process under /run")
	}
	c.Close()
	if pid, _ := zs.stats(); pid != zygote {
		t.Fatalf("the zygote %d did not outlive its last function (now %d)", zygote, pid)
	}
	sb.Close()
	for _, pid := range []int{zygote, worker} {
		if parentOf(pid) != 0 {
			t.Errorf("process %d outlived the closed sandbox", pid)
		}
	}
	for _, dir := range stages {
		if _, err := os.Stat(dir); !os.IsNotExist(err) {
			t.Errorf("stage directory %s outlived the closed sandbox: %v", dir, err)
		}
	}
	// The zygote's lambda side starts no new one on a closed sandbox: a
	// function compiled after falls back to its own interpreter or fails,
	// and either way no zygote runs.
	if _, err := sb.StartZygote(zs.spec); !errors.Is(err, sandbox.ErrSandboxClosed) {
		t.Errorf("StartZygote on a closed sandbox: %v, want ErrSandboxClosed", err)
	}
}

// workersMemory is what the budget reads of s's workers and spares afresh,
// without the zygotes (and other memory) it adds to them.
func workersMemory(s *poolSet) int64 {
	var total int64
	for _, p := range s.live() {
		m, _, _ := p.memoryUse(true)
		total += m
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	for _, sp := range s.spares {
		total += sp.memory(true)
	}
	return total
}

// TestZygotesCountInTheMemoryBudget: the Python zygotes' memory, the current
// one's and a retired one's that still has a child, counts with the workers'
// in the gateway's memory budget, so that a budget derived from the gateway's
// limit also bounds them: idle workers are stopped to make room for them.
func TestZygotesCountInTheMemoryBudget(t *testing.T) {
	budget := NewMemoryBudget(1 << 40)
	rt := zygoteRuntime(t, Options{MemoryBudget: budget, PythonPoolSize: 1})
	c := mustCompile(t, rt, pyFn("zbudget", pyEcho))
	defer c.Close()
	assertEcho(t, c, "a")
	zs := zygoteOf(t, rt, false)
	workers := func() int64 { return workersMemory(rt.pools) }
	zygoteMemory := func(z *sandbox.Zygote) int64 {
		m, ok := z.Memory()
		if !ok {
			t.Skip("the zygote has no cgroup to read its memory from")
		}
		return m
	}
	zs.mu.Lock()
	first := zs.current
	zs.mu.Unlock()
	budget.enforce(true)
	w, z := workers(), zygoteMemory(first)
	if z < 1<<20 {
		t.Fatalf("the zygote holds %d bytes, want at least 1 MiB", z)
	}
	// Readings a moment apart: within a quarter of the zygote's memory.
	if used := budget.Used(); used < w+z*3/4 {
		t.Fatalf("the budget counts %d bytes; the workers hold %d and the zygote %d", used, w, z)
	}
	// A replacement: the first zygote is retired, and lives on with its
	// worker; both zygotes count.
	zs.mu.Lock()
	zs.granted = zygoteMaxForks
	zs.mu.Unlock()
	other := mustCompile(t, rt, pyFn("zbudget2", pyEcho))
	defer other.Close()
	assertEcho(t, other, "b")
	waitUntil(t, func() bool { pid, _ := zs.stats(); return pid != 0 && pid != first.PID() }, "a new zygote")
	waitUntil(t, func() bool { zs.mu.Lock(); defer zs.mu.Unlock(); _, ok := zs.retiring[first]; return ok }, "the first zygote to be retiring")
	zs.mu.Lock()
	second := zs.current
	zs.mu.Unlock()
	budget.enforce(true)
	w, z = workers(), zygoteMemory(first)+zygoteMemory(second)
	if used := budget.Used(); used < w+z*3/4 {
		t.Fatalf("the budget counts %d bytes; the workers hold %d and the two zygotes %d", used, w, z)
	}
}

// TestZygoteReplacementIsReadyBeforeItIsNeeded: the replacement of a zygote
// starts a quarter before its bound of forks and takes over once ready, so
// that forks at a steady pace never find none (each such worker would start
// its own interpreter, seven times slower).
func TestZygoteReplacementIsReadyBeforeItIsNeeded(t *testing.T) {
	saved := zygoteMaxForks
	zygoteMaxForks = 8
	defer func() { zygoteMaxForks = saved }()
	rt := zygoteRuntime(t, Options{WorkerSpares: -1})
	c := mustCompile(t, rt, pyFn("pre-0", pyEcho)) // fork 1
	defer c.Close()
	zs := zygoteOf(t, rt, false)
	first, _ := zs.stats()
	for i := 1; i < 6; i++ { // forks 2-6: the sixth starts the replacement
		defer mustCompile(t, rt, pyFn("pre-"+strconv.Itoa(i), pyEcho)).Close()
	}
	// Two forks are left to the first zygote: the replacement takes over
	// before they are used. A start may take up to zygoteStartAllowance (20 s)
	// on a loaded machine.
	for deadline := time.Now().Add(30 * time.Second); ; time.Sleep(20 * time.Millisecond) {
		if pid, _ := zs.stats(); pid != 0 && pid != first {
			break
		}
		if time.Now().After(deadline) {
			zs.mu.Lock()
			starting, failed := zs.starting, zs.failed
			zs.mu.Unlock()
			t.Fatalf("the replacement did not take over (starting %v, last failed start %v)", starting, failed)
		}
	}
	for i := 6; i < 12; i++ {
		defer mustCompile(t, rt, pyFn("pre-"+strconv.Itoa(i), pyEcho)).Close()
	}
	if misses := zs.misses.Load(); misses != 0 {
		t.Fatalf("%d forks found no zygote and started their own interpreter", misses)
	}
}

// spareProcesses are the processes of spare w: a forked one's worker and its
// init, else the process started for it (found by its arguments).
func spareProcesses(t *testing.T, w *pyWorker) []int {
	t.Helper()
	if w.fk != nil && w.fk.Worker() != 0 {
		return []int{w.fk.Worker(), w.fk.PID()}
	}
	want := []string{PythonWorkerMarker, "gateway=" + strconv.Itoa(os.Getpid()), "worker=" + w.id}
	cmdlines, _ := filepath.Glob("/proc/[0-9]*/cmdline")
	for _, path := range cmdlines {
		raw, err := os.ReadFile(path)
		if err != nil {
			continue
		}
		args := strings.Split(string(raw), "\x00")
		if filepath.Base(args[0]) != "bwrap" && containsAll(args, want) {
			pid, _ := strconv.Atoi(filepath.Base(filepath.Dir(path)))
			return []int{pid}
		}
	}
	t.Fatalf("spare %s: no forked worker and no process found", w.id)
	return nil
}

// TestSparesFollowTheZygote: when a replacement zygote takes over, the spares
// the retired one forked are replaced at once by spares of the new one, not
// at the next periodic sweep (here never): a call in between would find only
// retired spares and start its worker without one.
func TestSparesFollowTheZygote(t *testing.T) {
	defer func(d time.Duration) { sweepInterval = d }(sweepInterval)
	sweepInterval = time.Hour // no sweep but the takeover's
	rt := zygoteRuntime(t, Options{WorkerSpares: 2})
	defer mustCompile(t, rt, pyFn("follow-0", pyEcho)).Close()
	zs := zygoteOf(t, rt, false)
	rt.spares.mu.Lock()
	set := rt.spares.sets[false]
	rt.spares.mu.Unlock()
	// spares reports whether the set holds its two spares, both forked by
	// the current zygote, and which zygotes forked them.
	spares := func() (*sandbox.Zygote, []int, bool) {
		zs.mu.Lock()
		current := zs.current
		zs.mu.Unlock()
		set.mu.Lock()
		defer set.mu.Unlock()
		var from []int
		ok := current != nil && len(set.ready) == 2
		for _, w := range set.ready {
			if w.fk == nil {
				from = append(from, 0) // started with its own interpreter
				ok = false
				continue
			}
			from = append(from, w.fk.Zygote().PID())
			ok = ok && w.fk.Zygote() == current
		}
		return current, from, ok
	}
	first := waitForSpares(t, spares, "the first zygote's spares")
	// What a fork at a quarter before the zygote's bounds does: a replacement
	// starts, and takes over once ready.
	zs.mu.Lock()
	zs.startLocked(false)
	zs.mu.Unlock()
	if current := waitForSpares(t, func() (*sandbox.Zygote, []int, bool) {
		current, from, ok := spares()
		return current, from, ok && current != first
	}, "spares after the takeover"); current == first {
		t.Fatal("no replacement zygote took over")
	}
}

// waitForSpares waits up to 60 s until spares reports the set full, and returns
// the current zygote then.
func waitForSpares(t *testing.T, spares func() (*sandbox.Zygote, []int, bool), what string) *sandbox.Zygote {
	t.Helper()
	for deadline := time.Now().Add(time.Minute); ; time.Sleep(50 * time.Millisecond) {
		current, from, ok := spares()
		if ok {
			return current
		}
		if time.Now().After(deadline) {
			pid := 0
			if current != nil {
				pid = current.PID()
			}
			t.Fatalf("%s: after 60 s, forked by %v (0: none), the current zygote is %d", what, from, pid)
		}
	}
}
