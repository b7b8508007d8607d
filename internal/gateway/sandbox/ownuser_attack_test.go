package sandbox

import (
	"errors"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
)

// reacher tries, from its sandbox, what Landlock does not confine (chmod,
// utime, readlink, signals to every process, setpriority of a user) and what
// it does, against another command (victim), its directory, the caller
// (gateway), the commands' directory of the caller and the launcher, root's
// own files. It prints one line per attempt.
const reacher = `import ctypes, os, sys
victim, gateway, victim_dir, workers, launcher, victim_uid = int(sys.argv[1]), int(sys.argv[2]), sys.argv[3], sys.argv[4], sys.argv[5], int(sys.argv[6])
` + attempts + `for who, pid in (("victim", victim), ("gateway", gateway)):
    attempt(who + " cwd link", lambda: os.readlink("/proc/%d/cwd" % pid))
    attempt(who + " root link", lambda: os.readlink("/proc/%d/root" % pid))
    attempt(who + " fd link", lambda: os.readlink("/proc/%d/fd/0" % pid))
    attempt(who + " fd list", lambda: os.listdir("/proc/%d/fd" % pid))
    attempt(who + " stack", lambda: open("/proc/%d/stack" % pid, "rb").read(1))
    attempt(who + " status", lambda: open("/proc/%d/status" % pid, "rb").read(1))
    attempt(who + " prlimit", lambda: call(libc.prlimit, pid, 6, None, None))
attempt("every process kill", lambda: os.kill(-1, 9))  # done even when it reaches none: the victim lives on
attempt("victim's user priority", lambda: call(libc.setpriority, 2, victim_uid, 19))  # PRIO_USER
attempt("victim dir chmod", lambda: os.chmod(victim_dir, 0o777))
attempt("victim dir utime", lambda: os.utime(victim_dir, (0, 0)))
attempt("victim file chmod", lambda: os.chmod(victim_dir + "/secret", 0o666))
attempt("victim file link", lambda: os.link(victim_dir + "/secret", "stolen"))
attempt("victim dir symlink", lambda: (os.symlink(victim_dir, "victim"), os.listdir("victim")))
attempt("victim dir rename", lambda: os.rename(victim_dir, "taken"))
attempt("workers dir chmod", lambda: os.chmod(workers, 0o777))
attempt("workers dir list", lambda: os.listdir(workers))
attempt("workers dir make", lambda: os.mkdir(workers + "/metalambda-worker-000000000000000000000000"))
attempt("own dir rename", lambda: os.rename(os.getcwd(), workers + "/metalambda-worker-111111111111111111111111"))
attempt("tmp write", lambda: open(os.path.dirname(workers) + "/planted", "w").write("x"))
attempt("launcher chmod", lambda: os.chmod(launcher, 0o4777))
attempt("launcher write", lambda: open(launcher, "ab").write(b"x"))
attempt("proc 1 environ", lambda: open("/proc/1/environ", "rb").read(1))
attempt("chown own dir", lambda: os.chown(os.getcwd(), 0, 0))
attempt("ambient setuid", lambda: call(libc.prctl, 47, 2, 7, 0, 0))  # PR_CAP_AMBIENT_RAISE CAP_SETUID
`

// A command running as a user of its own reaches no other command, the
// caller, or root's files, by what Landlock does not confine either: modes,
// times, links, /proc links, signals to every process, a user's priority.
func TestCappedRootReachesNothing(t *testing.T) {
	s := cappedRoot(t)
	v := start(t, mustCommand(t, s), Spec{}, victim)
	fields := strings.Fields(v.line(t))
	args := []string{python, "-I", "-c", reacher, fields[1], strconv.Itoa(os.Getpid()), fields[2], s.workersDir, s.launcher, fields[0]}
	cmd, err := s.Command(Spec{Args: args})
	if err != nil {
		t.Fatal(err)
	}
	out, err := output(cmd)
	if err != nil {
		t.Fatalf("the attacker: %v\n%s", err, out)
	}
	lines := strings.Split(strings.TrimSpace(out), "\n")
	if len(lines) != 32 {
		t.Fatalf("the attacker printed %d lines, want 32:\n%s", len(lines), out)
	}
	for _, line := range lines {
		if !strings.Contains(line, " refused ") && !strings.HasPrefix(line, "every process kill ") {
			t.Errorf("the attacker was not refused: %s", line)
		}
	}
	st, err := os.Stat(fields[2])
	if err != nil || st.Mode().Perm() != 0o700 {
		t.Errorf("the victim's directory: %v, %v; want 0700", st.Mode(), err)
	}
	v.say(t, "1") // the victim lives on
	if got := v.line(t); got != "1" {
		t.Errorf("the victim made %s processes of 1", got)
	}
	t.Logf("the attacker:\n%s", out)
}

// leaver forks a child that lets go of its standard descriptors and lives on,
// prints the child's pid and exits: a daemon left behind by a function.
const leaver = `import os, sys, time
r, w = os.pipe()
pid = os.fork()
if pid == 0:
    os.close(r)
    for fd in (0, 1, 2):
        os.close(fd)
    os.write(w, b"x")
    os.close(w)
    time.sleep(600)
    os._exit(0)
os.close(w)
os.read(r, 1)
print(pid, flush=True)
`

// A process a command leaves behind dies with the command, without cgroups (a
// gateway in a container, whose runtime delegates none) as with them: it
// would otherwise keep the command's user, and run on unbounded.
func TestCappedRootLeftoverDiesWithTheCommand(t *testing.T) {
	s := cappedRoot(t)
	s.cgroups = &cgroups{reason: errors.New("none, as in a container")}
	cmd, err := s.Command(Spec{Args: []string{python, "-I", "-c", leaver}})
	if err != nil {
		t.Fatal(err)
	}
	out, err := output(cmd)
	if err != nil {
		t.Fatalf("the command: %v\n%s", err, out)
	}
	pid, err := strconv.Atoi(strings.TrimSpace(out))
	if err != nil {
		t.Fatalf("the command printed %q", out)
	}
	t.Cleanup(func() { _ = syscall.Kill(pid, syscall.SIGKILL) })
	waitFor(t, func() bool {
		raw, err := os.ReadFile(filepath.Join("/proc", strconv.Itoa(pid), "stat"))
		return err != nil || strings.Contains(string(raw), ") Z ")
	}, "the process the command left to die")
}

// A root caller's command holds its user until none of its processes is left:
// no other command is given it meanwhile, and it is given back after.
func TestUsersAreHeldWhileTheirCommandLives(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("users of their own need a root caller")
	}
	s := landlockSandbox(t)
	old := uidOffset
	t.Cleanup(func() { uidOffset = old })
	uidOffset = func() int { return 7 } // every command is offered the same user
	p := start(t, mustCommand(t, s), Spec{}, victim)
	if uid := strings.Fields(p.line(t))[0]; uid != strconv.Itoa(DefaultUIDBase+7) {
		t.Fatalf("the command runs as %s, want %d", uid, DefaultUIDBase+7)
	}
	if _, err := s.Command(Spec{Args: []string{python, "-c", ""}}); err == nil || !strings.Contains(err.Error(), "no free user") {
		t.Fatalf("a second command offered the user of a live one: %v, want no free user", err)
	}
	p.cmd.Kill()
	_ = p.cmd.Wait()
	waitFor(t, func() bool {
		cmd, err := s.Command(Spec{Args: []string{python, "-c", ""}})
		if err != nil {
			return false
		}
		out, err := output(cmd)
		if err != nil {
			t.Fatalf("the next command: %v\n%s", err, out)
		}
		return true
	}, "the user of the ended command to be given back")
}

// A root caller's range of users that would run a command as root, in the
// caller's group (root's here, so the range holds root too), or past the last
// user is refused by name.
func TestUIDRangeHoldsNoCallerNorRoot(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("only a root caller's commands have users of their own")
	}
	for _, base := range []int{-uidSpan / 2, 1<<32 - uidSpan, os.Getgid() + 1 - uidSpan} {
		if err := checkUIDRange(base); err == nil || !strings.Contains(err.Error(), "Options.UIDBase") {
			t.Errorf("UIDBase %d: %v, want the range refused", base, err)
		}
	}
	if _, err := New(Options{Mode: ModeLandlock, UIDBase: -5}); err == nil || !strings.Contains(err.Error(), "Options.UIDBase") {
		t.Errorf("New with UIDBase -5: %v, want the range refused", err)
	}
	if err := checkUIDRange(DefaultUIDBase); err != nil {
		t.Errorf("the default range: %v", err)
	}
}

// No command runs as the range's first user, a zygote's and its children's
// inits' (root of the zygote's user namespace): a command of that user would
// share them its user's rights over their processes.
func TestNoCommandRunsAsTheZygotesUser(t *testing.T) {
	old := uidOffset
	t.Cleanup(func() { uidOffset = old })
	offsets := []int{0, 0, 5}
	uidOffset = func() int {
		o := offsets[0]
		if len(offsets) > 1 {
			offsets = offsets[1:]
		}
		return o
	}
	s := &Sandbox{uidBase: DefaultUIDBase}
	uid, err := s.takeUID()
	if err != nil {
		t.Fatal(err)
	}
	defer releaseUID(uid)
	if uid != DefaultUIDBase+5 {
		t.Fatalf("took user %d, want %d (offset 0 skipped)", uid, DefaultUIDBase+5)
	}
}
