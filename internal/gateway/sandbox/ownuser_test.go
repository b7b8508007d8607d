package sandbox

import (
	"bufio"
	"context"
	"io"
	"os"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"
)

// cappedRootEnv marks the test binary started again as a gateway in a
// container: root with only rootCapabilities, no_new_privs, and the seccomp
// filter of a container runtime's RuntimeDefault profile.
const cappedRootEnv = "METALAMBDA_SANDBOX_TEST_CAPPED_ROOT"

// TestLandlockAsCappedRoot runs the tests of a Landlock sandbox whose caller is
// root with CAP_SETUID, CAP_SETGID and CAP_KILL alone, as the chart's gateway
// container runs: the test binary is started again so, and runs them there.
func TestLandlockAsCappedRoot(t *testing.T) {
	if os.Getenv(cappedRootEnv) != "" {
		t.Skip("this is the capped caller")
	}
	if os.Geteuid() != 0 {
		t.Skip("needs root, to start a caller that is root with a few capabilities")
	}
	out, err := runCappedRoot(t, "^TestCappedRoot")
	if err != nil {
		t.Fatalf("the tests as capped root: %v\n%s", err, out)
	}
	if !strings.Contains(out, "--- PASS: TestCappedRootOwnUsers") {
		t.Fatalf("the capped caller ran no test:\n%s", out)
	}
	t.Logf("as capped root:\n%s", out)
}

// runCappedRoot starts the test binary as root with rootCapabilities alone and
// runs the tests that match pattern there.
func runCappedRoot(t *testing.T, pattern string) (string, error) {
	exe, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	filter, err := runtimeDefaultFilter()
	if err != nil || filter == nil {
		t.Skipf("no RuntimeDefault filter for this architecture: %v", err)
	}
	caps, err := capabilityNumbers(rootCapabilities)
	if err != nil {
		t.Fatal(err)
	}
	args := []string{exe, "-test.run=" + pattern, "-test.v", "-test.count=1"}
	env := append(os.Environ(), cappedRootEnv+"=1")
	l := launch{Args: args, Env: env, SetUser: true, Capabilities: caps, Filter: filter}
	cmd, err := launcherCommand(context.Background(), exe, l, nil)
	if err != nil {
		t.Fatal(err)
	}
	out, err := cmd.CombinedOutput()
	closeExtraFiles(cmd)
	return string(out), err
}

// cappedRoot skips a test unless it runs in the capped caller, and checks that
// the caller is what it stands for.
func cappedRoot(t *testing.T) *Sandbox {
	t.Helper()
	if os.Getenv(cappedRootEnv) == "" {
		t.Skip("runs in the capped caller of TestLandlockAsCappedRoot")
	}
	have, err := effectiveCapabilities()
	if err != nil {
		t.Fatal(err)
	}
	var want uint64
	for _, c := range rootCapabilities {
		n, _ := capabilityNumbers([]string{c})
		want |= 1 << n[0]
	}
	if os.Geteuid() != 0 || have != want {
		t.Fatalf("the caller is user %d with capabilities %#x, want root with %#x", os.Geteuid(), have, want)
	}
	return landlockSandbox(t)
}

// started is a running sandboxed Python program that prints lines and reads
// them.
type started struct {
	cmd   *Command
	in    io.WriteCloser
	lines *bufio.Scanner
}

func start(t *testing.T, command func(Spec) *Command, spec Spec, program string) *started {
	t.Helper()
	spec.Args = []string{python, "-I", "-u", "-c", program}
	cmd := command(spec)
	in, err := cmd.StdinPipe()
	if err != nil {
		t.Fatal(err)
	}
	out, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	cmd.Stderr = os.Stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		cmd.Kill()
		_ = cmd.Wait()
	})
	return &started{cmd: cmd, in: in, lines: bufio.NewScanner(out)}
}

// line is the program's next line.
func (p *started) line(t *testing.T) string {
	t.Helper()
	if !p.lines.Scan() {
		t.Fatalf("the program ended: %v", p.lines.Err())
	}
	return p.lines.Text()
}

// say writes a line to the program.
func (p *started) say(t *testing.T, line string) {
	t.Helper()
	if _, err := io.WriteString(p.in, line+"\n"); err != nil {
		t.Fatal(err)
	}
}

// victim prints its user, pid and directory, then forks as many children as
// each line it reads asks for, holds them, and prints how many it made.
const victim = `import os, sys, time
print(os.getuid(), os.getpid(), os.getcwd())
open("secret", "w").write("victim's")
children = []
for line in sys.stdin:
    made = 0
    for _ in range(int(line)):
        try:
            pid = os.fork()
        except OSError:
            break
        if pid == 0:
            time.sleep(60)
            os._exit(0)
        children.append(pid)
        made += 1
    print(made)
`

// Each command of a root caller runs as a user of its own, in the range, and
// neither root's nor another command's.
func TestCappedRootOwnUsers(t *testing.T) {
	command := mustCommand(t, cappedRoot(t))
	seen := map[int]bool{}
	for range 3 {
		p := start(t, command, Spec{}, victim)
		uid, err := strconv.Atoi(strings.Fields(p.line(t))[0])
		if err != nil || uid < DefaultUIDBase || uid >= DefaultUIDBase+uidSpan || seen[uid] {
			t.Fatalf("command's user %d: want one of its own in [%d, %d), seen %v", uid, DefaultUIDBase, DefaultUIDBase+uidSpan, seen)
		}
		seen[uid] = true
	}
}

// A fork bomb in one command uses up its own process limit alone: another
// command, running already or started after, still makes its processes.
func TestCappedRootForkBombStopsNoOther(t *testing.T) {
	testForkBombStopsNoOther(t, mustCommand(t, cappedRoot(t)), true)
}

// The same, in the sandboxes of this process: a root caller's commands (with
// every capability) have users of their own too; those of a caller that is not
// root share its user, and a fork bomb in one uses up the room of another
// that runs already.
func TestForkBombStopsNoOther(t *testing.T) {
	for name, command := range modes(t) {
		if isLandlock(name) {
			t.Run(name, func(t *testing.T) { testForkBombStopsNoOther(t, command, name == "landlock-root") })
		}
	}
}

// testForkBombStopsNoOther starts a command, has another one fork up to its
// limit, then asks the first for 20 processes and starts a third: with users
// of their own (own), both get them all; sharing the caller's user, the first
// finds its limit used up by the bomb.
func testForkBombStopsNoOther(t *testing.T, command func(Spec) *Command, own bool) {
	if !own {
		settleGatewayUser(t)
	}
	limits := Limits{Processes: 32}
	first := start(t, command, Spec{Limits: limits}, victim)
	first.line(t)
	bomb := start(t, command, Spec{Limits: limits}, victim)
	bomb.line(t)
	bomb.say(t, "1000")
	if n, _ := strconv.Atoi(bomb.line(t)); n >= 32 || n < 20 {
		t.Fatalf("the bomb made %d processes, want fewer than its limit of 32 and at least 20", n)
	}
	first.say(t, "20")
	got := first.line(t)
	if own && got != "20" {
		t.Errorf("after another command's fork bomb, a running command made %s processes of 20", got)
	}
	if !own && got == "20" {
		t.Errorf("sharing the caller's user, a running command made all 20 processes after another's fork bomb: the test does not show the bound")
	}
	if !own {
		return
	}
	third := start(t, command, Spec{Limits: limits}, victim)
	third.line(t)
	third.say(t, "20")
	if got := third.line(t); got != "20" {
		t.Errorf("after another command's fork bomb, a new command made %s processes of 20", got)
	}
}

// attacker tries, from its sandbox, what a command must not do to another
// command (victim) and to the caller (gateway): signal them, trace them, read
// their memory, environment and files; and regain root or a capability. It
// prints one line per attempt, and then its capability sets and no_new_privs.
const attacker = `import ctypes, os, sys
victim, gateway, victim_dir = int(sys.argv[1]), int(sys.argv[2]), sys.argv[3]
` + attempts + `for who, pid in (("victim", victim), ("gateway", gateway)):
    attempt(who + " signal", lambda: os.kill(pid, 0))
    attempt(who + " kill", lambda: os.kill(pid, 9))
    attempt(who + " ptrace", lambda: call(libc.ptrace, 16, pid, None, None))  # PTRACE_ATTACH
    attempt(who + " environ", lambda: open("/proc/%d/environ" % pid, "rb").read(1))
    attempt(who + " mem", lambda: open("/proc/%d/mem" % pid, "rb").read(1))
attempt("victim file", lambda: open(victim_dir + "/secret").read())
attempt("victim dir", lambda: os.listdir(victim_dir))
attempt("setuid", lambda: os.setuid(0))
attempt("setresuid", lambda: os.setresuid(0, 0, 0))
attempt("setgroups", lambda: os.setgroups([0]))
header = (ctypes.c_uint32 * 2)(0x20080522, 0)  # _LINUX_CAPABILITY_VERSION_3
data = (ctypes.c_uint32 * 6)()
call(libc.capget, header, data)
for i in range(6):
    data[i] = 0xffffffff
attempt("capset", lambda: call(libc.capset, header, data))
call(libc.capget, header, data)
print("capabilities", list(data))
print("no_new_privs", libc.prctl(39, 0, 0, 0, 0))
`

// A command running as a user of its own can neither signal, trace nor read
// another command or the caller, nor become root or hold a capability.
func TestCappedRootAttacks(t *testing.T) {
	s := cappedRoot(t)
	v := start(t, mustCommand(t, s), Spec{}, victim)
	fields := strings.Fields(v.line(t))
	cmd, err := s.Command(Spec{Args: []string{python, "-I", "-c", attacker, fields[1], strconv.Itoa(os.Getpid()), fields[2]}})
	if err != nil {
		t.Fatal(err)
	}
	out, err := output(cmd)
	if err != nil {
		t.Fatalf("the attacker: %v\n%s", err, out)
	}
	lines := strings.Split(strings.TrimSpace(out), "\n")
	if len(lines) != 18 {
		t.Fatalf("the attacker printed %d lines, want 18:\n%s", len(lines), out)
	}
	for _, line := range lines[:16] {
		if !strings.Contains(line, " refused ") {
			t.Errorf("the attacker was not refused: %s", line)
		}
	}
	if want := "capabilities [0, 0, 0, 0, 0, 0]"; lines[16] != want {
		t.Errorf("%s, want %s", lines[16], want)
	}
	if want := "no_new_privs 1"; lines[17] != want {
		t.Errorf("%s, want %s", lines[17], want)
	}
	v.say(t, "1") // the victim lives on
	if got := v.line(t); got != "1" {
		t.Errorf("the victim made %s processes of 1", got)
	}
	t.Logf("the attacker:\n%s", out)
}

// The caller kills its command, which runs as another user, with CAP_KILL.
func TestCappedRootKills(t *testing.T) {
	p := start(t, mustCommand(t, cappedRoot(t)), Spec{}, victim)
	p.line(t)
	p.cmd.Kill()
	done := make(chan error, 1)
	go func() { done <- p.cmd.Wait() }()
	select {
	case err := <-done:
		if ws, ok := p.cmd.ProcessState.Sys().(syscall.WaitStatus); !ok || ws.Signal() != syscall.SIGKILL {
			t.Errorf("the command ended with %v, want killed", err)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("the command outlived Kill")
	}
}

// A Go program whose process limit leaves it no thread to start fails with the
// Go runtime's message, which the gateway names the process limit by
// (lambda's threadFailures, which hold both forms).
func TestGoProgramBeyondTheProcessLimit(t *testing.T) {
	s := landlockSandbox(t)
	if !s.privileged {
		t.Skip("needs a root caller, whose commands have users of their own")
	}
	// The launcher's copy of the test binary, which every user may execute.
	cmd, err := s.Command(Spec{Args: []string{s.launcher, "-test.run=^$"}, ReadOnly: []string{s.launcher}, Limits: Limits{Processes: 1}})
	if err != nil {
		t.Fatal(err)
	}
	out, err := output(cmd)
	// Without cgo the Go runtime makes threads itself; with it, through pthread.
	if err == nil || !strings.Contains(out, "failed to create new OS thread") && !strings.Contains(out, "runtime/cgo: pthread_create failed: Resource temporarily unavailable") {
		t.Fatalf("a Go program with a process limit of 1: %v, %.300q; want the Go runtime's failure to create a thread", err, out)
	}
}

// Directories that a root caller's commands left behind when their caller
// ended first (a crash) are removed by the next sandbox there, as their
// owners: the caller, without CAP_DAC_OVERRIDE, cannot read them.
func TestCappedRootRemovesLeftDirectories(t *testing.T) {
	s := cappedRoot(t)
	// A command that took the modes of what it made, as a crash leaves it.
	program := `import os, sys
os.makedirs("a/b")
open("a/b/f", "w").write("x")
os.chmod("a/b", 0)
os.chmod("a", 0)
print(os.getcwd())
sys.stdin.readline()
`
	p := start(t, mustCommand(t, s), Spec{}, program)
	dir := p.line(t)
	// Not removed at exit: the caller stands for one that ended first.
	p.cmd.dir = ""
	p.say(t, "end")
	_ = p.cmd.Wait()
	if _, err := os.Lstat(dir); err != nil {
		t.Fatalf("the command's directory: %v", err)
	}
	if err := os.RemoveAll(dir); err == nil {
		t.Fatal("the capped caller removed a command's directory of modes 0 itself: it holds more than it should")
	}
	// A live command's directory stays.
	live := start(t, mustCommand(t, s), Spec{}, victim)
	liveDir := strings.Fields(live.line(t))[2]
	s.removeLeftDirs()
	if _, err := os.Lstat(dir); !os.IsNotExist(err) {
		t.Errorf("%s is left: %v", dir, err)
	}
	if _, err := os.Lstat(liveDir); err != nil {
		t.Errorf("a live command's directory: %v", err)
	}
}

// attempts are the Python helpers of the attack programs: attempt runs one
// attempt and prints whether it was done or refused (with its errno); call makes
// a libc call's failure an OSError.
const attempts = `libc = ctypes.CDLL(None, use_errno=True)
def attempt(name, f):
    try:
        f()
        print(name, "done")
    except OSError as e:
        print(name, "refused", e.errno)
def call(f, *args):
    if f(*args) != 0:
        raise OSError(ctypes.get_errno(), "failed")
`
