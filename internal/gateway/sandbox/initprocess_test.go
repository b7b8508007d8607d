package sandbox

import (
	"bufio"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"
)

// namespaceModes are the namespace sandboxes of modes: the ones whose first
// process is the reaper where there is one for the architecture.
func namespaceModes(t *testing.T) map[string]func(Spec) *Command {
	m := modes(t)
	for name := range m {
		if isLandlock(name) {
			delete(m, name)
		}
	}
	return m
}

// startMarked starts program in a sandbox, whose first line of output it
// waits for. alone starts bubblewrap without the Command's clean-up at its
// exit (which kills the command's group and cgroup), as when the gateway that
// started it is dead; the test's own clean-up does it at the end.
func startMarked(t *testing.T, command func(Spec) *Command, program string, alone bool) *Command {
	t.Helper()
	cmd := command(Spec{Args: []string{python, "-I", "-c", program}})
	out, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	start := cmd.Start
	if alone {
		start = func() error {
			defer closeExtraFiles(cmd.Cmd)
			return cmd.Cmd.Start()
		}
	}
	if err := start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		cmd.Kill()
		_ = cmd.Wait()
		if alone {
			cmd.cgroup.remove()
			releaseUID(cmd.uid)
		}
	})
	if _, err := bufio.NewReader(out).ReadString('\n'); err != nil {
		t.Fatalf("reading the first line: %v", err)
	}
	return cmd
}

// statusField is a field of /proc/pid/status ("" when it cannot be read).
func statusField(pid int, field string) string {
	raw, _ := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/status")
	for _, line := range strings.Split(string(raw), "\n") {
		if v, ok := strings.CutPrefix(line, field+":"); ok {
			return strings.TrimSpace(v)
		}
	}
	return ""
}

// TestCommandDiesWithBubblewrapsMonitor is the attack on the sandbox's first
// process: bubblewrap's monitor, the gateway's child, is killed alone, as it
// is when the gateway dies or the OOM killer picks it, with neither the
// process group nor the cgroup killed after it. The command, and what it
// started in a session of its own, must die with it: the monitor's
// parent-death signal reaches the first process, whose death ends the PID
// namespace. A first process that had changed to the command's user would
// outlive the monitor (the kernel sends that signal as a kill from the
// monitor, which may not signal another user), and the command with it.
func TestCommandDiesWithBubblewrapsMonitor(t *testing.T) {
	for name, command := range namespaceModes(t) {
		t.Run(name, func(t *testing.T) {
			marker := "sandbox-orphaned-" + name + strconv.Itoa(os.Getpid())
			cmd := startMarked(t, command, `import os, time
if os.fork() == 0:
    os.setsid()
    os.execv("/usr/bin/sleep", [`+strconv.Quote(marker)+`, "600"])
print("started", flush=True)
time.sleep(600)
`, true)
			waitFor(t, func() bool { return len(pidsWith(marker)) == 1 }, "the command's child to start")
			if err := syscall.Kill(cmd.Process.Pid, syscall.SIGKILL); err != nil {
				t.Fatal(err)
			}
			waitFor(t, func() bool { return len(pidsWith(marker)) == 0 }, "the command's child to die with bubblewrap's monitor")
		})
	}
}

// TestFirstProcessHoldsNothing: the first process of a namespace sandbox, the
// reaper, holds no descriptor (not the command's pipes, launch or cgroups)
// and no capability, with no_new_privs set, and runs the reaper's few pages,
// not a copy of bubblewrap.
func TestFirstProcessHoldsNothing(t *testing.T) {
	if len(reaperProgram) == 0 {
		t.Skip("no reaper for this architecture: bubblewrap's init is the first process")
	}
	for name, command := range namespaceModes(t) {
		t.Run(name, func(t *testing.T) {
			cmd := startMarked(t, command, `import time
print("started", flush=True)
time.sleep(600)
`, false)
			monitor := cmd.Process.Pid
			kids := Children(monitor)
			if len(kids) != 1 {
				t.Fatalf("bubblewrap's monitor has children %v, want its first process alone", kids)
			}
			first := kids[0]
			if exe, _ := os.Readlink("/proc/" + strconv.Itoa(first) + "/exe"); filepath.Base(strings.TrimSuffix(exe, " (deleted)")) != filepath.Base(InitInSandbox) {
				t.Errorf("the first process runs %q, want the reaper (%s)", exe, InitInSandbox)
			}
			for field, want := range map[string]string{
				"CapEff": "0000000000000000", "CapPrm": "0000000000000000", "CapInh": "0000000000000000",
				"CapAmb": "0000000000000000", "NoNewPrivs": "1", "NSpid": strconv.Itoa(first) + "\t1",
			} {
				if got := statusField(first, field); got != want {
					t.Errorf("the first process's %s is %q, want %q", field, got, want)
				}
			}
			// It closes its descriptors once it has forked the launcher.
			var fds []os.DirEntry
			for deadline := time.Now().Add(5 * time.Second); ; time.Sleep(10 * time.Millisecond) {
				fds, _ = os.ReadDir("/proc/" + strconv.Itoa(first) + "/fd")
				if len(fds) == 0 || time.Now().After(deadline) {
					break
				}
			}
			if len(fds) != 0 {
				var names []string
				for _, fd := range fds {
					target, _ := os.Readlink("/proc/" + strconv.Itoa(first) + "/fd/" + fd.Name())
					names = append(names, fd.Name()+" -> "+target)
				}
				t.Errorf("the first process holds descriptors %v", names)
			}
			// Its parent-death signal is bubblewrap's (SIGKILL): see
			// TestCommandDiesWithBubblewrapsMonitor for what it does.
		})
	}
}

// TestOrphansInTheSandboxAreReaped: processes orphaned inside a namespace
// sandbox are adopted by its first process, which reaps them, so that none
// stays a zombie counted against the command's process limit until it ends.
func TestOrphansInTheSandboxAreReaped(t *testing.T) {
	for name, command := range namespaceModes(t) {
		t.Run(name, func(t *testing.T) {
			cmd := startMarked(t, command, `import os, time
for _ in range(5):
    if os.fork() == 0:
        if os.fork() == 0:
            os._exit(0)
        os._exit(0)
    os.wait()
print("started", flush=True)
time.sleep(600)
`, false)
			first := Children(cmd.Process.Pid)
			if len(first) != 1 {
				t.Fatalf("bubblewrap's monitor has children %v, want its first process alone", first)
			}
			// Its children end as the command alone: every orphan exited and
			// was reaped, none left a zombie.
			var kids, zombies []int
			for deadline := time.Now().Add(5 * time.Second); time.Now().Before(deadline); time.Sleep(20 * time.Millisecond) {
				kids, zombies = Children(first[0]), zombies[:0]
				for _, c := range kids {
					if statusField(c, "State") == "Z (zombie)" {
						zombies = append(zombies, c)
					}
				}
				if len(kids) == 1 && len(zombies) == 0 {
					return
				}
			}
			t.Errorf("the first process has children %v, of them zombies %v: want the command alone", kids, zombies)
		})
	}
}

// TestFirstProcessIsOutOfReach is the attack on the sandbox's first process
// from inside: a command that could write its memory (/proc/1/mem, which the
// seccomp filter does not refuse as it refuses ptrace) would run code as the
// first process, outside the command's cgroup and limits, and could clear the
// parent-death signal that ends the sandbox with bubblewrap's monitor. Where
// the command is the first process's user (a gateway that is not root: one
// user inside its user namespace), only the first process being not dumpable
// keeps it out.
func TestFirstProcessIsOutOfReach(t *testing.T) {
	for name, command := range namespaceModes(t) {
		t.Run(name, func(t *testing.T) {
			out := run(t, command, Spec{}, `import errno, os
def err(f):
    try:
        f()
        return "allowed"
    except OSError as e:
        return errno.errorcode[e.errno]
print(err(lambda: os.close(os.open("/proc/1/mem", os.O_RDWR))),
      err(lambda: os.close(os.open("/proc/1/mem", os.O_RDONLY))),
      err(lambda: open("/proc/1/environ", "rb").read()),
      err(lambda: os.listdir("/proc/1/fd")),
      err(lambda: os.kill(1, 9)))
`)
			// A SIGKILL from inside the namespace to its first process,
			// which has no handler, is refused (another user) or dropped
			// (the kill succeeds and does nothing: the run ending normally
			// shows that the sandbox lived on).
			if out != "EACCES EACCES EACCES EACCES EPERM" && out != "EACCES EACCES EACCES EACCES allowed" {
				t.Errorf("the command reaching its first process: %q, want EACCES for each of mem read-write, mem, environ and fd, and SIGKILL refused or dropped", out)
			}
		})
	}
}

// TestBindsKeepOutOfTheReservedDir: a bind at the sandbox's own directory,
// inside it or above it is refused, and so is a relative target (which
// bubblewrap takes from the root), so that no host directory another process
// can write in holds the launcher or the reaper when they are executed.
func TestBindsKeepOutOfTheReservedDir(t *testing.T) {
	s := newSandbox(t)
	if !s.privileged {
		t.Skip("binds need a namespace sandbox of a root caller")
	}
	dir := t.TempDir()
	for _, target := range []string{"/run", "/run/", ReservedDir, ReservedDir + "/launcher", "/", "/run/../run/metalambda", "run/metalambda", "data", "/srv/.", "/srv//x", "/proc/1/root/oldroot/x", "/sbin/a", "/lib", "/bin/x"} {
		if cmd, err := s.Command(Spec{Args: []string{"/bin/true"}, Binds: []Bind{{Source: dir, Target: target}}}); err == nil || !strings.Contains(err.Error(), ReservedDir) && !strings.Contains(err.Error(), "absolute") && !strings.Contains(err.Error(), "makes itself") {
			if cmd != nil {
				closeExtraFiles(cmd.Cmd)
				cmd.cgroup.remove()
				releaseUID(cmd.uid)
			}
			t.Errorf("a bind at %s: %v, want a refusal naming %s or a relative target", target, err, ReservedDir)
		}
	}
	// Through the host's own trees, bound before: /usr, a link in a read-only
	// host path (which could lead into a volume bound elsewhere, and on into
	// the host), and, with a launcher that has a loader (this test's binary),
	// its files in /etc.
	host := t.TempDir()
	if err := os.Symlink("../elsewhere", filepath.Join(host, "ln")); err != nil {
		t.Fatal(err)
	}
	for target, want := range map[string]string{
		"/usr/local/x":     "in /usr",
		host + "/ln/x":     "symbolic link " + host + "/ln",
		"/etc":             "dynamically linked",
		"/etc/ld.so.cache": "dynamically linked",
	} {
		if !dynamicallyLinked(s.launcher) && strings.HasPrefix(target, "/etc") {
			continue
		}
		cmd, err := s.Command(Spec{Args: []string{"/bin/true"}, ReadOnly: []string{host}, Binds: []Bind{{Source: dir, Target: target}}})
		if err == nil || !strings.Contains(err.Error(), want) {
			if cmd != nil {
				closeExtraFiles(cmd.Cmd)
				cmd.cgroup.remove()
				releaseUID(cmd.uid)
			}
			t.Errorf("a bind at %s: %v, want a refusal saying %q", target, err, want)
		}
	}
	cmd, err := s.Command(Spec{Args: []string{"/bin/true"}, Binds: []Bind{{Source: dir, Target: "/run/other"}}})
	if err != nil {
		t.Fatalf("a bind beside the reserved directory: %v", err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	if err := cmd.Wait(); err != nil {
		t.Errorf("a command with a bind at /run/other: %v", err)
	}
}
