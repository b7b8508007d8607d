package lambda

import (
	"encoding/json"
	"errors"
	"os"
	"os/exec"
	"runtime"
	"strconv"
	"strings"
	"testing"
	"time"
)

// reaperPSSBound bounds the PSS of a forked worker's init that runs the
// reaper; a forked interpreter costs about 1.1 MiB.
const reaperPSSBound = 300 << 10

// assertReaperInit checks that init, the init of a forked worker, runs the
// reaper (sandbox/reaper) from its memfd, holds no descriptor and no
// capability, has no_new_privs and its filters, and costs under
// reaperPSSBound. Where no reaper is committed (all but amd64) it checks that
// the init is the zygote's interpreter instead.
func assertReaperInit(t *testing.T, init int) {
	t.Helper()
	dir := "/proc/" + strconv.Itoa(init) + "/"
	// The init sets itself up beside its worker, and executes the reaper last:
	// on a loaded machine the worker may have answered a call before. What is
	// checked is the init once it has, and once the kernel has finished the
	// execution: its exe link names the new program before its command line
	// is set up (which reads "" until then).
	var exe string
	var cmdline []byte
	for deadline := time.Now().Add(10 * time.Second); ; time.Sleep(20 * time.Millisecond) {
		var err error
		if exe, err = os.Readlink(dir + "exe"); err != nil {
			t.Fatal(err)
		}
		cmdline, _ = os.ReadFile(dir + "cmdline")
		if runtime.GOARCH != "amd64" || strings.HasPrefix(exe, "/memfd:") && len(cmdline) > 0 || time.Now().After(deadline) {
			break
		}
	}
	if runtime.GOARCH != "amd64" {
		if strings.HasPrefix(exe, "/memfd:") {
			t.Errorf("the init runs %s, but no reaper is committed for %s", exe, runtime.GOARCH)
		}
		return
	}
	if !strings.HasPrefix(exe, "/memfd:metalambda-init") {
		t.Errorf("the init %d runs %s, want the reaper's memfd", init, exe)
	}
	if string(cmdline) != "metalambda-init\x002\x00" {
		t.Errorf("the init's command line is %.60q, want metalambda-init and its worker, pid 2", cmdline)
	}
	fds, err := os.ReadDir(dir + "fd")
	if err != nil {
		t.Fatal(err)
	}
	for _, fd := range fds {
		target, _ := os.Readlink(dir + "fd/" + fd.Name())
		t.Errorf("the init holds descriptor %s (%s), want none", fd.Name(), target)
	}
	for _, k := range []string{"CapInh", "CapPrm", "CapEff", "CapBnd", "CapAmb"} {
		if got := statusField(t, init, k); got != "0000000000000000" {
			t.Errorf("the init's %s = %s, want none", k, got)
		}
	}
	if nnp, mode, filters := statusField(t, init, "NoNewPrivs"), statusField(t, init, "Seccomp"), statusField(t, init, "Seccomp_filters"); nnp != "1" || mode != "2" || filters != "2" {
		t.Errorf("the init's NoNewPrivs %s, Seccomp %s, Seccomp_filters %s: want 1, 2 and 2 (the zygote's and its own)", nnp, mode, filters)
	}
	pss := pssOf(t, init)
	t.Logf("the init %d runs %s; its PSS is %d KiB", init, exe, pss>>10)
	if pss >= reaperPSSBound {
		t.Errorf("the init's PSS is %d KiB, want under %d KiB", pss>>10, reaperPSSBound>>10)
	}
}

// pssOf is the proportional set size of process pid, in bytes.
func pssOf(t *testing.T, pid int) int64 {
	t.Helper()
	raw, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/smaps_rollup")
	if err != nil {
		t.Fatal(err)
	}
	for _, line := range strings.Split(string(raw), "\n") {
		if v, ok := strings.CutPrefix(line, "Pss:"); ok {
			kb, err := strconv.ParseInt(strings.TrimSuffix(strings.TrimSpace(v), " kB"), 10, 64)
			if err != nil {
				t.Fatal(err)
			}
			return kb << 10
		}
	}
	t.Fatalf("no Pss in /proc/%d/smaps_rollup", pid)
	return 0
}

// initOf is the init of function's only worker, which its zygote forked.
func initOf(t *testing.T, rt *python, function string) int {
	t.Helper()
	zygote, _ := zygoteOf(t, rt, false).stats()
	worker := forkedWorker(t, function, zygote)
	init, _ := strconv.Atoi(statusField(t, worker, "PPid"))
	return init
}

// TestForkedWorkerInitIsTheReaper: the init of a forked worker executes the
// reaper once it has dropped everything, and holds and costs next to nothing.
func TestForkedWorkerInitIsTheReaper(t *testing.T) {
	rt := zygoteRuntime(t, Options{WorkerSpares: -1})
	c := mustCompile(t, rt, pyFn("reaper", pyEcho))
	assertEcho(t, c, "a")
	assertReaperInit(t, initOf(t, rt, "test/reaper"))
}

// TestReaperReportsTheWorkersEnd: a forked worker that exits with a code, or
// is ended by a signal, is reported as before the reaper (the init's status is
// 128+n for signal n, which forkedState reads back as the signal).
func TestReaperReportsTheWorkersEnd(t *testing.T) {
	rt := zygoteRuntime(t, Options{WorkerSpares: -1})
	for _, tt := range []struct{ name, statement, contains string }{
		{"exit", "sys.exit(3)", "exit status 3"},
		{"exit-0", "os._exit(0)", "exit status 0"},
		{"kill", "os.kill(os.getpid(), signal.SIGKILL)", "signal: killed"},
		{"abort", "os.abort()", "signal: aborted"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			fn := pyFn("end-"+tt.name, "import os, signal, sys\n"+pyEchoUnless(tt.statement))
			c := mustCompile(t, rt, fn)
			assertEcho(t, c, "first")
			assertReaperInit(t, initOf(t, rt, fn.Name))
			_, err := invoke(t, c, echoRequest("bad"))
			assertInvokeError(t, err, ReasonCrash, tt.contains)
		})
	}
}

// orphanMaker leaves, within its call, an orphan (its parent, a child of the
// worker, exits at once) that ends half a second later, and reports the
// orphan's parent once adopted and whether it was reaped within 3 s ("Z" if
// it stayed a zombie). A call that leaves processes behind has its worker
// replaced, so the orphan ends within the call.
const orphanMaker = `import os, time
def state(pid):
    with open("/proc/%d/stat" % pid) as f:
        return f.read().rsplit(")", 1)[1].split()
def sync(request):
    r, w = os.pipe()
    pid = os.fork()
    if pid == 0:
        os.close(r)
        orphan = os.fork()
        if orphan == 0:
            time.sleep(0.5)
            os._exit(0)
        os.write(w, str(orphan).encode())
        os._exit(0)
    os.close(w)
    orphan = int(os.read(r, 32))
    os.waitpid(pid, 0)
    parent = state(orphan)[1]
    end = "running"
    for _ in range(60):
        try:
            end = state(orphan)[0]
        except FileNotFoundError:
            end = "reaped"
            break
        time.sleep(0.05)
    return {"status": {"parent": parent, "end": end}}
`

// TestReaperReapsOrphans: a process a function leaves behind is adopted by the
// worker's init, which reaps it when it ends (no zombie counted against the
// worker's task limit while the worker lives).
func TestReaperReapsOrphans(t *testing.T) {
	rt := zygoteRuntime(t, Options{WorkerSpares: -1})
	c := mustCompile(t, rt, pyFn("orphans", orphanMaker))
	res, err := invoke(t, c, echoRequest("x"))
	if err != nil {
		t.Fatal(err)
	}
	var out struct{ Status struct{ Parent, End string } }
	if err := json.Unmarshal(res.Response, &out); err != nil {
		t.Fatal(err)
	}
	if out.Status.Parent != "1" || out.Status.End != "reaped" {
		t.Errorf("the orphan's parent was %s and it ended %q: want 1 (the init) and reaped", out.Status.Parent, out.Status.End)
	}
	assertReaperInit(t, initOf(t, rt, "test/orphans"))
}

// initFallbackDriver runs the zygote's exec_reaper and serve_init (the script
// comes on stdin) as a forked worker's init would, with a "reaper" that cannot
// be executed (a pipe): the init must close it and serve as serve_init,
// ending with its worker's status. Exit 99: it still held the descriptor.
const initFallbackDriver = `import os, signal, sys
ns = {"__name__": "metalambda_zygote"}
exec(compile(sys.stdin.read(), "<zygote>", "exec"), ns)
r, w = os.pipe()
pid = os.fork()
if pid == 0:
    if sys.argv[1] == "signal":
        os.kill(os.getpid(), signal.SIGTERM)
    os._exit(5)
ns["exec_reaper"]({"reaper": r}, pid)
try:
    os.fstat(r)
    os._exit(99)
except OSError:
    pass
ns["serve_init"](pid)
`

// TestInitFallsBackWhenTheReaperFails: an init that cannot execute the reaper
// stays the zygote's code and reports its worker's end all the same.
func TestInitFallsBackWhenTheReaperFails(t *testing.T) {
	python, err := exec.LookPath(DefaultPythonBinary)
	if err != nil {
		t.Skip("no python3")
	}
	for _, tt := range []struct {
		end  string
		want int
	}{{"exit", 5}, {"signal", 128 + 15}} {
		cmd := exec.Command(python, "-I", "-S", "-c", initFallbackDriver, tt.end)
		cmd.Stdin = strings.NewReader(pythonZygoteScript)
		out, err := cmd.CombinedOutput()
		var exit *exec.ExitError
		if !errors.As(err, &exit) {
			t.Fatalf("%s: %v, want an exit status (output %q)", tt.end, err, out)
		}
		if exit.ExitCode() != tt.want {
			t.Errorf("%s: exit status %d, want %d (output %q)", tt.end, exit.ExitCode(), tt.want, out)
		}
	}
}
