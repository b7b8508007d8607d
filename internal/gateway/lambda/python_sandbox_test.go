package lambda

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"net"
	"os"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
)

// pyAttempts is a Python prelude for the escape tests: helpers that report what
// an attempt did.
const pyAttempts = `import os, socket, tempfile

def read(path):
    try:
        with open(path, "rb") as f:
            return "read " + repr(f.read(64))
    except OSError as e:
        return type(e).__name__

def write(path):
    try:
        with open(path, "w") as f:
            f.write("pwned")
        return "wrote"
    except OSError as e:
        return type(e).__name__

def connect(port):
    try:
        socket.create_connection(("127.0.0.1", port), timeout=2).close()
        return "connected"
    except OSError as e:
        return type(e).__name__

def processes():
    try:
        return sorted(p for p in os.listdir("/proc") if p.isdigit())
    except OSError as e:
        return type(e).__name__

def environ_has(secret):
    pids = processes()
    if isinstance(pids, str):
        return pids
    return [pid for pid in pids if secret in read("/proc/%s/environ" % pid)]

def interfaces():
    try:
        return sorted(n for _, n in socket.if_nameindex())
    except OSError as e:
        return type(e).__name__
`

// escapeCase is an attempt by a registered function and what it must find.
type escapeCase struct {
	name string
	body string // the handler's body; it returns a dict
	want map[string]any
	// landlock is what differs in a Landlock sandbox: paths exist but cannot be
	// opened, /proc and sockets are refused, /tmp is the host's.
	landlock map[string]any
}

// expected is tt.want, with tt.landlock over it in a Landlock sandbox.
func (tt escapeCase) expected() map[string]any {
	if !inLandlockChild() {
		return tt.want
	}
	want := maps.Clone(tt.want)
	maps.Copy(want, tt.landlock)
	return want
}

// TestPythonEscapes registers functions that try to leave their sandbox; each
// attempt fails while another function keeps answering.
func TestPythonEscapes(t *testing.T) {
	hostDir := t.TempDir()
	kubeconfig := filepath.Join(hostDir, "admin.kubeconfig")
	if err := os.WriteFile(kubeconfig, []byte("apiVersion: v1\nkind: Config\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	cwd, err := os.Getwd()
	if err != nil {
		t.Fatal(err)
	}
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	go acceptAll(l)
	port := l.Addr().(*net.TCPAddr).Port
	t.Setenv("METALAMBDA_GATEWAY_SECRET", "gateway-secret-value")

	rt := NewPython(sandboxed(t, Options{PythonPoolSize: 1}))
	other := mustCompile(t, rt, pyFn("other", pyEcho))
	neighbour := pyFn("neighbour", `open("neighbour-file", "w").write("neighbour-secret-value")`+pyEcho)
	neighbour.Env = map[string]string{"NEIGHBOUR_TOKEN": "neighbour-secret-value"}
	assertEcho(t, mustCompile(t, rt, neighbour), "n") // a worker is started by a call
	neighbourPIDs := workerProcesses(neighbour.Name)
	if len(neighbourPIDs) == 0 {
		t.Fatal("no worker of the neighbour function")
	}
	// The neighbour's directory as the gateway sees it: in a Landlock sandbox the
	// host's path, in a namespace sandbox its private /tmp.
	neighbourDir, err := os.Readlink("/proc/" + strconv.Itoa(neighbourPIDs[0]) + "/cwd")
	if errors.Is(err, os.ErrPermission) && os.Geteuid() == 0 {
		// A gateway that is root without CAP_SYS_PTRACE reads no /proc link of a
		// worker, which runs as another user: its directory is the one of its user.
		neighbourDir, err = ownUsersDir(neighbourPIDs[0])
	}
	if err != nil {
		t.Fatal(err)
	}

	q := strconv.Quote
	tests := []escapeCase{
		{
			name: "read host files",
			body: `return {"shadow": read("/etc/shadow"), "root": read("/root/.bashrc"), "kubeconfig": read(` + q(kubeconfig) + `),
        "source tree": read(` + q(filepath.Join(cwd, "python.go")) + `), "passwd": read("/etc/passwd")}`,
			want: map[string]any{"shadow": "FileNotFoundError", "root": "FileNotFoundError", "kubeconfig": "FileNotFoundError",
				"source tree": "FileNotFoundError", "passwd": "FileNotFoundError"},
			landlock: map[string]any{"shadow": "PermissionError", "root": "PermissionError", "kubeconfig": "PermissionError",
				"source tree": "PermissionError", "passwd": "PermissionError"},
		},
		{
			name: "read other processes' environments",
			body: `return {"gateway": read("/proc/` + strconv.Itoa(os.Getpid()) + `/environ"), "neighbour": read("/proc/` + strconv.Itoa(neighbourPIDs[0]) + `/environ"),
        "scan gateway": environ_has("gateway-secret-value"), "scan neighbour": environ_has("neighbour-secret-value"), "processes": processes(),
        "signal gateway": signal(` + strconv.Itoa(os.Getpid()) + `), "signal neighbour": signal(` + strconv.Itoa(neighbourPIDs[0]) + `)}

def signal(pid):
    try:
        os.kill(pid, 0)
        return "signalled"
    except OSError as e:
        return type(e).__name__`,
			want: map[string]any{"gateway": "FileNotFoundError", "neighbour": "FileNotFoundError", "scan gateway": []any{}, "scan neighbour": []any{},
				"processes": []any{"1", "2"}, "signal gateway": "ProcessLookupError", "signal neighbour": "ProcessLookupError"},
			landlock: map[string]any{"gateway": "PermissionError", "neighbour": "PermissionError", "scan gateway": "PermissionError", "scan neighbour": "PermissionError",
				"processes": "PermissionError", "signal gateway": "PermissionError", "signal neighbour": "PermissionError"},
		},
		{
			name: "read another function's directory",
			body: `return {"file": read(` + q(filepath.Join(neighbourDir, "neighbour-file")) + `), "sees it": sees(` + q(neighbourDir) + `)}

def sees(d):
    try:
        return "neighbour-file" in os.listdir(d)
    except OSError as e:
        return type(e).__name__`,
			want:     map[string]any{"file": "FileNotFoundError", "sees it": false},
			landlock: map[string]any{"file": "PermissionError", "sees it": "PermissionError"},
		},
		{
			name: "connect to loopback",
			body: `return {"listener": connect(` + strconv.Itoa(port) + `), "interfaces": interfaces()}`,
			// No netlink socket either, to list interfaces with.
			want:     map[string]any{"listener": "ConnectionRefusedError", "interfaces": "OSError"},
			landlock: map[string]any{"listener": "PermissionError", "interfaces": "PermissionError"},
		},
		{
			name: "write outside its temp dir",
			body: `return {"usr": write("/usr/pwned"), "root": write("/pwned"), "host dir": write(` + q(filepath.Join(hostDir, "pwned")) + `),
        "/tmp": write("/tmp/pwned"), "own dir": write(os.path.join(tempfile.gettempdir(), "pwned")), "big": write_big(os.path.join(tempfile.gettempdir(), "big"))}

def write_big(path):
    try:
        with open(path, "wb") as f:
            for _ in range(64):
                f.write(b"x" * (1 << 20))
        return "wrote 64 MiB"
    except OSError as e:
        return type(e).__name__`,
			want:     map[string]any{"usr": "OSError", "root": "OSError", "host dir": "FileNotFoundError", "/tmp": "wrote", "own dir": "wrote", "big": "OSError"},
			landlock: map[string]any{"usr": "PermissionError", "root": "PermissionError", "host dir": "PermissionError", "/tmp": "PermissionError"},
		},
		{
			name: "fork bomb",
			body: `import time
    n = 0
    while n < 10000:
        try:
            pid = os.fork()
        except OSError:
            break
        if pid == 0:
            time.sleep(600)
            os._exit(0)
        n += 1
    return {"bounded": n < 32}`,
			want: map[string]any{"bounded": true},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			source := pyAttempts + "\ndef sync(request):\n    " + tt.body + "\n"
			c := mustCompile(t, rt, pyFn(strings.ReplaceAll(tt.name, " ", "-"), source))
			defer c.Close()
			res, err := invoke(t, c, echoRequest("x"))
			if err != nil {
				t.Fatal(err)
			}
			var got map[string]any
			if err := json.Unmarshal(res.Response, &got); err != nil {
				t.Fatal(err)
			}
			if diff := cmp.Diff(tt.expected(), got); diff != "" {
				t.Errorf("findings (-want +got):\n%s", diff)
			}
			assertEcho(t, other, "other")
		})
	}
	if _, err := os.Stat(filepath.Join(hostDir, "pwned")); !os.IsNotExist(err) {
		t.Errorf("a function wrote into %s (stat error %v)", hostDir, err)
	}
}

func acceptAll(l net.Listener) {
	for {
		c, err := l.Accept()
		if err != nil {
			return
		}
		_ = c.Close()
	}
}

// TestPythonGrandchildDiesWithWorker: a process a function starts in a new
// session dies when the function's worker is killed (here, while the call that
// started it still runs; TestLeftoversAreKilled covers one left after a call).
func TestPythonGrandchildDiesWithWorker(t *testing.T) {
	marker := "metalambda-grandchild-" + strconv.Itoa(os.Getpid())
	source := `import os
def sync(request):
    if os.fork() == 0:
        try:
            os.setsid()  # refused in a Landlock sandbox
        except OSError:
            pass
        if os.fork() == 0:
            os.execv("/usr/bin/sleep", [` + strconv.Quote(marker) + `, "600"])
        os._exit(0)
    os.wait()
    import time
    time.sleep(60)
    return {"started": True}
`
	c := mustCompile(t, NewPython(sandboxed(t, Options{PythonPoolSize: 1, DefaultTimeout: 90 * time.Second})), pyFn("grandchild", source))
	go func() { _, _ = c.Invoke(context.Background(), echoRequest("x")) }()
	waitUntil(t, func() bool { return len(processesNamed(marker)) == 1 }, "the grandchild to run")
	c.Close()
	waitUntil(t, func() bool { return len(processesNamed(marker)) == 0 }, "the grandchild to die")
}

// TestPythonReplyTooLarge: a function that floods its reply channel with 400 MiB
// without a newline fails with a size error, its worker killed, and the gateway
// does not buffer the flood.
func TestPythonReplyTooLarge(t *testing.T) {
	source := `import os, stat
def sync(request):
    if request["parent"]["metadata"]["name"] != "bad":
        return {"ok": True}
    chunk = b"x" * (1 << 20)
    for fd in range(3, 16):
        try:
            if not stat.S_ISFIFO(os.fstat(fd).st_mode):
                continue
            for _ in range(400):
                os.write(fd, chunk)
        except OSError:
            pass
    return {"flooded": False}
`
	rt := NewPython(sandboxed(t, Options{PythonPoolSize: 1, MaxReplyBytes: 4 << 20}))
	c := mustCompile(t, rt, pyFn("flood", source))
	other := mustCompile(t, rt, pyFn("other", pyEcho))
	var before, after runtime.MemStats
	runtime.ReadMemStats(&before)
	_, err := invoke(t, c, echoRequest("bad"))
	runtime.ReadMemStats(&after)
	assertInvokeError(t, err, ReasonBadReturn, "larger than the limit of 4194304 bytes")
	// TotalAlloc counts the whole test process (other tests' idle workers too), so the
	// bound is loose; reading the 400 MiB line whole would allocate over 400 MiB, the
	// bounded reader about 20 MiB.
	grew := after.TotalAlloc - before.TotalAlloc
	t.Logf("the gateway allocated %.1f MiB reading the flood", float64(grew)/(1<<20))
	if grew > 200<<20 {
		t.Errorf("the gateway allocated %d MiB reading a 400 MiB flood, want under 200 MiB", grew>>20)
	}
	if _, err := invoke(t, c, echoRequest("good")); err != nil {
		t.Errorf("after the flood: %v", err)
	}
	assertEcho(t, other, "other")
}

// TestPythonMemoryBomb: a function that allocates without end stops at its
// address-space limit, and the next call gets a fresh worker.
func TestPythonMemoryBomb(t *testing.T) {
	rt := NewPython(sandboxed(t, Options{PythonPoolSize: 1, PythonMemoryLimit: 128 << 20}))
	bomb := mustCompile(t, rt, pyFn("bomb", pyEchoUnless("hoard = [bytearray(8 << 20) for _ in range(1 << 20)]")))
	other := mustCompile(t, rt, pyFn("other", pyEcho))
	_, err := invoke(t, bomb, echoRequest("bad"))
	assertInvokeError(t, err, ReasonException, "MemoryError")
	assertEcho(t, bomb, "after")
	assertEcho(t, other, "other")
}

// TestPythonSandboxMissing: without its sandbox the runtime refuses to compile,
// naming what is missing, unless the sandbox is explicitly turned off. Where
// bubblewrap is missing, the default sandbox is Landlock, so the refusal is proved
// where neither works, by TestNoSandboxMechanism in a child of
// TestLandlockSandbox.
func TestPythonSandboxMissing(t *testing.T) {
	c, err := NewPython(sandboxed(t, Options{})).Compile(pyFn("probe", pyEcho))
	if err != nil {
		t.Fatalf("the Python tests need the sandbox (bubblewrap, util-linux): %v", err)
	}
	c.Close()
	t.Setenv("PATH", t.TempDir())
	insecure := mustCompile(t, NewPython(Options{PythonBinary: "/usr/bin/python3", InsecureNoSandbox: true}), pyFn("insecure", pyEcho))
	assertEcho(t, insecure, "insecure")
}

func waitUntil(t *testing.T, cond func() bool, what string) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// processesNamed returns the processes whose argv[0] is name.
func processesNamed(name string) []string {
	paths, _ := filepath.Glob("/proc/[0-9]*/cmdline")
	var pids []string
	for _, p := range paths {
		raw, err := os.ReadFile(p)
		if err == nil && strings.HasPrefix(string(raw), name+"\x00") {
			pids = append(pids, filepath.Base(filepath.Dir(p)))
		}
	}
	return pids
}

// TestPythonNetwork: a worker reaches a listener on the host's loopback only when
// its Function asks for the network.
func TestPythonNetwork(t *testing.T) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	go acceptAll(l)
	source := pyAttempts + "\ndef sync(request):\n    return {\"listener\": connect(" + strconv.Itoa(l.Addr().(*net.TCPAddr).Port) + ")}\n"
	rt := NewPython(sandboxed(t, Options{PythonPoolSize: 1}))
	for _, tt := range []struct {
		network bool
		want    string
	}{
		{false, map[bool]string{false: "ConnectionRefusedError", true: "PermissionError"}[inLandlockChild()]},
		{true, "connected"},
	} {
		fn := pyFn("network-"+strconv.FormatBool(tt.network), source)
		fn.Network = tt.network
		c := mustCompile(t, rt, fn)
		res, err := invoke(t, c, echoRequest("x"))
		c.Close()
		if err != nil {
			t.Fatal(err)
		}
		var got map[string]any
		if err := json.Unmarshal(res.Response, &got); err != nil {
			t.Fatal(err)
		}
		if got["listener"] != tt.want {
			t.Errorf("network %v: connecting to the host's loopback gave %v, want %s", tt.network, got["listener"], tt.want)
		}
	}
}

// ownUsersDir is the directory of a worker with a user of its own (a Landlock
// sandbox of a root caller): the one in the gateway's commands' directory that
// the worker's user owns.
func ownUsersDir(pid int) (string, error) {
	raw, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/status")
	if err != nil {
		return "", err
	}
	uid := ""
	for _, line := range strings.Split(string(raw), "\n") {
		if rest, ok := strings.CutPrefix(line, "Uid:"); ok {
			uid = strings.Fields(rest)[0]
		}
	}
	dirs, _ := filepath.Glob(filepath.Join(os.TempDir(), "metalambda-workers", "metalambda-worker-*"))
	for _, dir := range dirs {
		if fi, err := os.Stat(dir); err == nil && strconv.Itoa(int(fi.Sys().(*syscall.Stat_t).Uid)) == uid {
			return dir, nil
		}
	}
	return "", fmt.Errorf("no directory of worker %d's user %s in %v", pid, uid, dirs)
}
