package sandbox

import (
	"bufio"
	"bytes"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"
)

// python is the system interpreter, readable by the sandbox's user.
const python = "/usr/bin/python3"

func newSandbox(t *testing.T) *Sandbox {
	t.Helper()
	s, err := New(Options{})
	if err != nil {
		t.Fatalf("the sandbox tests need bubblewrap: %v", err)
	}
	t.Cleanup(s.Close)
	return s
}

// modes are the sandboxes of a root caller and, when the tests run as root, of an
// unprivileged one (bwrap started as nobody builds a user namespace).
func modes(t *testing.T) map[string]func(Spec) *Command {
	s := newSandbox(t)
	m := map[string]func(Spec) *Command{}
	if !s.privileged {
		m["unprivileged"] = mustCommand(t, s)
		return m
	}
	m["privileged"] = mustCommand(t, s)
	l := landlockSandbox(t)
	// A gateway that is not root makes no cgroups.
	u := &Sandbox{mode: ModeNamespaces, bwrap: s.bwrap, launcher: l.launcher, uid: s.uid, gid: s.gid, filters: s.filters}
	m["unprivileged"] = asNobody(mustCommand(t, u))
	m["landlock-root"] = mustCommand(t, l)
	ul := *l
	ul.privileged = false
	ul.workersDir = ""
	ul.cgroups = nil
	m["landlock"] = asNobody(mustCommand(t, &ul))
	return m
}

// gatewayUser is the user this package's tests start commands as to stand for a
// gateway that is not root. It is no other package's: RLIMIT_NPROC counts every
// task of a user on the host, so a fork bomb's room would move with the tasks
// that another package's tests (the runtimes' Landlock child, as nobody) start
// and end meanwhile.
const gatewayUser = 65531

// asNobody starts the commands of command as gatewayUser, as a gateway running
// as a user of its own that is not root would.
func asNobody(command func(Spec) *Command) func(Spec) *Command {
	return func(spec Spec) *Command {
		cmd := command(spec)
		cmd.SysProcAttr.Credential = &syscall.Credential{Uid: gatewayUser, Gid: gatewayUser, Groups: []uint32{}}
		return cmd
	}
}

// landlockSandbox is a Landlock sandbox of a root caller whose launcher is a copy
// of the test binary that every user can run, and whose commands' directories
// are made in a directory every user can write in, as /tmp (the test's own
// temporary directory may not be).
func landlockSandbox(t *testing.T) *Sandbox {
	dir, err := os.MkdirTemp("/tmp", "metalambda-sandbox-test-")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		// Removed once their command has exited, as soon as the sandbox sees it.
		deadline := time.Now().Add(10 * time.Second)
		left := leftDirs(dir)
		for ; len(left) > 0 && time.Now().Before(deadline); left = leftDirs(dir) {
			time.Sleep(10 * time.Millisecond)
		}
		if len(left) > 0 {
			t.Errorf("directories of commands left behind: %v", left)
		}
		_ = os.RemoveAll(dir)
	})
	// Like /tmp: the launcher of a command that runs as the user standing for a
	// gateway that is not root makes its directory here.
	if err := os.Chmod(dir, 0o777|os.ModeSticky); err != nil {
		t.Fatal(err)
	}
	exe, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	data, err := os.ReadFile(exe)
	if err != nil {
		t.Fatal(err)
	}
	launcher := filepath.Join(dir, "launcher")
	if err := os.WriteFile(launcher, data, 0o755); err != nil {
		t.Fatal(err)
	}
	t.Setenv("TMPDIR", dir)
	s, err := New(Options{Mode: ModeLandlock, Launcher: launcher})
	if err != nil {
		t.Fatalf("the sandbox tests need Landlock (ABI %d): %v", MinLandlockABI, err)
	}
	t.Cleanup(s.Close)
	return s
}

// isLandlock tells the modes of Landlock sandboxes.
func isLandlock(mode string) bool {
	return strings.HasPrefix(mode, "landlock")
}

func mustCommand(t *testing.T, s *Sandbox) func(Spec) *Command {
	return func(spec Spec) *Command {
		cmd, err := s.Command(spec)
		if err != nil {
			t.Fatal(err)
		}
		return cmd
	}
}

// run runs a Python program in a sandbox (spec.Args when program is empty) and
// returns its output.
func run(t *testing.T, command func(Spec) *Command, spec Spec, program string) string {
	t.Helper()
	if program != "" {
		spec.Args = []string{python, "-I", "-c", program}
	}
	cmd := command(spec)
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	if err := cmd.Wait(); err != nil {
		t.Fatalf("%v: %s%s", err, stdout.String(), stderr.String())
	}
	return strings.TrimSpace(stdout.String())
}

func TestParseMode(t *testing.T) {
	for _, name := range []string{"auto", "namespaces", "landlock"} {
		if m, err := ParseMode(name); err != nil || string(m) != name {
			t.Errorf("ParseMode(%q) = %q, %v", name, m, err)
		}
	}
	if _, err := ParseMode("gvisor"); err == nil || !strings.Contains(err.Error(), `unknown sandbox mode "gvisor": want auto, namespaces or landlock`) {
		t.Errorf("ParseMode(gvisor) = %v, want an error naming the modes", err)
	}
}

func TestNewNamesWhatIsMissing(t *testing.T) {
	tests := []struct {
		opts Options
		want string
	}{
		{Options{Mode: ModeNamespaces, Bwrap: "no-such-bwrap"}, "bubblewrap (no-such-bwrap) not found"},
		{Options{Mode: ModeNamespaces, Launcher: "/no/such/launcher"}, "finding the executable that launches sandboxed commands: lstat /no"},
		{Options{Mode: "chroot"}, `unknown sandbox mode "chroot"`},
		{Options{Mode: ModeLandlock, Launcher: "/no/such/launcher"}, "finding the executable that launches sandboxed commands: lstat /no"},
	}
	for _, tt := range tests {
		_, err := New(tt.opts)
		if err == nil || !strings.Contains(err.Error(), tt.want) {
			t.Errorf("New(%+v) = %v, want an error containing %q", tt.opts, err, tt.want)
		}
	}
}

func TestFileSystemView(t *testing.T) {
	for name, command := range modes(t) {
		t.Run(name, func(t *testing.T) { testFileSystemView(t, command, name) })
	}
}

func testFileSystemView(t *testing.T, command func(Spec) *Command, mode string) {
	secret := filepath.Join(t.TempDir(), "secret")
	if err := os.WriteFile(secret, []byte("x"), 0o644); err != nil {
		t.Fatal(err)
	}
	program := `import ctypes, os, tempfile
def attempt(f):
    try:
        return f()
    except OSError as e:
        return type(e).__name__
def can_read(p):
    try:
        open(p).read(1)
        return "read"
    except OSError as e:
        return type(e).__name__
def can_write(p):
    try:
        open(p, "w").write("x")
        return "wrote"
    except OSError as e:
        return type(e).__name__
libc = ctypes.CDLL(None, use_errno=True)
header, caps = (ctypes.c_uint32 * 2)(0x20080522, 0), (ctypes.c_uint32 * 6)()
libc.capget(header, caps)
print(os.getuid(), os.getgid())
print(attempt(lambda: sorted(os.listdir("/"))))
print(can_read("/etc/shadow"), can_read("/root/.bashrc"), can_read(` + strconv.Quote(secret) + `))
print(can_write("/usr/x"), can_write("/x"), can_write("/tmp/x"), can_write(os.path.join(tempfile.gettempdir(), "x")))
print([fd for fd in range(64) if attempt(lambda: os.fstat(fd)) != "OSError"])
print(list(caps), libc.prctl(39, 0, 0, 0, 0))
print(attempt(lambda: [l.split()[1] for l in open("/proc/self/status") if l.startswith(("CapEff", "CapBnd"))]))
`
	got := strings.Split(run(t, command, Spec{}, program), "\n")
	user := "65534 65534" // DefaultUID in the user namespace
	if mode == "landlock" {
		user = fmt.Sprintf("%d %d", gatewayUser, gatewayUser)
	}
	if mode == "privileged" || mode == "landlock-root" {
		uid, _ := strconv.Atoi(strings.Fields(got[0])[0])
		if uid < DefaultUIDBase {
			t.Errorf("uid %d, want one from %d", uid, DefaultUIDBase)
		}
		user = strconv.Itoa(uid) + " " + strconv.Itoa(uid)
	}
	want := []string{
		user,
		"['bin', 'dev', 'lib', 'lib64', 'proc', 'run', 'sbin', 'tmp', 'usr']", // run holds the launcher alone
		"FileNotFoundError FileNotFoundError FileNotFoundError",
		"OSError OSError wrote wrote",
		"[0, 1, 2]",
		"[0, 0, 0, 0, 0, 0] 1",
		"['0000000000000000', '0000000000000000']",
	}
	if isLandlock(mode) { // paths exist but cannot be opened; /proc neither
		want[1] = "PermissionError"
		want[2] = "PermissionError PermissionError PermissionError"
		want[3] = "PermissionError PermissionError PermissionError wrote"
		want[6] = "PermissionError"
	}
	if len(got) != len(want) {
		t.Fatalf("output %q, want %d lines", got, len(want))
	}
	for i := range want {
		if got[i] != want[i] {
			t.Errorf("line %d = %q, want %q", i, got[i], want[i])
		}
	}
}

func TestLimits(t *testing.T) {
	for name, command := range modes(t) {
		t.Run(name, func(t *testing.T) { testLimits(t, command, name == "landlock") })
	}
}

// In a Landlock sandbox of a caller that is not root, the process limit counts
// beyond the tasks its user already runs.
func testLimits(t *testing.T, command func(Spec) *Command, sharedUser bool) {
	program := `import resource
for r in (resource.RLIMIT_AS, resource.RLIMIT_NPROC, resource.RLIMIT_NOFILE, resource.RLIMIT_FSIZE, resource.RLIMIT_CORE):
    print(resource.getrlimit(r))
try:
    resource.setrlimit(resource.RLIMIT_NPROC, (1000, 1000))
    print("raised")
except ValueError as e:
    print("cannot raise")
`
	got := run(t, command, Spec{Limits: Limits{AddressSpace: 512 << 20, Processes: 7, OpenFiles: 64, FileSize: 1 << 20}}, program)
	if lines := strings.Split(got, "\n"); sharedUser && len(lines) > 1 {
		var soft, hard int
		if _, err := fmt.Sscanf(lines[1], "(%d, %d)", &soft, &hard); err != nil || soft < 7 || soft != hard {
			t.Errorf("process limit %s, want 7 or more, soft and hard alike", lines[1])
		}
		lines[1] = "(7, 7)"
		got = strings.Join(lines, "\n")
	}
	want := "(536870912, 536870912)\n(7, 7)\n(64, 64)\n(1048576, 1048576)\n(1, 1)\ncannot raise"
	if got != want {
		t.Errorf("limits:\n%s\nwant\n%s", got, want)
	}
}

func TestForkBombEndsAtTheProcessLimit(t *testing.T) {
	for name, command := range modes(t) {
		t.Run(name, func(t *testing.T) { testForkBombEndsAtTheProcessLimit(t, command) })
	}
}

func testForkBombEndsAtTheProcessLimit(t *testing.T, command func(Spec) *Command) {
	settleGatewayUser(t)
	// Without a PID namespace, children outlive the command unless killed.
	program := `import os, time
children = []
while len(children) < 1000:
    try:
        pid = os.fork()
    except OSError:
        break
    if pid == 0:
        time.sleep(60)
        os._exit(0)
    children.append(pid)
print(len(children))
for pid in children:
    os.kill(pid, 9)
`
	got := run(t, command, Spec{Limits: Limits{Processes: 10}}, program)
	n, err := strconv.Atoi(got)
	if err != nil || n >= 10 {
		t.Errorf("forked %q children, want fewer than the limit of 10", got)
	}
}

func TestNoNetwork(t *testing.T) {
	for name, command := range modes(t) {
		// Loopback only, and no netlink socket to list interfaces with.
		want := "ConnectionRefusedError\nEAFNOSUPPORT"
		if isLandlock(name) { // no socket at all
			want = "PermissionError\nEACCES"
		}
		t.Run(name, func(t *testing.T) { testNoNetwork(t, command, want) })
	}
}

func testNoNetwork(t *testing.T, command func(Spec) *Command, want string) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	port := l.Addr().(*net.TCPAddr).Port
	program := `import errno, socket
try:
    socket.create_connection(("127.0.0.1", ` + strconv.Itoa(port) + `), timeout=2)
    print("connected")
except OSError as e:
    print(type(e).__name__)
try:
    print(sorted(n for _, n in socket.if_nameindex()))
except OSError as e:
    print(errno.errorcode.get(e.errno, e.errno))
`
	if got := run(t, command, Spec{}, program); got != want {
		t.Errorf("got %q, want %q", got, want)
	}
}

// TestDescendantsDieWithTheCommand kills a sandbox whose child started a
// grandchild in a new session; the grandchild must die too.
func TestDescendantsDieWithTheCommand(t *testing.T) {
	for name, command := range modes(t) {
		t.Run(name, func(t *testing.T) {
			testDescendantsDieWithTheCommand(t, command, "sandbox-grandchild-"+name+strconv.Itoa(os.Getpid()))
		})
	}
}

func testDescendantsDieWithTheCommand(t *testing.T, command func(Spec) *Command, marker string) {
	program := `import os, sys, time
if os.fork() == 0:
    try:
        os.setsid()  # refused in a Landlock sandbox
    except OSError:
        pass
    if os.fork() == 0:
        os.execv("/usr/bin/sleep", [` + strconv.Quote(marker) + `, "600"])
    os._exit(0)
print("started", flush=True)
time.sleep(600)
`
	cmd := command(Spec{Args: []string{python, "-I", "-c", program}})
	out, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	buf := make([]byte, 8)
	if _, err := out.Read(buf); err != nil {
		t.Fatalf("reading the first line: %v", err)
	}
	waitFor(t, func() bool { return len(pidsWith(marker)) == 1 }, "the grandchild to start")
	if err := syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	_ = cmd.Wait()
	waitFor(t, func() bool { return len(pidsWith(marker)) == 0 }, "the grandchild to die")
}

func waitFor(t *testing.T, cond func() bool, what string) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// pidsWith returns the processes whose argv[0] is arg.
func pidsWith(arg string) []string {
	paths, _ := filepath.Glob("/proc/[0-9]*/cmdline")
	var pids []string
	for _, p := range paths {
		raw, err := os.ReadFile(p)
		if err == nil && bytes.HasPrefix(raw, []byte(arg+"\x00")) {
			pids = append(pids, filepath.Base(filepath.Dir(p)))
		}
	}
	return pids
}

// Two sandboxes of one process never hand out a user that one holds, and the
// next user is not the one after the last: a command cannot tell which user
// the next one runs as.
func TestUsersAreNotShared(t *testing.T) {
	a, b := &Sandbox{uidBase: DefaultUIDBase}, &Sandbox{uidBase: DefaultUIDBase}
	seen := map[int]bool{}
	last, next := 0, 0
	for range 100 {
		for _, s := range []*Sandbox{a, b} {
			uid, err := s.takeUID()
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { releaseUID(uid) })
			if seen[uid] || uid < DefaultUIDBase || uid >= DefaultUIDBase+uidSpan {
				t.Fatalf("uid %d handed out twice or outside [%d, %d)", uid, DefaultUIDBase, DefaultUIDBase+uidSpan)
			}
			seen[uid] = true
			if uid == last+1 {
				next++
			}
			last = uid
		}
	}
	if next > 2 {
		t.Errorf("%d users of 200 were the one after the last: the next is predictable", next)
	}
}

func TestNoUserNamespaces(t *testing.T) {
	for name, command := range modes(t) {
		t.Run(name, func(t *testing.T) {
			program := `import ctypes, os, threading
libc = ctypes.CDLL(None, use_errno=True)
print(libc.unshare(0x10000000), os.strerror(ctypes.get_errno()))
t = threading.Thread(target=lambda: None)
t.start()
t.join()
print("threads work")
`
			got := run(t, command, Spec{}, program)
			if !strings.HasPrefix(got, "-1 ") || !strings.HasSuffix(got, "\nthreads work") {
				t.Errorf("unshare(CLONE_NEWUSER) and a thread: %q, want -1 and a working thread", got)
			}
		})
	}
}

// TestLandlockRefusals: even with the network, a Landlock command cannot connect
// to an abstract UNIX socket of a process outside its sandbox, which no file
// permission guards; and it cannot leave its process group.
func TestLandlockRefusals(t *testing.T) {
	name := "metalambda-sandbox-test-" + strconv.Itoa(os.Getpid())
	l, err := net.Listen("unix", "@"+name)
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	// With network, a Landlock command makes no UNIX socket either
	// (TestNetworkReachesNoHostUNIXSocket); were it to, Landlock's scope would
	// refuse the connection to an abstract socket outside it (EPERM).
	program := `import socket
try:
    s = socket.socket(socket.AF_UNIX)
    s.connect("\0` + name + `")
    print("connected")
except OSError as e:
    print(type(e).__name__)
import os
for leave in (os.setsid, lambda: os.setpgid(0, 0)):
    try:
        leave()
        print("left")
    except OSError as e:
        print(type(e).__name__)
`
	for mode, command := range modes(t) {
		if !isLandlock(mode) {
			continue
		}
		t.Run(mode, func(t *testing.T) {
			if got, want := run(t, command, Spec{Network: true}, program), "OSError\nPermissionError\nPermissionError"; got != want {
				t.Errorf("abstract socket, setsid, setpgid: %q, want %q", got, want)
			}
		})
	}
}

// TestEnvironmentReachesOnlyTheCommand: a command's environment that names a
// library for the dynamic loader must not steer any process that builds the
// sandbox (bubblewrap, the launcher), which run with the caller's rights before
// any bound exists. The library records every process that loads it in a file
// only the host can reach; the command itself may load it, inside its sandbox,
// where that file is out of its sight.
func TestEnvironmentReachesOnlyTheCommand(t *testing.T) {
	gcc, err := exec.LookPath("gcc")
	if err != nil {
		t.Skip("needs gcc to build the library")
	}
	libDir, err := os.MkdirTemp("/tmp", "metalambda-preload-")
	if err != nil {
		t.Fatal(err)
	}
	defer os.RemoveAll(libDir)
	if err := os.Chmod(libDir, 0o755); err != nil {
		t.Fatal(err)
	}
	hostOnly := t.TempDir()
	marker := filepath.Join(hostOnly, "loaded")
	src := filepath.Join(libDir, "evil.c")
	code := `#include <stdio.h>
#include <unistd.h>
__attribute__((constructor)) static void evil(void) {
	FILE *f = fopen(` + strconv.Quote(marker) + `, "a");
	if (f) { fprintf(f, "uid %d pid %d\n", (int)getuid(), (int)getpid()); fclose(f); }
}
`
	if err := os.WriteFile(src, []byte(code), 0o644); err != nil {
		t.Fatal(err)
	}
	lib := filepath.Join(libDir, "evil.so")
	if out, err := exec.Command(gcc, "-shared", "-fPIC", "-o", lib, src).CombinedOutput(); err != nil {
		t.Fatalf("building the library: %v: %s", err, out)
	}
	if err := os.Chmod(lib, 0o755); err != nil {
		t.Fatal(err)
	}
	for name, command := range modes(t) {
		t.Run(name, func(t *testing.T) {
			spec := Spec{Env: []string{"LD_PRELOAD=" + lib, "LD_LIBRARY_PATH=" + libDir}, ReadOnly: []string{libDir}}
			got := run(t, command, spec, `import os; print(os.environ.get("LD_PRELOAD", "unset"))`)
			if got != lib {
				t.Errorf("the command's LD_PRELOAD = %q, want %q: the command gets its environment", got, lib)
			}
			if raw, err := os.ReadFile(marker); err == nil {
				t.Errorf("a process outside the sandbox loaded the command's library: %s", raw)
			}
		})
	}
}

// TestCgroupBoundsMemoryAndCPU: where the sandbox gives commands cgroups, memory
// the address-space limit does not see (here none is set) is bounded as a whole,
// processor time is held to the command's share, and Usage reports both.
func TestCgroupBoundsMemoryAndCPU(t *testing.T) {
	s := newSandbox(t)
	if ok, why := s.Cgroups(); !ok {
		t.Skipf("no cgroups here: %v", why)
	}
	for name, sb := range map[string]*Sandbox{"namespaces": s, "landlock": landlockSandbox(t)} {
		t.Run(name, func(t *testing.T) {
			cmd, err := sb.Command(Spec{Args: []string{python, "-I", "-c", "b = bytearray(256 << 20); print('allocated')"}, Limits: Limits{AddressSpace: -1, Memory: 64 << 20}})
			if err != nil {
				t.Fatal(err)
			}
			out, err := output(cmd)
			if err == nil || strings.Contains(out, "allocated") {
				t.Errorf("allocating 256 MiB under a 64 MiB bound: %v, %q; want the command killed", err, out)
			}

			spin := `import os, threading, time
def spin():
    end = time.monotonic() + 2
    while time.monotonic() < end:
        pass
ts = [threading.Thread(target=spin) for _ in range(2)]
[t.start() for t in ts]
[t.join() for t in ts]
print(sum(os.times()[:2]))`
			cmd, err = sb.Command(Spec{Args: []string{python, "-I", "-c", spin}, Limits: Limits{CPU: 100}})
			if err != nil {
				t.Fatal(err)
			}
			out, err = output(cmd)
			if err != nil {
				t.Fatalf("%v: %s", err, out)
			}
			// Two threads spinning for 2 s of wall clock at a tenth of a core get
			// about 0.2 s; without the bound they would get up to 4.
			if cpu, err := strconv.ParseFloat(strings.TrimSpace(out), 64); err != nil || cpu > 1 {
				t.Errorf("processor time %q s at a tenth of a core for 2 s, want well under 1", out)
			}
		})
	}
}

// TestSecurityDocNamesEveryRefusedCall: docs/security.md lists the system calls
// every sandbox refuses; it must name each one the filter refuses.
func TestSecurityDocNamesEveryRefusedCall(t *testing.T) {
	raw, err := os.ReadFile("../../../docs/security.md")
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range RefusedCalls() {
		if !strings.Contains(string(raw), "`"+c.Name+"`") {
			t.Errorf("docs/security.md does not name %s (%s)", c.Name, c.Reason)
		}
	}
}

// leftDirs are the commands' directories left in dir, the sandbox's TMPDIR:
// those of a caller that is not root, and those of a root caller's
// workersDirName.
func leftDirs(dir string) []string {
	left, _ := filepath.Glob(filepath.Join(dir, workerDirPrefix+"*"))
	own, _ := filepath.Glob(filepath.Join(dir, workersDirName, workerDirPrefix+"*"))
	return append(left, own...)
}

// settleGatewayUser waits until no task of gatewayUser is left, zombies included:
// a previous test's commands and the children they forked (killed, but reaped a
// moment later) count against RLIMIT_NPROC as long as they exist, and a Landlock
// command of a caller that is not root counts its room beyond the tasks its user
// runs when it starts, so a fork bomb started while they go would find more room.
func settleGatewayUser(t *testing.T) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for {
		n := tasksOf(gatewayUser)
		if n == 0 {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("%d tasks of user %d are still there after 10 s", n, gatewayUser)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// tasksOf counts the tasks (threads) on the host whose real user is uid.
func tasksOf(uid int) int {
	procs, _ := os.ReadDir("/proc")
	n := 0
	for _, p := range procs {
		if _, err := strconv.Atoi(p.Name()); err != nil {
			continue
		}
		status, err := os.ReadFile("/proc/" + p.Name() + "/status")
		if err != nil {
			continue
		}
		for line := range strings.SplitSeq(string(status), "\n") {
			if fields := strings.Fields(line); len(fields) > 1 && fields[0] == "Uid:" {
				if fields[1] == strconv.Itoa(uid) {
					tasks, _ := os.ReadDir("/proc/" + p.Name() + "/task")
					n += max(len(tasks), 1)
				}
				break
			}
		}
	}
	return n
}

// TestBackgroundCommandYieldsTheProcessor: a command started in the background
// (Limits.Background) gets a small share of a processor it competes for with
// a command at the usual weight, and an equal share once Foreground is called.
// Both spin on the same processor (the first they may run on), each at most
// one core (DefaultCPU).
func TestBackgroundCommandYieldsTheProcessor(t *testing.T) {
	s := newSandbox(t)
	if ok, why := s.Cgroups(); !ok {
		t.Skipf("no cgroups here: %v", why)
	}
	spin := "import os\nos.sched_setaffinity(0, {min(os.sched_getaffinity(0))})\nprint('spinning', flush=True)\nwhile True: pass"
	start := func(background bool) *Command {
		cmd, err := s.Command(Spec{Args: []string{python, "-I", "-c", spin}, Limits: Limits{Background: background}})
		if err != nil {
			t.Fatal(err)
		}
		out, err := cmd.StdoutPipe()
		if err != nil {
			t.Fatal(err)
		}
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { cmd.Kill(); _ = cmd.Wait() })
		line, err := bufio.NewReader(out).ReadString('\n')
		if err != nil || line != "spinning\n" {
			t.Fatalf("the spinner wrote %q: %v", line, err)
		}
		return cmd
	}
	cpu := func(c *Command) time.Duration {
		u, ok := c.Usage()
		if !ok {
			t.Fatal("no usage read from the command's cgroup")
		}
		return u.CPU
	}
	// share is what bg got of the processor time both got over 1.5 s. The
	// weights divide what the two get between them, however busy the
	// processor is with other work; too little to tell skips the test.
	share := func(fg, bg *Command) float64 {
		f0, b0 := cpu(fg), cpu(bg)
		time.Sleep(1500 * time.Millisecond)
		f, b := cpu(fg)-f0, cpu(bg)-b0
		if f+b < 150*time.Millisecond {
			t.Skipf("the spinners got %s and %s of 1.5 s: the processor is too busy to tell", f, b)
		}
		return float64(b) / float64(f+b)
	}
	fg, bg := start(false), start(true)
	// At an eighth of the weight, about 1/9 of the processor.
	if got := share(fg, bg); got > 0.3 {
		t.Errorf("the background command got %.2f of the processor, want about 0.11", got)
	}
	if err := bg.Foreground(); err != nil {
		t.Fatal(err)
	}
	if got := share(fg, bg); got < 0.35 {
		t.Errorf("once in the foreground, the command got %.2f of the processor, want about 0.5", got)
	}
	if err := fg.Foreground(); err != nil { // never in the background: nothing to do
		t.Errorf("Foreground of a command at the usual weight: %v", err)
	}
}
