package sandbox

import (
	"bufio"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"golang.org/x/sys/unix"
)

// attemptPy defines attempt(f) in a test's Python program: "ok", or the name
// of the OSError f raised.
const attemptPy = `def attempt(f):
    try:
        f()
        return "ok"
    except OSError as e:
        return type(e).__name__
`

// containerSandbox is a namespace sandbox of a root caller, which alone runs
// commands that stand for containers.
func containerSandbox(t *testing.T) *Sandbox {
	t.Helper()
	s := newSandbox(t)
	if !s.privileged || s.mode != ModeNamespaces {
		t.Skip("commands that stand for containers need a namespace sandbox of a root caller")
	}
	return s
}

// netns makes a network namespace for the test, removed at its end.
func netns(t *testing.T) string {
	t.Helper()
	name := "mlsbx-" + strconv.Itoa(os.Getpid())
	if out, err := exec.Command("ip", "netns", "add", name).CombinedOutput(); err != nil {
		t.Skipf("ip netns add: %v: %s", err, out)
	}
	t.Cleanup(func() { _ = exec.Command("ip", "netns", "del", name).Run() })
	if out, err := exec.Command("ip", "-n", name, "link", "set", "lo", "up").CombinedOutput(); err != nil {
		t.Fatalf("%v: %s", err, out)
	}
	return "/run/netns/" + name
}

// TestContainerSpec: binds at targets of their own, read-only unless writable;
// an explicit user with supplementary groups; a working directory, made and
// entered as that user in a volume only that user may enter; a network
// namespace; a hostname; a command found in PATH; and a capability kept by a
// user that is not root, while a root command without capabilities can write
// none of the kernel's settings.
func TestContainerSpec(t *testing.T) {
	s := containerSandbox(t)
	ro, rw := t.TempDir(), t.TempDir()
	if err := os.WriteFile(filepath.Join(ro, "in"), []byte("data"), 0o644); err != nil {
		t.Fatal(err)
	}
	// Only the command's user may enter it, not root without capabilities.
	if err := os.Chown(rw, 4242, 4343); err != nil {
		t.Fatal(err)
	}
	if err := os.Chmod(rw, 0o700); err != nil {
		t.Fatal(err)
	}
	ns := netns(t)
	program := "import os, socket\n" + attemptPy + `print(os.getuid(), os.getgid(), sorted(os.getgroups()))
print(os.getcwd(), socket.gethostname(), sorted(n for _, n in socket.if_nameindex()))
print(open("/srv/ro/in").read(), attempt(lambda: open("/srv/ro/x", "w")), attempt(lambda: open("/srv/rw/x", "w").write("y")))
print(attempt(lambda: socket.socket().bind(("127.0.0.1", 80))))
print(os.environ["PWD"])
`
	spec := Spec{
		Args:         []string{"python3", "-I", "-c", program},
		Env:          []string{"PATH=/usr/bin"},
		Binds:        []Bind{{Source: ro, Target: "/srv/ro"}, {Source: rw, Target: "/srv/rw", Writable: true}},
		User:         &User{UID: 4242, GID: 4343, Groups: []int{4343, 5000}},
		Dir:          "/srv/rw/work",
		NetNS:        ns,
		Hostname:     "web-0",
		Capabilities: []string{"CAP_NET_BIND_SERVICE"},
	}
	got := run(t, mustCommand(t, s), spec, "")
	want := "4242 4343 [4343, 5000]\n/srv/rw/work web-0 ['lo']\ndata OSError ok\nok\n/srv/rw/work"
	if got != want {
		t.Errorf("got\n%s\nwant\n%s", got, want)
	}
	if raw, err := os.ReadFile(filepath.Join(rw, "x")); err != nil || string(raw) != "y" {
		t.Errorf("the writable bind: %q, %v", raw, err)
	}

	spec.Capabilities = nil
	spec.User = &User{UID: 4242, GID: 4343}
	if got := run(t, mustCommand(t, s), spec, ""); !strings.Contains(got, "\nPermissionError\n") {
		t.Errorf("binding port 80 without CAP_NET_BIND_SERVICE: %q, want PermissionError", got)
	}

	root := "import os\n" + attemptPy + `print(os.getuid(), [l.split()[1] for l in open("/proc/self/status") if l.startswith(("CapEff", "CapBnd"))])
print(attempt(lambda: open("/proc/sys/kernel/ctrl-alt-del", "w").write("0")), attempt(lambda: open("/usr/x", "w")))
`
	got = run(t, mustCommand(t, s), Spec{Args: []string{python, "-I", "-c", root}, User: &User{}, NetNS: ns}, "")
	if want := "0 ['0000000000000000', '0000000000000000']\nOSError OSError"; got != want {
		t.Errorf("root without capabilities: got\n%s\nwant\n%s", got, want)
	}
}

// TestSignalReachesTheCommand: Signal delivers a signal to the command itself,
// which bubblewrap would not pass on, so that it can end cleanly.
func TestSignalReachesTheCommand(t *testing.T) {
	s := containerSandbox(t)
	if ok, why := s.Cgroups(); !ok {
		t.Skipf("no cgroups here: %v", why)
	}
	program := `import os, signal, time
signal.signal(signal.SIGTERM, lambda *a: (os.write(1, b"terminated\n"), os._exit(7)))
os.write(1, b"started\n")
time.sleep(60)
`
	cmd := mustCommand(t, s)(Spec{Args: []string{python, "-I", "-c", program}, User: &User{UID: 4242, GID: 4242}})
	out, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	lines := bufio.NewScanner(out)
	if !lines.Scan() || lines.Text() != "started" {
		t.Fatalf("first line %q", lines.Text())
	}
	if err := cmd.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	if !lines.Scan() || lines.Text() != "terminated" {
		t.Errorf("after SIGTERM: %q, want terminated", lines.Text())
	}
	done := make(chan error, 1)
	go func() { done <- cmd.Wait() }()
	select {
	case <-done:
	case <-time.After(10 * time.Second):
		cmd.Kill()
		t.Fatal("the sandbox outlived its command")
	}
	if code := cmd.ProcessState.ExitCode(); code != 7 {
		t.Errorf("exit code %d, want the command's 7", code)
	}
}

// TestBindFromAnOpenDirectory: a bind given as an open directory (Bind.From)
// shows that directory even when a link has taken its path's place since it
// was opened (the path bubblewrap would follow leads elsewhere), read-only
// unless writable, and the command holds no descriptor of it.
func TestBindFromAnOpenDirectory(t *testing.T) {
	s := containerSandbox(t)
	base, elsewhere := t.TempDir(), t.TempDir()
	dir := filepath.Join(base, "sub")
	if err := os.Mkdir(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "in"), []byte("opened"), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(elsewhere, "in"), []byte("elsewhere"), 0o644); err != nil {
		t.Fatal(err)
	}
	from, err := os.OpenFile(dir, unix.O_PATH|unix.O_DIRECTORY|unix.O_NOFOLLOW, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer from.Close()
	// What a container that writes base could do between the node's open and
	// bubblewrap's mount.
	if err := os.Rename(dir, filepath.Join(base, "moved")); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink(elsewhere, dir); err != nil {
		t.Fatal(err)
	}
	program := "import os\n" + attemptPy + `print(open("/srv/a/in").read(), attempt(lambda: open("/srv/a/x", "w")), open("/srv/b/in").read())
print(sorted(int(fd) for fd in os.listdir("/proc/self/fd")))
`
	spec := Spec{
		Args:  []string{python, "-I", "-c", program},
		Binds: []Bind{{Source: dir, Target: "/srv/a", From: from}, {Source: dir, Target: "/srv/b", Writable: true, From: from}},
		User:  &User{UID: 4242, GID: 4242},
	}
	got := run(t, mustCommand(t, s), spec, "")
	// 0, 1, 2 and 3, the descriptor listdir reads /proc/self/fd with.
	if want := "opened OSError opened\n[0, 1, 2, 3]"; got != want {
		t.Errorf("got\n%s\nwant\n%s", got, want)
	}
	// The caller keeps its descriptor.
	if _, err := from.Stat(); err != nil {
		t.Errorf("the caller's descriptor: %v", err)
	}
}
