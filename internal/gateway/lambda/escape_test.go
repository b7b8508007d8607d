package lambda

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"golang.org/x/sys/unix"

	"github.com/metalambda/metalambda/internal/gateway/sandbox"
)

// escapePrelude is the Python every attack of TestEscapeSuite starts from: a raw
// system call through libc, and the name of the error it failed with.
const escapePrelude = `import ctypes, errno, os, socket, threading, time
libc = ctypes.CDLL(None, use_errno=True)
libc.syscall.restype = ctypes.c_long

def sysc(nr, *args):
    r = libc.syscall(ctypes.c_long(nr), *[ctypes.c_long(a) for a in args])
    if r >= 0:
        return "succeeded"
    return errno.errorcode.get(ctypes.get_errno(), str(ctypes.get_errno()))

def err(f):
    try:
        f()
        return "succeeded"
    except OSError as e:
        return errno.errorcode.get(e.errno, type(e).__name__)

WORKER = os.urandom(8).hex()
`

// attack is one named escape attempt of TestEscapeSuite, made by a function from
// inside its sandbox; every one must fail.
type attack struct {
	name     string
	blocked  string // what stops it
	body     string // the body of attack(), which returns what happened
	want     string // what it returns in a namespace sandbox
	landlock string // what it returns in a Landlock sandbox, when not want
	cgroups  bool   // the defence needs the worker's cgroup
}

func escapeAttacks() []attack {
	nr := func(n int) string { return strconv.Itoa(n) }
	gateway := nr(os.Getpid())
	refused := func(name string, call int, args ...string) attack {
		return attack{name: name, blocked: "seccomp: refused in every mode", body: "return sysc(" + strings.Join(append([]string{nr(call)}, args...), ", ") + ")", want: "EPERM"}
	}
	return []attack{
		refused("SysV shared memory", unix.SYS_SHMGET, "0", nr(64<<20), nr(unix.IPC_CREAT|0o600)),
		refused("SysV message queue", unix.SYS_MSGGET, "0", nr(unix.IPC_CREAT|0o600)),
		refused("SysV semaphores", unix.SYS_SEMGET, "0", "1", nr(unix.IPC_CREAT|0o600)),
		refused("io_uring", unix.SYS_IO_URING_SETUP, "8", "0"),
		refused("ptrace the gateway", unix.SYS_PTRACE, nr(unix.PTRACE_ATTACH), gateway, "0", "0"),
		refused("read the gateway's memory", unix.SYS_PROCESS_VM_READV, gateway, "0", "0", "0", "0", "0"),
		refused("perf_event_open", unix.SYS_PERF_EVENT_OPEN, "0", "0", "-1", "-1", "0"),
		refused("bpf", unix.SYS_BPF, nr(unix.BPF_PROG_LOAD), "0", "0"),
		refused("kernel keyring", unix.SYS_KEYCTL, nr(unix.KEYCTL_GET_KEYRING_ID), nr(-3), "0"), // the user keyring
		refused("add a key", unix.SYS_ADD_KEY, "0", "0", "0", "0", "0"),
		refused("userfaultfd", unix.SYS_USERFAULTFD, "0"),
		refused("mount", unix.SYS_MOUNT, "0", "0", "0", "0", "0"),
		refused("setns", unix.SYS_SETNS, "0", "0"),
		refused("unshare a mount namespace", unix.SYS_UNSHARE, nr(unix.CLONE_NEWNS)),
		refused("new user namespace", unix.SYS_UNSHARE, nr(unix.CLONE_NEWUSER)),
		refused("memfd fill", unix.SYS_MEMFD_CREATE, "0", "0"),
		refused("open by file handle", unix.SYS_OPEN_BY_HANDLE_AT, nr(unix.AT_FDCWD), "0", "0"),
		refused("load a kernel module", unix.SYS_FINIT_MODULE, "0", "0", "0"),
		refused("kexec", unix.SYS_KEXEC_LOAD, "0", "0", "0", "0"),
		refused("steal a descriptor", unix.SYS_PIDFD_GETFD, "0", "0", "0"),
		refused("compare kernel objects", unix.SYS_KCMP, gateway, gateway, "0", "0", "0"),
		{name: "become root", blocked: "no capabilities: the user is the command's own", body: "return sysc(" + nr(unix.SYS_SETUID) + ", 0)", want: "EPERM"},
		{name: "chroot", blocked: "no capabilities", body: "return err(lambda: os.chroot('/tmp'))", want: "EPERM", landlock: "EPERM"},
		{name: "supplementary groups", blocked: "dropped at launch", body: "return str(os.getgroups())", want: "[]"},
		{name: "raw socket", blocked: "no CAP_NET_RAW; Landlock: no socket without network", body: "return err(lambda: socket.socket(socket.AF_INET, socket.SOCK_RAW, socket.IPPROTO_ICMP))", want: "EPERM", landlock: "EACCES"},
		{name: "netlink socket", blocked: "seccomp: UNIX and IP families only", body: "return err(lambda: socket.socket(socket.AF_NETLINK, socket.SOCK_RAW, 0))", want: "EAFNOSUPPORT", landlock: "EACCES"},
		{name: "packet socket", blocked: "seccomp: UNIX and IP families only", body: "return err(lambda: socket.socket(socket.AF_PACKET, socket.SOCK_RAW, 0))", want: "EAFNOSUPPORT", landlock: "EACCES"},
		{name: "signal pid 1", blocked: "PID namespace; Landlock: signals scoped", body: "return err(lambda: os.kill(1, 9))", want: "EPERM", landlock: "EPERM"},
		{name: "memory of pid 1", blocked: "another user's process; Landlock: no /proc", body: "return err(lambda: open('/proc/1/mem', 'rb').read(1))", want: "EACCES", landlock: "EACCES"},
		{name: "write a kernel setting", blocked: "root's file, not the command's user; Landlock: no /proc", body: "return err(lambda: open('/proc/sys/kernel/core_pattern', 'w').write('|/tmp/x'))", want: "EACCES"},
		{name: "see the cgroup tree", blocked: "no /sys", body: "return err(lambda: os.listdir('/sys/fs/cgroup'))", want: "ENOENT", landlock: "EACCES"},
		{name: "/dev/shm fill", blocked: "no /dev/shm", body: "return err(lambda: open('/dev/shm/fill', 'wb').write(b'x' * (1 << 20)))", want: "ENOENT", landlock: "EACCES"},
		{name: "descriptor exhaustion", blocked: "RLIMIT_NOFILE", body: `fds = []
    try:
        while len(fds) < 100000:
            fds.append(os.open("/dev/null", os.O_RDONLY))
    except OSError as e:
        return "%s after %s" % (errno.errorcode[e.errno], "fewer than 256" if len(fds) < 256 else len(fds))
    return "opened %d" % len(fds)`, want: "EMFILE after fewer than 256"},
		{name: "thread bomb", blocked: "RLIMIT_NPROC and the cgroup's pids.max", body: `n = 0
    try:
        while n < 10000:
            threading.Thread(target=time.sleep, args=(600,), daemon=True).start()
            n += 1
    except RuntimeError:
        pass
    return "bounded" if n < 32 else "started %d" % n`, want: "bounded"},
		{name: "log flood", blocked: "logs kept to 64 KiB; stderr to its first and last KiB", body: `for _ in range(256):
        print("x" * 65536)
        os.write(2, b"y" * 65536)
    return "flooded"`, want: "flooded"},
		// In a Landlock sandbox of a gateway that is not root, workers run as the
		// gateway's user, in its PID namespace: the kernel lets a process of the
		// same user set another's limits, priority and processor affinity, which
		// Landlock does not scope. Each writes back what the gateway already has.
		{name: "set the gateway's limits", blocked: "PID namespace; Landlock: seccomp refuses prlimit64 of another process", body: `old = (ctypes.c_uint64 * 2)()
    r = sysc(` + nr(unix.SYS_PRLIMIT64) + `, ` + gateway + `, ` + nr(unix.RLIMIT_CPU) + `, 0, ctypes.addressof(old))
    if r != "succeeded":
        return r
    return sysc(` + nr(unix.SYS_PRLIMIT64) + `, ` + gateway + `, ` + nr(unix.RLIMIT_CPU) + `, ctypes.addressof(old), 0)`, want: "ESRCH", landlock: "EPERM"},
		{name: "renice the gateway", blocked: "PID namespace; Landlock: seccomp refuses setpriority of another process", body: `ctypes.set_errno(0)
    prio = libc.syscall(ctypes.c_long(` + nr(unix.SYS_GETPRIORITY) + `), ctypes.c_long(0), ctypes.c_long(` + gateway + `))
    if prio < 0:
        return errno.errorcode.get(ctypes.get_errno(), "?")
    return sysc(` + nr(unix.SYS_SETPRIORITY) + `, 0, ` + gateway + `, 20 - prio)`, want: "ESRCH", landlock: "EPERM"},
		{name: "renice every process of the user", blocked: "PID namespace; Landlock: seccomp refuses setpriority of another process", body: `return sysc(` + nr(unix.SYS_SETPRIORITY) + `, ` + nr(unix.PRIO_USER) + `, 0, 19)`, want: "succeeded", landlock: "EPERM"},
		{name: "pin the gateway to a processor", blocked: "PID namespace; Landlock: seccomp refuses sched_setaffinity of another process", body: `mask = (ctypes.c_uint64 * 16)()
    r = libc.syscall(ctypes.c_long(` + nr(unix.SYS_SCHED_GETAFFINITY) + `), ctypes.c_long(` + gateway + `), ctypes.c_long(128), ctypes.c_long(ctypes.addressof(mask)))
    if r < 0:
        return errno.errorcode.get(ctypes.get_errno(), "?")
    return sysc(` + nr(unix.SYS_SCHED_SETAFFINITY) + `, ` + gateway + `, r, ctypes.addressof(mask))`, want: "ESRCH", landlock: "EPERM"},
		{name: "set the gateway's scheduling policy", blocked: "PID namespace; Landlock: seccomp refuses sched_setscheduler of another process", body: `policy = libc.syscall(ctypes.c_long(` + nr(unix.SYS_SCHED_GETSCHEDULER) + `), ctypes.c_long(` + gateway + `))
    if policy < 0:
        return errno.errorcode.get(ctypes.get_errno(), "?")
    param = ctypes.c_int(0)
    return sysc(` + nr(unix.SYS_SCHED_SETSCHEDULER) + `, ` + gateway + `, policy, ctypes.addressof(param))`, want: "ESRCH", landlock: "EPERM"},
		{name: "set the gateway's I/O priority", blocked: "PID namespace; Landlock: seccomp refuses ioprio_set of another process", body: `prio = libc.syscall(ctypes.c_long(` + nr(unix.SYS_IOPRIO_GET) + `), ctypes.c_long(1), ctypes.c_long(` + gateway + `))
    if prio < 0:
        return errno.errorcode.get(ctypes.get_errno(), "?")
    return sysc(` + nr(unix.SYS_IOPRIO_SET) + `, 1, ` + gateway + `, prio)`, want: "ESRCH", landlock: "EPERM"},
		{name: "threads left running", blocked: "the cgroup: a worker with more threads after its answer than after loading is replaced", cgroups: true,
			body: `threading.Thread(target=lambda: [None for _ in iter(int, 1)], daemon=True).start()
    return WORKER`, want: "replaced"},
		{name: "children left running", blocked: "the cgroup: a worker with more processes after its answer than after loading is replaced", cgroups: true,
			body: `if os.fork() == 0:
        while True:
            pass
    return WORKER`, want: "replaced"},
	}
}

// TestEscapeSuite makes every attack of escapeAttacks from a function of its own,
// in a namespace sandbox and (in TestLandlockSandbox's child) in a Landlock one.
// Each must fail, and another function keeps answering throughout.
func TestEscapeSuite(t *testing.T) {
	rt := NewPython(sandboxed(t, Options{PythonPoolSize: 1, WorkerCPU: 200}))
	other := mustCompile(t, rt, pyFn("other", pyEcho))
	defer other.Close()
	cgroups := workersHaveCgroups(t)
	for _, a := range escapeAttacks() {
		t.Run(a.name, func(t *testing.T) {
			if a.cgroups && !cgroups {
				t.Skip("the sandbox gives workers no cgroup here (a gateway that is not root): not defended, see docs/security.md")
			}
			source := escapePrelude + "\ndef attack():\n    " + a.body + "\n\ndef sync(request):\n    return {\"result\": attack()}\n"
			c := mustCompile(t, rt, pyFn(strings.ReplaceAll(a.name, " ", "-"), source))
			defer c.Close()
			got := attackResult(t, c)
			if a.cgroups {
				got = replacedOrNot(t, c, got)
			}
			want := a.want
			if inLandlockChild() && a.landlock != "" {
				want = a.landlock
			}
			if got != want {
				t.Errorf("%s: got %q, want %q (blocked by: %s)", a.name, got, want, a.blocked)
			}
			assertEcho(t, other, "other")
		})
	}
}

// attackResult calls the attack's function and returns what it found.
func attackResult(t *testing.T, c Compiled) string {
	t.Helper()
	res, err := invoke(t, c, echoRequest("x"))
	if err != nil {
		t.Fatal(err)
	}
	var got struct{ Result string }
	if err := json.Unmarshal(res.Response, &got); err != nil {
		t.Fatal(err)
	}
	if len(res.Logs) > 64<<10 {
		t.Errorf("logs of %d bytes, want at most 64 KiB", len(res.Logs))
	}
	return got.Result
}

// replacedOrNot calls a function that left something running again: the worker
// that answers must be a new one.
func replacedOrNot(t *testing.T, c Compiled, first string) string {
	t.Helper()
	if second := attackResult(t, c); second == first {
		return fmt.Sprintf("the same worker %s served again", first)
	}
	return "replaced"
}

// workersHaveCgroups reports whether the runtimes' sandbox gives workers cgroups.
func workersHaveCgroups(t *testing.T) bool {
	sb, err := sandbox.New(sandbox.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer sb.Close()
	ok, _ := sb.Cgroups()
	return ok
}

// TestWorkerThatStopsReading: a function that answers its call on the reply
// descriptor itself, shrinks its request pipe and then never reads it again
// would hold the gateway's write of the next, larger request, and with it the
// call, past its timeout, while it spins. The call must end at its timeout with
// the worker killed.
func TestWorkerThatStopsReading(t *testing.T) {
	source := `import os, json, fcntl, select
def sync(request):
    fcntl.fcntl(3, 1031, 4096)  # F_SETPIPE_SZ on the request pipe
    os.write(4, json.dumps({"ok": True, "logs": "", "response": {"armed": True}}).encode() + b"\n")
    select.select([3], [], [])
    while True:
        pass
`
	fn := pyFn("stops-reading", source)
	fn.Timeout = 2 * time.Second
	c := mustCompile(t, NewPython(sandboxed(t, Options{PythonPoolSize: 1})), fn)
	defer c.Close()
	if _, err := invoke(t, c, echoRequest("arm")); err != nil {
		t.Fatal(err)
	}
	big, _ := json.Marshal(map[string]string{"name": strings.Repeat("x", 100<<10)})
	done := make(chan error, 1)
	go func() {
		_, err := c.Invoke(context.Background(), big)
		done <- err
	}()
	select {
	case err := <-done:
		var ie *InvokeError
		if !errors.As(err, &ie) || ie.Reason != ReasonTimeout {
			t.Errorf("the call = %v, want a timeout", err)
		}
	case <-time.After(30 * time.Second):
		t.Fatal("the call outlived its 2 s timeout by 28 s: the gateway is stuck writing to a worker that does not read")
	}
}

// TestWorkerThatWritesAheadServesNoOtherCall: a function that writes a reply
// frame of its own puts its worker ahead of its calls: its real reply would
// answer the next call. The gateway reads one reply per call, so that worker
// must serve no other call, whether the frame it wrote ahead was read with the
// forged one or is still in its pipe when the next call comes.
func TestWorkerThatWritesAheadServesNoOtherCall(t *testing.T) {
	rt := NewPython(sandboxed(t, Options{PythonPoolSize: 1}))
	for _, tt := range []struct {
		name  string
		write string  // what the function writes before it sleeps and answers
		sleep float64 // how long it sleeps, in seconds
		pause time.Duration
	}{
		// Two frames in one write: both in the gateway's buffer at once, and
		// the real reply comes after the next call has been sent.
		{name: "read with the forged frame", write: "forged + stale", sleep: 0.3},
		// The real reply in the pipe before the next call comes.
		{name: "in the pipe", write: "forged", sleep: 0.05, pause: 300 * time.Millisecond},
	} {
		t.Run(tt.name, func(t *testing.T) {
			source := fmt.Sprintf(`import os, json, time
def sync(request):
    name = request["parent"]["metadata"]["name"]
    forged = json.dumps({"ok": True, "logs": "", "response": {"forged": name}}).encode() + b"\n"
    stale = json.dumps({"ok": True, "logs": "", "response": {"stale": name}}).encode() + b"\n"
    os.write(4, %s)
    time.sleep(%g)
    return {"real": name}
`, tt.write, tt.sleep)
			c := mustCompile(t, rt, pyFn("ahead", source))
			defer c.Close()
			for _, name := range []string{"one", "two", "three"} {
				res, err := invoke(t, c, echoRequest(name))
				if err != nil {
					t.Fatalf("call %s: %v", name, err)
				}
				if diff := cmp.Diff(map[string]any{"forged": name}, decode(t, res.Response)); diff != "" {
					t.Errorf("call %s was answered with another's reply (-want +got):\n%s", name, diff)
				}
				time.Sleep(tt.pause)
			}
		})
	}
}

// TestForgedReplyIsBounded: a function that writes its own reply frame, with
// logs and an error message of megabytes, gets them cut to the bounds the
// worker would have kept, so that neither a caller nor the history holds them.
func TestForgedReplyIsBounded(t *testing.T) {
	rt := NewPython(sandboxed(t, Options{PythonPoolSize: 1}))
	for name, frame := range map[string]string{
		"logs":  `{"ok": True, "logs": "L" * (4 << 20), "response": {}}`,
		"error": `{"ok": False, "error": {"type": "E", "message": "m" * (4 << 20), "traceback": "t" * (4 << 20)}, "logs": ""}`,
	} {
		t.Run(name, func(t *testing.T) {
			source := "import os, json\ndef sync(request):\n    os.write(4, json.dumps(" + frame + ").encode() + b\"\\n\")\n    os._exit(0)\n"
			c := mustCompile(t, rt, pyFn("forged-"+name, source))
			defer c.Close()
			res, err := invoke(t, c, echoRequest("x"))
			if len(res.Logs) > MaxLogBytes+len(truncatedMark) {
				t.Errorf("logs of %d bytes, want at most %d", len(res.Logs), MaxLogBytes)
			}
			if err != nil && len(err.Error()) > 3*MaxErrorBytes {
				t.Errorf("an error of %d bytes, want about %d at most", len(err.Error()), 2*MaxErrorBytes)
			}
		})
	}
}

// TestCrashAfterAStderrFloodKeepsItsLastWords: a worker that fills its stderr
// pipe, made as large as it may, and then writes why it ends and exits, gets
// those last words in its crash error: the paced drain reads what is left in
// the pipe within reap's second.
func TestCrashAfterAStderrFloodKeepsItsLastWords(t *testing.T) {
	rt := NewPython(sandboxed(t, Options{PythonPoolSize: 1}))
	c := mustCompile(t, rt, pyFn("flood-crash", `import os, fcntl
def sync(request):
    try:
        fcntl.fcntl(2, 1031, 1 << 20)  # F_SETPIPE_SZ
    except Exception:
        pass
    os.set_blocking(2, False)
    try:
        while True:
            os.write(2, b"x" * 65536)
    except BlockingIOError:
        pass
    os.set_blocking(2, True)
    os.write(2, b"\nthe last words\n")
    os._exit(3)
`))
	_, err := invoke(t, c, echoRequest("crash"))
	if err == nil || !strings.Contains(err.Error(), "the last words") {
		t.Errorf("the crash: %v, want the last words written on stderr", err)
	}
}
