package sandbox

import (
	"cmp"
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"time"

	llsyscall "github.com/landlock-lsm/go-landlock/landlock/syscall"
	"golang.org/x/sys/unix"
)

// MinLandlockABI is the oldest Landlock ABI a Landlock sandbox accepts: version 6
// (Linux 6.12) scopes signals and abstract UNIX sockets, without which a command
// running as the gateway's user could signal the gateway.
const MinLandlockABI = 6

// workerDirPrefix starts the name of a Landlock command's directory, under the
// system's temporary directory.
const workerDirPrefix = "metalambda-worker-"

// landlockABI is the kernel's Landlock ABI version; the error says why there is
// none.
func landlockABI() (int, error) {
	abi, err := llsyscall.LandlockGetABIVersion()
	switch {
	case errors.Is(err, syscall.ENOSYS):
		return 0, errors.New("the kernel has no Landlock (landlock_create_ruleset: ENOSYS; it needs CONFIG_SECURITY_LANDLOCK)")
	case errors.Is(err, syscall.EOPNOTSUPP):
		return 0, errors.New("the kernel has Landlock turned off (landlock_create_ruleset: EOPNOTSUPP; add landlock to its lsm= boot parameter)")
	case err != nil:
		return 0, fmt.Errorf("landlock_create_ruleset: %w", err)
	}
	return abi, nil
}

// newLandlock builds a Landlock sandbox and runs a probe in it.
func newLandlock(opts Options) (*Sandbox, error) {
	abi, err := landlockABI()
	if err != nil {
		return nil, fmt.Errorf("sandbox: %w", err)
	}
	if abi < MinLandlockABI {
		return nil, fmt.Errorf("sandbox: the kernel's Landlock ABI is version %d; version %d (Linux 6.12) is needed to scope signals and abstract UNIX sockets", abi, MinLandlockABI)
	}
	s := &Sandbox{mode: ModeLandlock, uidBase: opts.UIDBase, privileged: os.Geteuid() == 0, landlockABI: abi, zygotes: &zygoteSet{}}
	if s.privileged {
		if err := checkRootCapabilities(); err != nil {
			return nil, err
		}
		if s.workersDir, err = makeWorkersDir(os.TempDir()); err != nil {
			return nil, err
		}
	}
	for i, network := range []bool{false, true} {
		if s.landlockFilters[i], err = landlockFilter(network); err != nil {
			return nil, err
		}
	}
	if s.landlockFilters[0] == nil {
		return nil, errors.New("sandbox: no seccomp filter for this architecture, which a Landlock sandbox needs to keep descendants in their process group")
	}
	if s.launcher, err = launcherPath(opts.Launcher); err != nil {
		return nil, err
	}
	if s.worker, s.workers, err = workerPaths(opts.Worker, opts.Workers); err != nil {
		return nil, err
	}
	s.cgroups = newCgroups()
	closeOnExecInherited()
	s.removeLeftDirs()
	if err := s.probeLandlock(); err != nil {
		s.Close()
		return nil, err
	}
	return s, nil
}

// rootCapabilities are what a root caller of a Landlock sandbox needs: to start
// each command as a user of its own (setgroups, setgid, setuid), and to kill
// the commands, which run as other users.
var rootCapabilities = []string{"CAP_SETUID", "CAP_SETGID", "CAP_KILL"}

// checkRootCapabilities names the capabilities of rootCapabilities that the
// calling root process lacks: such a caller would have its commands run as
// root, whom no process limit bounds, so it is refused.
func checkRootCapabilities() error {
	have, err := effectiveCapabilities()
	if err != nil {
		return fmt.Errorf("sandbox: reading the capabilities of the process: %w", err)
	}
	var missing []string
	for _, name := range rootCapabilities {
		n, _ := capabilityNumbers([]string{name})
		if have&(1<<n[0]) == 0 {
			missing = append(missing, name)
		}
	}
	if len(missing) > 0 {
		return fmt.Errorf("sandbox: running as root without %s: a Landlock sandbox of a root caller runs each command as a user of its own, which needs %s; add them to the container's securityContext.capabilities, or run as a user that is not root (whose commands then share its user and process limit)",
			strings.Join(missing, ", "), strings.Join(rootCapabilities, ", "))
	}
	return nil
}

// effectiveCapabilities is the effective capability set of the process.
func effectiveCapabilities() (uint64, error) {
	raw, err := os.ReadFile("/proc/self/status")
	if err != nil {
		return 0, err
	}
	for _, line := range strings.Split(string(raw), "\n") {
		if v, ok := strings.CutPrefix(line, "CapEff:"); ok {
			return strconv.ParseUint(strings.TrimSpace(v), 16, 64)
		}
	}
	return 0, errors.New("no CapEff in /proc/self/status")
}

// workersDirName is the directory, under the system's temporary directory, that
// a root caller's Landlock commands make their directories in.
const workersDirName = "metalambda-workers"

// makeWorkersDir makes tmp's workersDirName, the caller's own, with the mode
// 1733: each command's launcher, already its own user, makes its directory
// there; no user may list it, and none may remove or rename what another made.
// Once bounded, a command reaches no part of it but its own directory.
func makeWorkersDir(tmp string) (string, error) {
	dir := filepath.Join(tmp, workersDirName)
	if err := os.Mkdir(dir, 0o700); err != nil && !errors.Is(err, os.ErrExist) {
		return "", fmt.Errorf("sandbox: the commands' directory: %w", err)
	}
	fi, err := os.Lstat(dir)
	if err != nil {
		return "", fmt.Errorf("sandbox: the commands' directory: %w", err)
	}
	if st, ok := fi.Sys().(*syscall.Stat_t); !fi.IsDir() || !ok || int(st.Uid) != os.Geteuid() {
		return "", fmt.Errorf("sandbox: %s is not a directory of user %d: remove it", dir, os.Geteuid())
	}
	if err := os.Chmod(dir, 0o733|os.ModeSticky); err != nil {
		return "", fmt.Errorf("sandbox: the commands' directory: %w", err)
	}
	return dir, nil
}

// LauncherExecutable is the name of the smallest executable
// (cmd/metalambda-launcher) that launches sandboxed commands: installed beside
// the caller's, it is the default launcher. It links this package alone, so it
// starts in about a third of the processor time of WorkerExecutable (the Go
// runtime initializes every package an executable links before the launcher's
// turn comes), and a Python zygote's launcher, which stays its parent, holds
// less memory.
const LauncherExecutable = "metalambda-launcher"

// WorkerExecutable is the name of the small executable (cmd/metalambda-worker)
// that the runtimes start their JavaScript and Jsonnet workers from, installed
// beside the caller's: it links this package and the runtimes' workers but not
// the rest of the gateway. It launches too, where LauncherExecutable is not
// installed.
const WorkerExecutable = "metalambda-worker"

// launcherPath is the launcher's absolute path: when launcher is empty,
// LauncherExecutable beside the running executable, else WorkerExecutable
// there, else the running executable itself.
func launcherPath(launcher string) (string, error) {
	path, err := executablePath(launcher, LauncherExecutable, WorkerExecutable)
	if err != nil {
		return "", fmt.Errorf("sandbox: finding the executable that launches sandboxed commands: %w", err)
	}
	return path, nil
}

// WorkerRuntimes are the runtimes whose workers are Go executables: the
// JavaScript and Jsonnet runtimes of internal/gateway/lambda.
var WorkerRuntimes = []string{"javascript", "jsonnet"}

// WorkerExecutableFor is the name of the executable that serves runtime's
// workers alone: cmd/metalambda-worker built without the other runtime (build
// tags nojavascript, nojsonnet). Installed beside the caller's, it is started in
// place of WorkerExecutable: a Go program initializes every package it links at
// each start, so a Jsonnet worker that does not link the JavaScript runtime
// starts in 4 ms less processor time and holds 0.5 MiB less memory of its own.
func WorkerExecutableFor(runtime string) string {
	return WorkerExecutable + "-" + runtime
}

// workerPaths are the Go workers' executables' absolute paths, the general one
// and those of WorkerRuntimes (workerPathsBeside the running executable).
func workerPaths(worker string, workers map[string]string) (general string, byRuntime map[string]string, err error) {
	self, err := os.Executable()
	if err != nil {
		return "", nil, fmt.Errorf("sandbox: finding the executable of the JavaScript and Jsonnet workers: %w", err)
	}
	return workerPathsBeside(self, worker, workers)
}

// workerPathsBeside are workerPaths for the executable self. The general one is
// worker, else WorkerExecutable beside self, else self; a runtime's is
// workers[runtime], else the general one when worker is set, else
// WorkerExecutableFor(runtime) beside self, else the general one.
func workerPathsBeside(self, worker string, workers map[string]string) (general string, byRuntime map[string]string, err error) {
	general = worker
	if general == "" {
		general = besideOrSelf(self, WorkerExecutable)
	}
	if general, err = executablePath(general); err != nil {
		return "", nil, fmt.Errorf("sandbox: finding the executable of the JavaScript and Jsonnet workers: %w", err)
	}
	byRuntime = make(map[string]string, len(WorkerRuntimes))
	for _, rt := range WorkerRuntimes {
		exe := workers[rt]
		if exe == "" {
			exe = general
			if own := besideOrSelf(self, WorkerExecutableFor(rt)); worker == "" && own != self {
				exe = own
			}
		}
		if byRuntime[rt], err = executablePath(exe); err != nil {
			return "", nil, fmt.Errorf("sandbox: finding the executable of the %s workers: %w", rt, err)
		}
	}
	return general, byRuntime, nil
}

// executablePath is exe, or when it is empty the first of names beside the
// running executable, else the running executable; absolute, its symbolic
// links resolved.
func executablePath(exe string, names ...string) (string, error) {
	var err error
	if exe == "" {
		exe, err = os.Executable()
		if err == nil {
			exe = besideOrSelf(exe, names...)
		}
	}
	if err == nil {
		exe, err = filepath.Abs(exe)
	}
	if err == nil {
		exe, err = filepath.EvalSymlinks(exe)
	}
	return exe, err
}

// besideOrSelf is the first of names in self's directory that is an
// executable file there, owned by root or this process's user and writable by
// no one else, else self: a file another user could have put there or changed
// is not started for every worker.
func besideOrSelf(self string, names ...string) string {
	for _, name := range names {
		path := filepath.Join(filepath.Dir(self), name)
		fi, err := os.Stat(path)
		if err != nil || !fi.Mode().IsRegular() || fi.Mode().Perm()&0o111 == 0 || fi.Mode().Perm()&0o022 != 0 {
			continue
		}
		if st, ok := fi.Sys().(*syscall.Stat_t); ok && (st.Uid == 0 || int(st.Uid) == os.Geteuid()) {
			return path
		}
	}
	return self
}

// probeLandlock starts a launcher that bounds itself and exits.
func (s *Sandbox) probeLandlock() error {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	cmd, err := s.CommandContext(ctx, Spec{})
	if err != nil {
		return err
	}
	out, err := output(cmd)
	if err != nil {
		return fmt.Errorf("sandbox: a Landlock sandbox cannot start here (%s: %w): %s", s.launcher, err, strings.TrimSpace(out))
	}
	return nil
}

// output runs a command of Command and returns what it wrote.
func output(cmd *Command) (string, error) {
	var out strings.Builder
	cmd.Stdout, cmd.Stderr = &out, &out
	if err := cmd.Start(); err != nil {
		return "", err
	}
	err := cmd.Wait()
	return out.String(), err
}

// landlockCommand is CommandContext for a Landlock sandbox: the launcher, which
// bounds itself and executes spec.Args in a directory of its own.
func (s *Sandbox) landlockCommand(ctx context.Context, spec Spec) (*Command, error) {
	l := spec.Limits.withDefaults()
	uid := 0
	if s.privileged {
		var err error
		if uid, err = s.takeUID(); err != nil {
			return nil, err
		}
	}
	dir := filepath.Join(cmp.Or(s.workersDir, os.TempDir()), workerDirPrefix+randomName())
	readOnly := spec.ReadOnly
	if spec.Network {
		readOnly = append(networkFiles(), readOnly...)
	}
	filter := s.landlockFilters[0]
	if spec.Network {
		filter = s.landlockFilters[1]
	}
	cg, err := s.cgroups.create(l)
	if err != nil {
		releaseUID(uid)
		return nil, err
	}
	env := append(withoutVars(spec.Env, "TMPDIR", "PWD"), "TMPDIR="+dir, "PWD="+dir)
	lc := launch{Args: spec.Args, Env: env, Dir: dir, Landlock: true, ReadOnly: readOnly, Network: spec.Network, Filter: filter, Limits: &l, Cgroups: len(cg.procs())}
	// The launcher makes the directory as the command's user: a root caller's
	// command has a user of its own, which alone owns anything in it.
	lc.MakeDir = true
	cmd, err := launcherCommand(ctx, s.launcher, lc, cg)
	if err != nil {
		releaseUID(uid)
		cg.remove()
		return nil, err
	}
	c := &Command{Cmd: cmd, dir: dir, cgroup: cg, uid: uid}
	if s.privileged {
		cmd.SysProcAttr.Credential = &syscall.Credential{Uid: uint32(uid), Gid: uint32(uid), Groups: []uint32{}}
		c.launcher = s.launcher
	}
	return c, nil
}

// launcherCommand starts launcher with l on its descriptor 3 and the cgroup.procs
// files of cg after it, in a process group of its own that dies with the
// caller's thread, with an empty environment.
func launcherCommand(ctx context.Context, launcher string, l launch, cg *cgroup) (*exec.Cmd, error) {
	l.Protocol = launchProtocol
	raw, err := json.Marshal(l)
	if err != nil {
		return nil, err
	}
	r, err := filterPipe(raw)
	if err != nil {
		return nil, fmt.Errorf("sandbox: handing the launch over: %w", err)
	}
	files := []*os.File{r}
	for _, p := range cg.procs() {
		f, err := os.OpenFile(p, os.O_WRONLY, 0)
		if err != nil {
			for _, f := range files {
				f.Close()
			}
			return nil, fmt.Errorf("sandbox: the command's cgroup: %w", err)
		}
		files = append(files, f)
	}
	cmd := exec.CommandContext(ctx, launcher, LauncherMarker)
	cmd.ExtraFiles = files
	cmd.Env = []string{}
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGKILL}
	return cmd, nil
}

func randomName() string {
	b := make([]byte, 12)
	_, _ = rand.Read(b)
	return hex.EncodeToString(b)
}

// withoutVars is env without the variables named.
func withoutVars(env []string, names ...string) []string {
	out := make([]string, 0, len(env)+len(names))
	for _, kv := range env {
		name, _, _ := strings.Cut(kv, "=")
		if !slices.Contains(names, name) {
			out = append(out, kv)
		}
	}
	return out
}

// removeWorkerDir removes a Landlock command's directory once the command has
// exited. Landlock does not confine chmod: the command may have taken the
// modes of its directory, or of one it made there, and a caller that is not
// root, whose user the command ran as, holds no more rights on them than it
// did. The directories are made the caller's own (0700) again, and removed. A
// root caller changes no modes (a path in the directory may since have become
// a link to one outside), and holds no CAP_DAC_OVERRIDE in a container: the
// command's launcher, started again as the command's user (owner), removes
// what the caller cannot.
func (c *Command) removeWorkerDir() {
	if os.RemoveAll(c.dir) == nil {
		return
	}
	if c.launcher != "" {
		removeAs(c.launcher, c.SysProcAttr.Credential, c.dir)
		return
	}
	if os.Geteuid() != 0 {
		ownDirs(c.dir)
		_ = os.RemoveAll(c.dir)
	}
}

// removeLeftDirs removes the directories of a root caller's commands that a
// previous caller left in workersDir (it ended before them: a crash, a
// container restarted on the same emptyDir), each as its owner. A directory
// whose owner runs a process belongs to a live command (of another sandbox
// sharing the directory) and is left.
func (s *Sandbox) removeLeftDirs() {
	if s.workersDir == "" {
		return
	}
	entries, _ := os.ReadDir(s.workersDir)
	for _, e := range entries {
		dir := filepath.Join(s.workersDir, e.Name())
		fi, err := os.Lstat(dir)
		if err != nil || !fi.IsDir() || !strings.HasPrefix(e.Name(), workerDirPrefix) {
			continue
		}
		uid := fi.Sys().(*syscall.Stat_t).Uid
		if n, _ := userTasks(int(uid)); n > 0 {
			continue
		}
		if os.RemoveAll(dir) != nil {
			removeAs(s.launcher, &syscall.Credential{Uid: uid, Gid: uid, Groups: []uint32{}}, dir)
		}
	}
}

// removeAs runs launcher as owner to remove dir (launch.Remove).
func removeAs(launcher string, owner *syscall.Credential, dir string) {
	cmd, err := launcherCommand(context.Background(), launcher, launch{Remove: dir}, nil)
	if err != nil {
		return
	}
	cmd.SysProcAttr.Credential = owner
	_ = cmd.Start()
	closeExtraFiles(cmd)
	if cmd.Process != nil {
		_ = cmd.Wait()
	}
}

// ownDirs gives dir and the directories below it the mode 0700; links are not
// followed.
func ownDirs(dir string) {
	if os.Chmod(dir, 0o700) != nil {
		return
	}
	entries, _ := os.ReadDir(dir)
	for _, e := range entries {
		if e.IsDir() {
			ownDirs(filepath.Join(dir, e.Name()))
		}
	}
}

// WaitExit returns once the process pid, a child of this process, has exited,
// without reaping it. It waits in the runtime's poller, holding no OS thread.
func WaitExit(pid int) {
	fd, err := unix.PidfdOpen(pid, unix.PIDFD_NONBLOCK)
	if errors.Is(err, unix.ESRCH) {
		return // already gone
	}
	if err != nil { // no descriptor to spare
		pollExit(pid, time.Second)
		return
	}
	f := os.NewFile(uintptr(fd), "pidfd")
	defer f.Close()
	rc, err := f.SyscallConn()
	if err != nil {
		return
	}
	// A pidfd becomes readable when its process exits.
	_ = rc.Read(func(fd uintptr) bool {
		n, err := unix.Poll([]unix.PollFd{{Fd: int32(fd), Events: unix.POLLIN}}, 0)
		return n > 0 || (err != nil && !errors.Is(err, unix.EINTR))
	})
}

// pollExit returns once the process pid, a child of this process, has exited
// (or was reaped), looking every interval without reaping it.
func pollExit(pid int, interval time.Duration) {
	for {
		var info unix.Siginfo
		err := unix.Waitid(unix.P_PID, pid, &info, unix.WEXITED|unix.WNOWAIT|unix.WNOHANG, nil)
		if err == unix.EINTR {
			continue
		}
		if err != nil || info.Signo != 0 { // reaped already, or exited
			return
		}
		time.Sleep(interval)
	}
}

// RestrictedCommand returns a command that runs args the way a container under
// the Pod Security restricted profile runs: as uid and gid (when the caller is
// root and uid is not 0), with no_new_privs and a seccomp filter that refuses new
// user namespaces as a container runtime's RuntimeDefault profile does for a
// process without CAP_SYS_ADMIN. withoutLandlock also refuses Landlock's system
// calls, as a kernel without Landlock. args[0] must be an executable that links
// this package: it serves as its own launcher. It lets tests prove what a
// gateway does there; start it with Start.
func RestrictedCommand(args []string, uid int, withoutLandlock bool) (*Command, error) {
	if len(args) == 0 {
		return nil, errors.New("sandbox: RestrictedCommand needs a command")
	}
	filter, err := runtimeDefaultFilter()
	if withoutLandlock {
		filter, err = noLandlockFilter()
	}
	if err != nil {
		return nil, err
	}
	if filter == nil {
		return nil, errors.New("sandbox: no seccomp filter for this architecture")
	}
	cmd, err := launcherCommand(context.Background(), args[0], launch{Args: args, KeepEnv: true, Filter: filter}, nil)
	if err != nil {
		return nil, err
	}
	if os.Geteuid() == 0 && uid != 0 {
		cmd.SysProcAttr.Credential = &syscall.Credential{Uid: uint32(uid), Gid: uint32(uid), Groups: []uint32{}}
	}
	return &Command{Cmd: cmd}, nil
}

// CappedRootCommand is RestrictedCommand for a caller that stays root but keeps
// only the capabilities caps (names such as "CAP_SETUID"), with no_new_privs,
// as a container with runAsUser 0, capabilities drop ALL and add caps, and
// allowPrivilegeEscalation false runs (the chart's gateway). args[0] must link
// this package. It lets tests prove what such a gateway does; start it with
// Start.
func CappedRootCommand(args []string, caps []string) (*Command, error) {
	if len(args) == 0 {
		return nil, errors.New("sandbox: CappedRootCommand needs a command")
	}
	if os.Geteuid() != 0 {
		return nil, errors.New("sandbox: CappedRootCommand needs a root caller")
	}
	filter, err := runtimeDefaultFilter()
	if err != nil {
		return nil, err
	}
	if filter == nil {
		return nil, errors.New("sandbox: no seccomp filter for this architecture")
	}
	numbers, err := capabilityNumbers(caps)
	if err != nil {
		return nil, err
	}
	cmd, err := launcherCommand(context.Background(), args[0], launch{Args: args, KeepEnv: true, SetUser: true, Capabilities: numbers, Filter: filter}, nil)
	if err != nil {
		return nil, err
	}
	return &Command{Cmd: cmd}, nil
}
