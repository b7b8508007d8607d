package lambda

import (
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"io"
	"net"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/metalambda/metalambda/internal/gateway/sandbox"
)

// execProbeMarker makes this test binary, executed by a script zygote's child
// in place of a worker (TestScriptZygoteChildReachesNothing), report what it
// holds and what it may do, as JSON on its stdout.
const execProbeMarker = "metalambda-test-exec-probe"

// scriptRuntime is a sandboxed JavaScript or Jsonnet runtime whose workers a
// zygote forks (ZygoteAuto) or bubblewrap starts (ZygoteOff); the test is
// skipped where the sandbox cannot start a zygote.
func scriptRuntime(t *testing.T, name, zygote string, opts Options) *scripts {
	t.Helper()
	opts.ScriptZygote = zygote
	opts = sandboxed(t, opts)
	if zygote == ZygoteAuto {
		if err := opts.Sandbox.ZygoteSupported(); err != nil {
			t.Skip(err)
		}
		if _, err := findPython(context.Background(), cmp.Or(opts.PythonBinary, DefaultPythonBinary)); err != nil {
			t.Skip(err)
		}
	}
	if name == Jsonnet {
		return NewSandboxedJsonnet(opts).(*scripts)
	}
	return NewSandboxedJavaScript(opts).(*scripts)
}

// scriptZygoteStats are the pid and forks of rt's zygote of the network view;
// 0, 0 when it has none.
func scriptZygoteStats(rt *scripts, network bool) (pid, forks int) {
	rt.mu.Lock()
	zs := rt.zygotes[network]
	rt.mu.Unlock()
	if zs == nil {
		return 0, 0
	}
	return zs.stats()
}

// TestScriptWorkersForkedFromAZygote: with ScriptZygote auto, a JavaScript or
// Jsonnet worker is the child of an init its zygote forked, runs the worker
// executable (not the zygote's interpreter), answers, and is bounded as one
// that bubblewrap started: a user of its own, no capability at all, no
// new privileges, the seccomp filters (the zygote's and its own), namespaces
// of its own (not the test's, not the zygote's), and nothing of the host's
// files. Its init, metalambda-spawn where there is one, holds nothing: no
// capability, no descriptor, both filters, and is another user.
func TestScriptWorkersForkedFromAZygote(t *testing.T) {
	for _, tt := range []struct {
		name string
		fn   Function
	}{{JavaScript, jsFn("zjs", jsEcho)}, {Jsonnet, jsonnetFn("zjsonnet", jsonnetEcho)}} {
		t.Run(tt.name, func(t *testing.T) {
			rt := scriptRuntime(t, tt.name, ZygoteAuto, Options{PythonPoolSize: 1, WorkerSpares: -1})
			c := mustCompile(t, rt, tt.fn)
			defer c.Close()
			assertEcho(t, c, "forked")
			zygote, forks := scriptZygoteStats(rt, false)
			if zygote == 0 || forks == 0 {
				t.Fatalf("zygote pid %d, forks %d: the worker was not forked", zygote, forks)
			}
			pids := scriptWorkers(tt.fn.Name)
			if len(pids) != 1 {
				t.Fatalf("workers of %s: %v, want one", tt.fn.Name, pids)
			}
			worker := pids[0]
			init, _ := strconv.Atoi(statusField(t, worker, "PPid"))
			if parent := statusField(t, init, "PPid"); parent != strconv.Itoa(zygote) {
				t.Fatalf("the worker's init's parent is %s, want the zygote %d", parent, zygote)
			}
			exe, err := os.Readlink("/proc/" + strconv.Itoa(worker) + "/exe")
			if err != nil {
				t.Fatal(err)
			}
			if want := rt.opts.Sandbox.WorkerFor(tt.name); exe != want {
				t.Errorf("the worker runs %s, want %s", exe, want)
			}
			if comm := statusField(t, worker, "Name"); !strings.HasPrefix(filepath.Base(exe), comm) {
				t.Errorf("the worker is named %q in ps, not after %s", comm, exe)
			}
			assertBoundedWorker(t, worker, zygote)
			assertEmptyInit(t, init, worker)
		})
	}
}

// assertBoundedWorker checks what the host sees of a sandboxed script worker;
// zygote, when not 0, is the zygote that forked it.
func assertBoundedWorker(t *testing.T, pid, zygote int) {
	t.Helper()
	uid := strings.Fields(statusField(t, pid, "Uid"))
	for _, u := range uid {
		if u != uid[0] || u == strconv.Itoa(os.Geteuid()) || u == "0" {
			t.Errorf("the worker's users are %v: want one of its own, not the gateway's %d", uid, os.Geteuid())
			break
		}
	}
	none := "0000000000000000"
	assertStatus(t, pid, "the worker's", map[string]string{"CapInh": none, "CapPrm": none, "CapEff": none, "CapAmb": none, "NoNewPrivs": "1", "Seccomp": "2"})
	if v := statusField(t, pid, "Seccomp_filters"); zygote != 0 && v != "2" {
		t.Errorf("Seccomp_filters = %s, want 2: the zygote's and the worker's own", v)
	}
	for _, ns := range []string{"pid", "net", "mnt", "ipc", "uts", "cgroup"} {
		theirs, err := os.Readlink("/proc/" + strconv.Itoa(pid) + "/ns/" + ns)
		others := []string{"self"}
		if zygote != 0 {
			others = append(others, strconv.Itoa(zygote))
		}
		for _, other := range others {
			if o, _ := os.Readlink("/proc/" + other + "/ns/" + ns); err != nil || theirs == o {
				t.Errorf("the worker's %s namespace is %q (%v), that of %s: want one of its own", ns, theirs, err, other)
			}
		}
	}
	if _, err := os.Stat("/proc/" + strconv.Itoa(pid) + "/root/etc/passwd"); err == nil {
		t.Error("the worker sees /etc/passwd")
	}
}

// assertStatus checks fields of /proc/pid/status; who names the process in
// the errors.
func assertStatus(t *testing.T, pid int, who string, want map[string]string) {
	t.Helper()
	for f, w := range want {
		if v := statusField(t, pid, f); v != w {
			t.Errorf("%s %s = %s, want %s", who, f, v, w)
		}
	}
}

// assertEmptyInit checks the init of a forked script worker: metalambda-spawn
// where there is one, holding no capability and no descriptor, both filters,
// and not the worker's user (that the worker may not read it is
// TestScriptZygoteChildReachesNothing's "read init env").
func assertEmptyInit(t *testing.T, init, worker int) {
	t.Helper()
	dir := "/proc/" + strconv.Itoa(init) + "/"
	if exe, _ := os.Readlink(dir + "exe"); sandbox.SpawnAvailable() && !strings.Contains(exe, sandbox.SpawnProgram) {
		t.Errorf("the init runs %q, want %s", exe, sandbox.SpawnProgram)
	}
	none := "0000000000000000"
	assertStatus(t, init, "the init's", map[string]string{"CapInh": none, "CapPrm": none, "CapEff": none, "CapBnd": none, "CapAmb": none, "NoNewPrivs": "1", "Seccomp_filters": "2"})
	if fds, err := os.ReadDir(dir + "fd"); err != nil || len(fds) != 0 {
		t.Errorf("the init holds descriptors %v (%v), want none", fds, err)
	}
	if statusField(t, init, "Uid") == statusField(t, worker, "Uid") {
		t.Errorf("the init and the worker are the same user: %s", statusField(t, init, "Uid"))
	}
}

// TestScriptWorkerSandboxViewBothWays: a worker forked by the zygote and one
// that bubblewrap started are bounded alike (TestScriptWorkerSandboxView
// checks the default way alone).
func TestScriptWorkerSandboxViewBothWays(t *testing.T) {
	for _, zygote := range []string{ZygoteAuto, ZygoteOff} {
		t.Run(zygote, func(t *testing.T) {
			rt := scriptRuntime(t, JavaScript, zygote, Options{PythonPoolSize: 1, WorkerSpares: -1})
			c := mustCompile(t, rt, jsFn("view-"+zygote, jsEcho))
			defer c.Close()
			assertEcho(t, c, "view")
			zpid, _ := scriptZygoteStats(rt, false)
			if (zpid != 0) != (zygote == ZygoteAuto) {
				t.Fatalf("zygote %s: pid %d", zygote, zpid)
			}
			pids := scriptWorkers("test/view-" + zygote)
			if len(pids) != 1 {
				t.Fatalf("workers: %v, want one", pids)
			}
			// Forked by the zygote (the child of its init), or not at all.
			init, _ := strconv.Atoi(statusField(t, pids[0], "PPid"))
			if forked := statusField(t, init, "PPid") == strconv.Itoa(zpid); forked != (zygote == ZygoteAuto) {
				t.Fatalf("zygote %s: the worker's init's parent is %s, the zygote %d", zygote, statusField(t, init, "PPid"), zpid)
			}
			assertBoundedWorker(t, pids[0], zpid)
		})
	}
}

// TestScriptZygoteWithoutPythonFallsBack: where Options.PythonBinary does not
// run, there is no script zygote, and workers start in sandboxes of their
// own.
func TestScriptZygoteWithoutPythonFallsBack(t *testing.T) {
	opts := sandboxed(t, Options{PythonBinary: "/nonexistent/python3", WorkerSpares: -1, ScriptZygote: ZygoteAuto})
	if err := opts.Sandbox.ZygoteSupported(); err != nil {
		t.Skip(err)
	}
	rt := NewSandboxedJavaScript(opts).(*scripts)
	c := mustCompile(t, rt, jsFn("nopython", jsEcho))
	defer c.Close()
	assertEcho(t, c, "fallback")
	if pid, forks := scriptZygoteStats(rt, false); pid != 0 || forks != 0 {
		t.Errorf("a zygote (pid %d, %d forks) without its interpreter", pid, forks)
	}
	rt.mu.Lock()
	err := rt.noPy
	rt.mu.Unlock()
	if err == nil || !strings.Contains(err.Error(), "/nonexistent/python3") {
		t.Errorf("why there is no zygote: %v, want the interpreter named", err)
	}
}

// TestScriptZygoteChildReachesNothing executes this test binary, as the
// probe (execProbeMarker), where a script zygote executes a worker, both with
// metalambda-spawn (where there is one) and specialized by the zygote's
// interpreter (the path elsewhere): it runs with its own bounds, and the
// attacks a compromised worker would try from native code fail. It reports
// from inside: descriptors left open before the Go runtime opens any,
// environment, identity, capabilities, and the results of signalling and
// tracing its init, taking a user namespace, mounting, becoming root, reading
// its init's environment, writing outside /tmp and reaching the host's
// loopback.
func TestScriptZygoteChildReachesNothing(t *testing.T) {
	for _, noSpawn := range []bool{false, true} {
		t.Run(map[bool]string{false: "spawn", true: "interpreter"}[noSpawn], func(t *testing.T) {
			if !noSpawn && !sandbox.SpawnAvailable() {
				t.Skip("no metalambda-spawn for this architecture")
			}
			probeScriptZygoteChild(t, noSpawn)
		})
	}
}

func probeScriptZygoteChild(t *testing.T, noSpawn bool) {
	opts, py := execZygoteHost(t)
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			c.Close()
		}
	}()
	self, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	env := []string{"GOMAXPROCS=1", "PROBE=1"}
	spec := execZygoteSpec(py, []string{self, execProbeMarker, ln.Addr().String()}, env, false)
	spec.NoSpawn = noSpawn
	raw, stderr := runForked(t, opts.Sandbox, spec, opts.workerLimits(DefaultScriptMemoryLimit, scriptWorkerMemory(DefaultScriptMemoryLimit)))
	var out map[string]string
	if err := json.Unmarshal(raw, &out); err != nil {
		t.Fatalf("the probe wrote %q (%v); stderr: %s", raw, err, stderr)
	}
	t.Logf("probe: %v", out)
	want := map[string]string{
		"fds":           "",
		"env":           "GOMAXPROCS=1 PROBE=1 PWD=/tmp",
		"exe":           self,
		"cwd":           "/tmp",
		"pid":           "2",
		"ppid":          "1",
		"CapInh":        "0000000000000000",
		"CapPrm":        "0000000000000000",
		"CapEff":        "0000000000000000",
		"CapBnd":        "0000000000000000",
		"CapAmb":        "0000000000000000",
		"NoNewPrivs":    "1",
		"Seccomp":       "2",
		"kill 1":        "operation not permitted",
		"kill -1":       "no such process",
		"ptrace 1":      "operation not permitted",
		"unshare user":  "operation not permitted",
		"mount":         "operation not permitted",
		"setuid 0":      "operation not permitted",
		"read init env": "permission denied",
		"write /usr":    "read-only file system",
		"write /tmp":    "ok",
		"connect host":  "connection refused",
	}
	for k, v := range want {
		if out[k] != v {
			t.Errorf("%s: %q, want %q", k, out[k], v)
		}
	}
	if out["uid"] == "0" || out["uid"] == "" {
		t.Errorf("the probe runs as user %q", out["uid"])
	}
}

// execZygoteHost is a sandboxed Options and the interpreter of script
// zygotes; the test is skipped where there can be none.
func execZygoteHost(t *testing.T) (Options, pythonInstallation) {
	t.Helper()
	opts := sandboxed(t, Options{})
	if err := opts.Sandbox.ZygoteSupported(); err != nil {
		t.Skip(err)
	}
	py, err := findPython(context.Background(), DefaultPythonBinary)
	if err != nil {
		t.Skip(err)
	}
	return opts, py
}

// runForked starts a zygote of spec, forks one child bounded by l, closes its
// stdin and returns what it wrote on its stdout and stderr until it ended.
func runForked(t *testing.T, sb *sandbox.Sandbox, spec sandbox.ZygoteSpec, l sandbox.Limits) (stdout, stderr []byte) {
	t.Helper()
	z, err := sb.StartZygote(spec)
	if err != nil {
		t.Fatal(err)
	}
	defer z.Close()
	f, err := z.Fork(sb, l)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Kill()
	f.Stdin.Close()
	errc := make(chan []byte, 1)
	go func() { b, _ := io.ReadAll(f.Stderr); errc <- b }()
	if stdout, err = io.ReadAll(f.Stdout); err != nil {
		t.Fatal(err)
	}
	return stdout, <-errc
}

// serveExecProbe is the probe's main (execProbeMarker): args[0] is the
// address of a listener of the test's, on the host's loopback.
func serveExecProbe(args []string) {
	out := map[string]string{}
	// Before anything opens a descriptor of its own: every one above 2 was
	// left by whoever executed the probe.
	var fds []string
	for fd := 3; fd < 1024; fd++ {
		if _, err := unix.FcntlInt(uintptr(fd), unix.F_GETFD, 0); err == nil {
			link, _ := os.Readlink("/proc/self/fd/" + strconv.Itoa(fd))
			fds = append(fds, strconv.Itoa(fd)+"="+link)
		}
	}
	out["fds"] = strings.Join(fds, " ")
	status, _ := os.ReadFile("/proc/self/status")
	for _, line := range strings.Split(string(status), "\n") {
		k, v, _ := strings.Cut(line, ":")
		switch k {
		case "CapInh", "CapPrm", "CapEff", "CapBnd", "CapAmb", "NoNewPrivs", "Seccomp":
			out[k] = strings.TrimSpace(v)
		case "Uid":
			out["uid"] = strings.Fields(v)[0]
		}
	}
	env := os.Environ()
	slices.Sort(env)
	out["env"] = strings.Join(env, " ")
	out["exe"], _ = os.Readlink("/proc/self/exe")
	out["cwd"], _ = os.Getwd()
	out["pid"], out["ppid"] = strconv.Itoa(os.Getpid()), strconv.Itoa(os.Getppid())
	result := func(err error) string {
		if err == nil {
			return "ok"
		}
		var errno syscall.Errno
		if errors.As(err, &errno) {
			return errno.Error()
		}
		return err.Error()
	}
	out["kill 1"] = result(unix.Kill(1, unix.SIGKILL))
	out["kill -1"] = result(unix.Kill(-1, unix.SIGKILL))
	out["ptrace 1"] = result(unix.PtraceAttach(1))
	out["unshare user"] = result(unix.Unshare(unix.CLONE_NEWUSER))
	out["mount"] = result(unix.Mount("tmpfs", "/tmp", "tmpfs", 0, ""))
	var setuid error
	if _, _, e := unix.RawSyscall(unix.SYS_SETUID, 0, 0, 0); e != 0 {
		setuid = e
	}
	out["setuid 0"] = result(setuid)
	_, err := os.ReadFile("/proc/1/environ")
	out["read init env"] = result(err)
	out["write /usr"] = result(os.WriteFile("/usr/probe", nil, 0o600))
	out["write /tmp"] = result(os.WriteFile("/tmp/probe", nil, 0o600))
	conn, err := net.DialTimeout("tcp", args[0], 2*time.Second)
	if err == nil {
		conn.Close()
	}
	out["connect host"] = result(err)
	raw, _ := json.Marshal(out)
	os.Stdout.Write(raw)
	os.Exit(0)
}

// serveTestPrograms runs what this test binary was executed as, other than a
// worker or the launcher (ServeWorker); it returns otherwise.
func serveTestPrograms() {
	if len(os.Args) > 2 && os.Args[1] == execProbeMarker {
		serveExecProbe(os.Args[2:])
	}
}

// TestScriptZygoteChildKeepsNoSignalState: a program a script zygote's child
// executes starts with no signal ignored or blocked, as the Python zygote
// ignores SIGPIPE and SIGXFSZ. The Go runtime installs handlers of its own
// at start, which would hide an ignored signal: cat, which changes none,
// shows what the execution left.
func TestScriptZygoteChildKeepsNoSignalState(t *testing.T) {
	opts, py := execZygoteHost(t)
	raw, stderr := runForked(t, opts.Sandbox, execZygoteSpec(py, []string{"/usr/bin/cat", "/proc/self/status"}, nil, false), sandbox.Limits{})
	found := 0
	for _, line := range strings.Split(string(raw), "\n") {
		k, v, _ := strings.Cut(line, ":")
		if k == "SigIgn" || k == "SigBlk" {
			found++
			if v = strings.TrimSpace(v); v != "0000000000000000" {
				t.Errorf("%s = %s, want none", k, v)
			}
		}
	}
	if found != 2 {
		t.Fatalf("cat wrote %q; stderr: %s", raw, stderr)
	}
}

// BenchmarkScriptWorkerStart measures what starting a JavaScript or Jsonnet
// worker costs, one after another, until it waits for its function: forked
// by the script zygote or started by bubblewrap and the launcher, from the
// executables make build makes. machine-ms/op is the processor time the
// whole machine spent per start (/proc/stat, kernel threads included), the
// figure that bounds cold starts back to back on a busy machine.
func BenchmarkScriptWorkerStart(b *testing.B) {
	sb, err := sandbox.New(sandbox.Options{Launcher: buildCommand(b, sandbox.LauncherExecutable), Workers: buildRuntimeWorkers(b)})
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(sb.Close)
	for _, rt := range []string{JavaScript, Jsonnet} {
		for _, zygote := range []string{ZygoteAuto, ZygoteOff} {
			b.Run(rt+"/"+map[string]string{ZygoteAuto: "zygote", ZygoteOff: "bubblewrap"}[zygote], func(b *testing.B) {
				if zygote == ZygoteAuto && sb.ZygoteSupported() != nil {
					b.Skip(sb.ZygoteSupported())
				}
				opts := Options{Sandbox: sb, WorkerSpares: -1, ScriptZygote: zygote}
				s := newScripts(rt, opts)
				c := mustCompile(b, s, map[string]Function{JavaScript: jsFn("start", jsEcho), Jsonnet: jsonnetFn("start", jsonnetEcho)}[rt])
				defer c.Close()
				f := c.(*pyFunction)
				spec := f.spares.spec
				if pid, _ := scriptZygoteStats(s, false); (pid != 0) != (zygote == ZygoteAuto) {
					b.Fatalf("zygote %s: pid %d", zygote, pid)
				}
				var cpu float64
				for b.Loop() {
					before := machineBusy(b)
					w, err := spec.start(false)
					if err != nil {
						b.Fatal(err)
					}
					if err := w.load(f); err != nil {
						b.Fatal(err)
					}
					cpu += machineBusy(b) - before
					w.kill()
				}
				b.ReportMetric(cpu/float64(b.N), "machine-ms/op")
				s.mu.Lock()
				zs := s.zygotes[false]
				s.mu.Unlock()
				if zs != nil && zs.misses.Load() > 0 {
					b.Fatalf("%d starts found no zygote: they were not measured forked", zs.misses.Load())
				}
			})
		}
	}
}

// machineBusy is the processor time, in ms, the machine has spent working.
func machineBusy(b *testing.B) float64 {
	raw, err := os.ReadFile("/proc/stat")
	if err != nil {
		b.Fatal(err)
	}
	line, _, _ := strings.Cut(string(raw), "\n")
	f := strings.Fields(line) // cpu user nice system idle iowait irq softirq steal
	var busy int64
	for i, v := range f[1:min(len(f), 9)] {
		if i == 3 || i == 4 {
			continue
		}
		n, _ := strconv.ParseInt(v, 10, 64)
		busy += n
	}
	return float64(busy) * 10 // USER_HZ is 100
}

// TestScriptZygoteThatCannotExecuteIsNotUsed: a script zygote whose children
// cannot execute the program (here a file without execute permission, as a
// security module or a noexec mount would refuse it) is found out by the child
// that checks it at its start, and is not used: forks get errNoZygote, so that
// workers start in sandboxes of their own instead of failing.
func TestScriptZygoteThatCannotExecuteIsNotUsed(t *testing.T) {
	opts, py := execZygoteHost(t)
	notExecutable := filepath.Join(t.TempDir(), "worker")
	if err := os.WriteFile(notExecutable, []byte("\x7fELF"), 0o644); err != nil {
		t.Fatal(err)
	}
	zs := &zygotes{sb: opts.Sandbox, name: "test zygote", executes: true, limits: opts.workerLimits(DefaultScriptMemoryLimit, 0),
		spec: execZygoteSpec(py, []string{notExecutable, ScriptWorkerMarker}, nil, false)}
	defer zs.close()
	if _, err := zs.fork(zs.limits, true); !errors.Is(err, errNoZygote) {
		t.Fatalf("fork: %v, want errNoZygote", err)
	}
	zs.mu.Lock()
	current, broken, noSpawn := zs.current, zs.broken, zs.spec.NoSpawn
	zs.mu.Unlock()
	if current != nil || broken == nil {
		t.Fatalf("current zygote %v, broken: %v: want none, and why", current, broken)
	}
	t.Logf("broken: %v", broken)
	if sandbox.SpawnAvailable() && noSpawn {
		t.Error("the zygote fell back to its interpreter, as if metalambda-spawn had been refused, not the program")
	}
	if _, err := zs.fork(zs.limits, true); !errors.Is(err, errNoZygote) {
		t.Errorf("a second fork: %v, want errNoZygote at once", err)
	}
}

// TestScriptZygoteWhoseSpawnCannotExecuteSpecializesInPython: on a host that
// refuses to execute metalambda-spawn's memfd (here it holds no program), the
// script zygote is started again with children that specialize themselves in
// its interpreter, and they start workers: the child's failed execution
// (spawn_child) is the refusal that the gateway recognises, not a broken
// zygote.
func TestScriptZygoteWhoseSpawnCannotExecuteSpecializesInPython(t *testing.T) {
	if !sandbox.SpawnAvailable() {
		t.Skip("no metalambda-spawn on this architecture")
	}
	opts, py := execZygoteHost(t)
	defer sandbox.SetSpawnProgramForTest([]byte("\x00not a program\n"))()
	self, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	zs := &zygotes{sb: opts.Sandbox, name: "test zygote", executes: true, limits: opts.workerLimits(DefaultScriptMemoryLimit, 0),
		spec: execZygoteSpec(py, []string{self, ScriptWorkerMarker}, []string{"GOMAXPROCS=1"}, false)}
	defer zs.close()
	f, err := zs.fork(zs.limits, true)
	if err != nil {
		zs.mu.Lock()
		broken := zs.broken
		zs.mu.Unlock()
		t.Fatalf("fork: %v (broken: %v); want a child specialized in the interpreter", err, broken)
	}
	defer f.Kill()
	zs.mu.Lock()
	noSpawn, broken := zs.spec.NoSpawn, zs.broken
	zs.mu.Unlock()
	if !noSpawn || broken != nil {
		t.Errorf("NoSpawn %v, broken %v: want the zygote started again without metalambda-spawn", noSpawn, broken)
	}
	if exe, err := os.Readlink("/proc/" + strconv.Itoa(f.PID()) + "/exe"); err == nil && strings.Contains(exe, sandbox.SpawnProgram) {
		t.Errorf("the init runs %q, want the interpreter", exe)
	}
}

// TestScriptZygoteCountsInTheMemoryBudget: a script zygote's memory counts with
// the workers' in the gateway's memory budget, as a Python zygote's does
// (TestZygotesCountInTheMemoryBudget): its cgroup grows by kernel memory with
// every worker it forks, which only the budget's reading of that cgroup sees.
func TestScriptZygoteCountsInTheMemoryBudget(t *testing.T) {
	budget := NewMemoryBudget(1 << 40)
	rt := scriptRuntime(t, JavaScript, ZygoteAuto, Options{MemoryBudget: budget, PythonPoolSize: 1, WorkerSpares: -1})
	c := mustCompile(t, rt, jsFn("zsbudget", jsEcho))
	defer c.Close()
	assertEcho(t, c, "a")
	rt.mu.Lock()
	zs := rt.zygotes[false]
	rt.mu.Unlock()
	if zs == nil {
		t.Fatal("no script zygote for the network view")
	}
	zs.mu.Lock()
	z := zs.current
	zs.mu.Unlock()
	zygote, ok := z.Memory()
	if !ok {
		t.Skip("the zygote has no cgroup to read its memory from")
	}
	// A script zygote's cgroup starts small (its interpreter's pages are
	// charged where it started) and grows with its forks; with one fork it
	// holds 0.7 MiB, far more than an idle worker's readings drift apart.
	if zygote < 256<<10 {
		t.Fatalf("the zygote holds %d bytes, want at least 256 KiB", zygote)
	}
	budget.enforce(true)
	workers := workersMemory(rt.pools)
	// Readings a moment apart: within a quarter of the zygote's memory.
	if used := budget.Used(); used < workers+zygote*3/4 {
		t.Fatalf("the budget counts %d bytes; the workers hold %d and the zygote %d", used, workers, zygote)
	}
}
