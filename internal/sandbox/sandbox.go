// Package sandbox starts commands that run untrusted code under kernel bounds, with
// bubblewrap (bwrap): their own user, PID, mount, network, IPC, UTS and cgroup
// namespaces, no capabilities, no_new_privs, a read-only view of only the system
// directories and the paths a command needs, a private size-bounded /tmp, a /proc
// of their own PID namespace, and rlimits (address space, processes, open files,
// file size) set by prlimit before the command starts. Every descendant of a
// sandboxed command lives in its PID namespace, so it dies when the command's
// bwrap process is killed.
package sandbox

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"
)

// Defaults of Options and Limits.
const (
	DefaultBwrap     = "bwrap"
	DefaultPrlimit   = "prlimit"
	DefaultUID       = 65534
	DefaultGID       = 65534
	DefaultProcesses = 32
	DefaultOpenFiles = 256
	DefaultFileSize  = 16 << 20
	DefaultTmpSize   = 16 << 20
)

// Options configures a Sandbox. The zero value takes the documented defaults.
type Options struct {
	// Bwrap is the bubblewrap binary (default "bwrap", looked up in PATH).
	Bwrap string
	// Prlimit is util-linux's prlimit (default "prlimit", looked up in PATH); it
	// must lie under /usr, which every sandbox sees.
	Prlimit string
	// UID and GID are the user that sandboxed commands run as, inside their user
	// namespace and, when the caller is root and can hand the command's paths to
	// that user, on the host (default 65534, nobody).
	UID, GID int
}

// Limits are the kernel bounds of one sandboxed command; a zero field takes its
// default, a negative one means no limit.
type Limits struct {
	// AddressSpace is RLIMIT_AS in bytes (default none).
	AddressSpace int64
	// Processes is RLIMIT_NPROC, counted in the command's own user namespace
	// (default 32).
	Processes int64
	// OpenFiles is RLIMIT_NOFILE (default 256).
	OpenFiles int64
	// FileSize is RLIMIT_FSIZE in bytes (default 16 MiB).
	FileSize int64
	// TmpSize bounds the private /tmp (default 16 MiB).
	TmpSize int64
}

func (l Limits) withDefaults() Limits {
	def := func(v *int64, d int64) {
		if *v == 0 {
			*v = d
		}
	}
	def(&l.AddressSpace, -1)
	def(&l.Processes, DefaultProcesses)
	def(&l.OpenFiles, DefaultOpenFiles)
	def(&l.FileSize, DefaultFileSize)
	def(&l.TmpSize, DefaultTmpSize)
	return l
}

// Spec is one command to run in a sandbox.
type Spec struct {
	// Args is the command (an absolute path inside the sandbox) and its arguments.
	Args []string
	// Env is the command's whole environment.
	Env []string
	// ReadOnly are host paths the command sees read-only at the same path, beside
	// the system directories (/usr and the /bin, /lib, /lib64 and /sbin links).
	ReadOnly []string
	// Network keeps the host's network; otherwise the command has only its own
	// loopback.
	Network bool
	Limits  Limits
}

// Sandbox starts sandboxed commands; it is safe for concurrent use.
type Sandbox struct {
	bwrap    string
	prlimit  string
	uid, gid int
	root     bool // the caller is root

	mu        sync.Mutex
	reachable map[string]bool // host path: readable by uid/gid without privilege
}

// New finds bubblewrap and prlimit and checks that bubblewrap can build a sandbox
// here; the error names what is missing.
func New(opts Options) (*Sandbox, error) {
	if opts.Bwrap == "" {
		opts.Bwrap = DefaultBwrap
	}
	if opts.Prlimit == "" {
		opts.Prlimit = DefaultPrlimit
	}
	if opts.UID == 0 {
		opts.UID = DefaultUID
	}
	if opts.GID == 0 {
		opts.GID = DefaultGID
	}
	bwrap, err := exec.LookPath(opts.Bwrap)
	if err != nil {
		return nil, fmt.Errorf("sandbox: bubblewrap (%s) not found: install the bubblewrap package: %w", opts.Bwrap, err)
	}
	prlimit, err := exec.LookPath(opts.Prlimit)
	if err != nil {
		return nil, fmt.Errorf("sandbox: prlimit (%s) not found: install util-linux: %w", opts.Prlimit, err)
	}
	if prlimit, err = filepath.EvalSymlinks(prlimit); err != nil || !strings.HasPrefix(prlimit, "/usr/") {
		return nil, fmt.Errorf("sandbox: prlimit %s is not under /usr, which is all a sandbox sees of the system", opts.Prlimit)
	}
	if err := checkUserNamespaces(); err != nil {
		return nil, err
	}
	closeOnExecInherited()
	s := &Sandbox{bwrap: bwrap, prlimit: prlimit, uid: opts.UID, gid: opts.GID, root: os.Geteuid() == 0, reachable: map[string]bool{}}
	if err := s.probe(); err != nil {
		return nil, err
	}
	return s, nil
}

// checkUserNamespaces reports the kernel settings that forbid the user namespaces
// bubblewrap needs.
func checkUserNamespaces() error {
	if raw, err := os.ReadFile("/proc/sys/user/max_user_namespaces"); err == nil && strings.TrimSpace(string(raw)) == "0" {
		return errors.New("sandbox: user namespaces are disabled (/proc/sys/user/max_user_namespaces is 0)")
	}
	if raw, err := os.ReadFile("/proc/sys/kernel/unprivileged_userns_clone"); err == nil && strings.TrimSpace(string(raw)) == "0" && os.Geteuid() != 0 {
		return errors.New("sandbox: unprivileged user namespaces are disabled (/proc/sys/kernel/unprivileged_userns_clone is 0)")
	}
	return nil
}

// closeOnExecInherited marks the descriptors above stderr that this process
// inherited open across exec as close-on-exec: bubblewrap passes every open
// descriptor on to the sandboxed command, and Go opens its own with O_CLOEXEC.
func closeOnExecInherited() {
	entries, err := os.ReadDir("/proc/self/fd")
	if err != nil {
		return
	}
	for _, e := range entries {
		if fd, err := strconv.Atoi(e.Name()); err == nil && fd > 2 {
			syscall.CloseOnExec(fd)
		}
	}
}

// probe runs prlimit --version in a sandbox.
func (s *Sandbox) probe() error {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	cmd := s.CommandContext(ctx, Spec{Args: []string{s.prlimit, "--version"}})
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	if err := cmd.Run(); err != nil {
		return fmt.Errorf("sandbox: bubblewrap cannot build a sandbox here (%s: %w): %s", s.bwrap, err, strings.TrimSpace(stderr.String()))
	}
	return nil
}

// Command returns the command that runs spec in a sandbox. Killing its process
// (or its process group: it leads one) kills everything the command started.
func (s *Sandbox) Command(spec Spec) *exec.Cmd {
	return s.CommandContext(context.Background(), spec)
}

// CommandContext is Command with a context that kills the sandbox when done.
func (s *Sandbox) CommandContext(ctx context.Context, spec Spec) *exec.Cmd {
	cmd := exec.CommandContext(ctx, s.bwrap, s.args(spec)...)
	cmd.Env = spec.Env
	if cmd.Env == nil {
		cmd.Env = []string{}
	}
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGKILL}
	if s.root && s.allReachable(spec.ReadOnly) {
		cmd.SysProcAttr.Credential = &syscall.Credential{Uid: uint32(s.uid), Gid: uint32(s.gid), Groups: []uint32{}}
	}
	return cmd
}

// UnprivilegedOnHost reports whether a command that needs paths runs as
// Options.UID on the host too: always when the caller is not root; when it is
// root, only if that user can read the paths without privilege (otherwise bwrap
// runs as root, and the command's user namespace maps its user onto root, still
// without any capability).
func (s *Sandbox) UnprivilegedOnHost(paths []string) bool {
	return !s.root || s.allReachable(paths)
}

func (s *Sandbox) args(spec Spec) []string {
	l := spec.Limits.withDefaults()
	a := []string{
		"--unshare-all", "--unshare-user", "--die-with-parent", "--new-session", "--cap-drop", "ALL",
		"--uid", strconv.Itoa(s.uid), "--gid", strconv.Itoa(s.gid), "--disable-userns",
		"--hostname", "sandbox",
		"--ro-bind", "/usr", "/usr",
	}
	if spec.Network {
		a = append(a, "--share-net")
	}
	a = append(a, systemLinks()...)
	a = append(a, "--proc", "/proc")
	for _, dev := range []string{"/dev/null", "/dev/zero", "/dev/full", "/dev/random", "/dev/urandom"} {
		a = append(a, "--dev-bind", dev, dev)
	}
	a = append(a, "--size", strconv.FormatInt(l.TmpSize, 10), "--tmpfs", "/tmp")
	if spec.Network {
		a = append(a, networkFiles()...)
	}
	for _, p := range spec.ReadOnly {
		a = append(a, "--ro-bind", p, p)
	}
	a = append(a, "--remount-ro", "/", "--chdir", "/tmp", "--", s.prlimit)
	a = append(a, rlimit("as", l.AddressSpace), rlimit("nproc", l.Processes), rlimit("nofile", l.OpenFiles), rlimit("fsize", l.FileSize), "--core=0", "--")
	return append(a, spec.Args...)
}

func rlimit(name string, v int64) string {
	if v < 0 {
		return "--" + name + "=unlimited"
	}
	return "--" + name + "=" + strconv.FormatInt(v, 10)
}

// systemLinks reproduces /bin, /lib, /lib64 and /sbin: links into /usr on a
// merged-/usr system, read-only binds otherwise.
func systemLinks() []string {
	var a []string
	for _, dir := range []string{"/bin", "/lib", "/lib64", "/sbin"} {
		fi, err := os.Lstat(dir)
		switch {
		case err != nil:
		case fi.Mode()&os.ModeSymlink != 0:
			if target, err := os.Readlink(dir); err == nil {
				a = append(a, "--symlink", target, dir)
			}
		case fi.IsDir():
			a = append(a, "--ro-bind", dir, dir)
		}
	}
	return a
}

// networkFiles are the files name resolution and TLS need, for a sandbox that
// keeps the network.
func networkFiles() []string {
	var a []string
	for _, p := range []string{"/etc/resolv.conf", "/etc/hosts", "/etc/nsswitch.conf", "/etc/ssl", "/etc/ca-certificates"} {
		if _, err := os.Stat(p); err == nil {
			a = append(a, "--ro-bind", p, p)
		}
	}
	return a
}

// allReachable reports whether uid/gid can read every path (and traverse to it)
// without privilege.
func (s *Sandbox) allReachable(paths []string) bool {
	for _, p := range paths {
		if !s.pathReachable(p) {
			return false
		}
	}
	return true
}

func (s *Sandbox) pathReachable(p string) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	ok, known := s.reachable[p]
	if !known {
		ok = readableBy(p, uint32(s.uid), uint32(s.gid))
		s.reachable[p] = ok
	}
	return ok
}

// readableBy checks the mode bits of p and of every directory above it for uid
// and gid (supplementary groups are dropped in a sandbox).
func readableBy(p string, uid, gid uint32) bool {
	p, err := filepath.EvalSymlinks(p)
	if err != nil {
		return false
	}
	for dir := filepath.Dir(p); ; dir = filepath.Dir(dir) {
		if !permits(dir, uid, gid, 1) {
			return false
		}
		if dir == "/" {
			break
		}
	}
	if fi, err := os.Stat(p); err == nil && fi.IsDir() && !permits(p, uid, gid, 1) {
		return false
	}
	return permits(p, uid, gid, 4)
}

// permits reports whether the mode of path grants bit (4 read, 1 execute/search)
// to uid/gid.
func permits(path string, uid, gid uint32, bit os.FileMode) bool {
	fi, err := os.Stat(path)
	if err != nil {
		return false
	}
	st, ok := fi.Sys().(*syscall.Stat_t)
	if !ok {
		return false
	}
	mode := fi.Mode().Perm()
	switch {
	case st.Uid == uid:
		return mode&(bit<<6) != 0
	case st.Gid == gid:
		return mode&(bit<<3) != 0
	default:
		return mode&bit != 0
	}
}
