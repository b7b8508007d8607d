// Package sandbox starts commands that run untrusted code under kernel bounds,
// with one of two mechanisms (Mode).
//
// Namespaces (ModeNamespaces): bubblewrap (bwrap) gives a command its own PID,
// mount, network, IPC, UTS and cgroup namespaces, an unprivileged user, no
// capabilities, no_new_privs, a seccomp filter that refuses new user namespaces,
// a read-only view of only the system directories and the paths a command needs,
// a private size-bounded /tmp, a /proc of their own PID namespace, and rlimits
// (address space, processes, open files, file size) that the launcher (see
// Options.Launcher) sets before it executes the command. Every descendant of a sandboxed command lives in its PID
// namespace, so it dies when the command's bwrap process is killed.
//
// The user depends on the caller. When it is root, bwrap builds the namespaces as
// root (so that it can show paths only root can reach, such as an interpreter
// under /root) and the launcher drops to a user of its own for each command, taken
// from a range no account uses: the process limit then counts that command's
// processes alone, and no two commands share a user. Otherwise bwrap runs as the
// caller in a user namespace of its own (unprivileged user namespaces must be
// allowed), as Options.UID inside it, with further user namespaces disabled.
//
// Landlock (ModeLandlock), for where user namespaces are refused (a container
// under a RuntimeDefault seccomp profile, without CAP_SYS_ADMIN): the launcher
// (Options.Launcher) is started in a process group of its own; it sets no_new_privs, restricts itself with Landlock (read and
// execute on the system directories and the paths a command needs, read and
// write on a few devices and on a directory of the command's own; no TCP
// without network; signals and abstract UNIX sockets scoped to the command), sets
// the rlimits and a seccomp filter that also refuses setsid, setpgid and, without
// network, socket, then executes the command. Its descendants stay in its
// process group, so killing the group kills them all. The command runs as the
// caller's user, so the process limit counts beyond the tasks that user already
// runs; or, when the caller is root, as a user of its own, whose process limit
// counts its own tasks alone. A root caller needs only CAP_SETUID, CAP_SETGID
// and CAP_KILL for that (a container's root with every other capability
// dropped): each launcher is started as its command's user and makes the
// command's directory itself, in a directory of the caller's that anyone may
// write in but nobody list (mode 1733), and the caller removes it at exit by
// starting the launcher again as that user. ModeAuto (the default) takes
// namespaces where bubblewrap can build them and Landlock otherwise.
//
// A namespace sandbox of a root caller also runs commands that stand for a
// container (the local node's pods; see Spec.Binds and the fields after it):
// host directories bound at paths of their own, read-only or writable; a user
// and supplementary groups of the caller's choice instead of a user of its own
// (root among them, then with no capability but those the spec keeps, and with
// /proc's kernel settings read-only); a working directory; an existing network
// namespace, which nsenter starts bubblewrap in; and a hostname. A command found
// by name is looked up in its own PATH, inside the sandbox. Command.Signal
// signals the command itself, as a container runtime signals a container's
// first process, where Kill ends the sandbox whole.
package sandbox

import (
	"bytes"
	"cmp"
	"context"
	"debug/elf"
	"errors"
	"fmt"
	"math/rand/v2"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	"golang.org/x/sys/unix"
)

// Defaults of Options and Limits.
const (
	DefaultBwrap     = "bwrap"
	DefaultUID       = 65534
	DefaultGID       = 65534
	DefaultUIDBase   = 1 << 30
	uidSpan          = 1 << 20
	DefaultProcesses = 32
	DefaultOpenFiles = 256
	DefaultFileSize  = 16 << 20
	DefaultTmpSize   = 16 << 20
	DefaultMemory    = 512 << 20
	DefaultCPU       = 1000
)

// Mode is the mechanism a Sandbox bounds its commands with.
type Mode string

// Modes of Options.Mode.
const (
	// ModeAuto is ModeNamespaces where bubblewrap can build its namespaces, and
	// ModeLandlock otherwise.
	ModeAuto Mode = "auto"
	// ModeNamespaces runs commands under bubblewrap.
	ModeNamespaces Mode = "namespaces"
	// ModeLandlock runs commands as processes of the caller's user (of their own
	// user when the caller is root), bounded by Landlock, seccomp and rlimits.
	ModeLandlock Mode = "landlock"
)

// ParseMode parses a mode's name.
func ParseMode(name string) (Mode, error) {
	switch m := Mode(name); m {
	case ModeAuto, ModeNamespaces, ModeLandlock:
		return m, nil
	}
	return "", fmt.Errorf("unknown sandbox mode %q: want auto, namespaces or landlock", name)
}

// Options configures a Sandbox. The zero value takes the documented defaults.
type Options struct {
	// Mode is the mechanism (default ModeAuto).
	Mode Mode
	// Launcher is the executable that bounds each command and executes it; its
	// main must call ServeLauncher first (lambda.ServeWorker does) (default
	// LauncherExecutable beside the running executable, else WorkerExecutable
	// there, else the running executable).
	Launcher string
	// Worker is the executable that the runtimes start their JavaScript and
	// Jsonnet workers from; its main must call lambda.ServeWorker first
	// (default WorkerExecutable beside the running executable, else the
	// running executable).
	Worker string
	// Workers are the executables that the runtimes of WorkerRuntimes start
	// their workers from, by runtime (default Worker when it is set, else
	// WorkerExecutableFor(runtime) beside the running executable, else Worker's
	// default).
	Workers map[string]string
	// Bwrap is the bubblewrap binary (default "bwrap", looked up in PATH).
	Bwrap string
	// UID and GID are the user that sandboxed commands run as inside their user
	// namespace when the caller is not root (default 65534, nobody).
	UID, GID int
	// UIDBase starts the range of 2^20 users (and groups of the same number) that
	// commands run as when the caller is root (default 2^30).
	UIDBase int
}

// Limits are the kernel bounds of one sandboxed command; a zero field takes its
// default, a negative one means no limit.
type Limits struct {
	// AddressSpace is RLIMIT_AS in bytes (default none).
	AddressSpace int64
	// Processes is RLIMIT_NPROC (default 32), counted for the command's own user;
	// in a Landlock sandbox of a caller that is not root, whose commands share its
	// user, the limit is this many tasks beyond what the user runs when the command
	// starts.
	Processes int64
	// OpenFiles is RLIMIT_NOFILE (default 256).
	OpenFiles int64
	// FileSize is RLIMIT_FSIZE in bytes (default 16 MiB).
	FileSize int64
	// TmpSize bounds the private /tmp of a namespace sandbox (default 16 MiB); a
	// Landlock sandbox cannot bound its directory.
	TmpSize int64
	// Memory bounds the memory the command's processes hold together in bytes,
	// page cache, tmpfs and shared memory included, where the command gets a
	// cgroup (default AddressSpace when that is set, 512 MiB otherwise).
	Memory int64
	// CPU bounds the processor time of the command's processes together, in
	// thousandths of a core, where the command gets a cgroup (default 1000: one
	// core).
	CPU int64
	// Background starts the command at an eighth of the usual processor
	// weight (its cgroup's cpu.shares or cpu.weight), until Foreground: while
	// the processors are short, it yields them to the commands at the usual
	// weight, and takes what they leave. For work started ahead of need (a
	// spare worker), which would otherwise slow the work someone waits for.
	// Without a cgroup it changes nothing.
	Background bool
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
	if l.AddressSpace > 0 {
		def(&l.Memory, l.AddressSpace)
	}
	def(&l.Memory, DefaultMemory)
	def(&l.CPU, DefaultCPU)
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

	// The fields below serve commands that stand for a whole container (the
	// local node's pods); each needs a namespace sandbox whose caller is root.

	// Binds are host paths shown at a target path of their own, read-only unless
	// Writable, after ReadOnly and the private /tmp (a bind at /tmp hides it), in
	// order: a bind inside another's target comes after it.
	Binds []Bind
	// User is who the command runs as, instead of a user of its own. Its process
	// limit is then bounded by the command's cgroup alone: RLIMIT_NPROC counts
	// every process of a user, and this one may be shared (root, or a user named
	// by several commands).
	User *User
	// Dir is the command's working directory, made when missing and entered as
	// the command's user (default /tmp).
	Dir string
	// NetNS is a network namespace (a file such as /run/netns/<name>) the command
	// runs in, instead of a loopback of its own or the host's network (Network is
	// ignored); bubblewrap is started in it by nsenter.
	NetNS string
	// Capabilities are the capabilities the command keeps (CAP_NET_BIND_SERVICE
	// and the like; see CapabilityNames), in every set including the ambient one
	// so that they survive the execution of a command that is not root.
	Capabilities []string
	// Hostname is the name of the command's UTS namespace (default "sandbox").
	Hostname string
}

// Bind shows the host path Source at Target in a namespace sandbox. Target must
// be absolute, and may be neither ReservedDir, nor inside it, nor one of its
// parents (see ReservedTarget). bubblewrap follows symbolic links in Target
// and in Source: a caller that binds directories others can write in opens
// the source itself without following links and gives it as From, and
// refuses links on the way to Target (the local node's checkNoSymlinks).
type Bind struct {
	Source, Target string
	Writable       bool
	// From, when set, is Source already opened (O_PATH is enough): bubblewrap
	// binds what it refers to (--bind-fd), so that a link put in Source's
	// place after the caller opened it changes nothing. Command takes a
	// duplicate; the caller keeps From and closes it. bubblewrap closes its
	// copy before the command runs.
	From *os.File
}

// User is a user and its groups.
type User struct {
	UID, GID int
	// Groups are the supplementary groups.
	Groups []int
}

// forContainer reports whether spec asks for what only a namespace sandbox of a
// root caller gives.
func (spec Spec) forContainer() bool {
	return len(spec.Binds) > 0 || spec.User != nil || spec.Dir != "" || spec.NetNS != "" || len(spec.Capabilities) > 0 || spec.Hostname != ""
}

// Sandbox starts sandboxed commands; it is safe for concurrent use.
type Sandbox struct {
	bwrap      string
	nsenter    string // where found: starts bwrap in a network namespace (Spec.NetNS)
	uid, gid   int
	uidBase    int
	privileged bool              // the caller is root: see the package documentation
	workersDir string            // ModeLandlock of a root caller: where its commands make their directories
	filters    [2][]byte         // seccomp programs without and with network, nil when unknown for the architecture
	launcher   string            // the executable that bounds each command and executes it
	worker     string            // the executable of the Go workers (Options.Worker)
	workers    map[string]string // the executable of each of WorkerRuntimes
	cgroups    *cgroups          // where commands get a cgroup of their own; nil: nowhere

	mode            Mode      // ModeNamespaces or ModeLandlock
	landlockABI     int       // ModeLandlock: the kernel's Landlock ABI version
	landlockFilters [2][]byte // ModeLandlock: seccomp programs without and with network
	fallback        error     // ModeAuto chose Landlock: why namespaces did not work

	zygotes *zygoteSet // the zygotes s started, which Close ends

	// launcherDynamic: the launcher has an ELF interpreter (see
	// checkTargetInHostTrees).
	launcherDynamic bool
}

// bindFDErrors holds, per bubblewrap executable, why it cannot bind an open
// directory (Bind.From): nil when it can; found at the first such bind.
var bindFDErrors sync.Map

// checkBindFD reports whether s's bubblewrap has --bind-fd (0.10 and later;
// some distributions backport it to older versions).
func (s *Sandbox) checkBindFD() error {
	if err, ok := bindFDErrors.Load(s.bwrap); ok {
		err, _ := err.(error)
		return err
	}
	var err error
	if out, _ := exec.Command(s.bwrap, "--help").CombinedOutput(); !bytes.Contains(out, []byte("--bind-fd")) {
		err = fmt.Errorf("sandbox: bubblewrap (%s) has no --bind-fd, which binds an open directory without following links; install bubblewrap 0.10 or later", s.bwrap)
	}
	bindFDErrors.Store(s.bwrap, err)
	return err
}

// Mode is the mechanism of s: ModeNamespaces or ModeLandlock.
func (s *Sandbox) Mode() Mode {
	return s.mode
}

// SharesUser reports whether s's commands all run as one user (the caller's:
// ModeLandlock when the caller is not root), so that a per-user limit such as
// RLIMIT_NPROC counts the tasks of all of them together.
func (s *Sandbox) SharesUser() bool {
	return s.mode == ModeLandlock && !s.privileged
}

// Describe names s's mechanism as key/values for a log line, with why ModeAuto
// did not choose namespaces.
func (s *Sandbox) Describe() []any {
	kv := []any{"sandbox", string(s.mode), "launcher", s.launcher, "worker", s.worker}
	for _, rt := range WorkerRuntimes {
		if s.workers[rt] != s.worker {
			kv = append(kv, rt+"Worker", s.workers[rt])
		}
	}
	if s.mode == ModeLandlock {
		kv = append(kv, "landlockABI", s.landlockABI)
	}
	if s.fallback != nil {
		kv = append(kv, "namespacesUnavailable", s.fallback.Error())
	}
	if ok, why := s.Cgroups(); ok {
		kv = append(kv, "cgroups", s.cgroups.describe())
	} else {
		kv = append(kv, "cgroups", "none: processes are bounded by rlimits alone", "cgroupsUnavailable", why.Error())
	}
	return kv
}

// Launcher is the executable that launches s's commands (Options.Launcher,
// resolved).
func (s *Sandbox) Launcher() string {
	return s.launcher
}

// WorkerFor is the executable that runtime's workers start from:
// Options.Workers[runtime] when set, else Options.Worker when set, else
// WorkerExecutableFor(runtime) beside the running executable, else the general
// worker executable (Options.Worker's default).
func (s *Sandbox) WorkerFor(runtime string) string {
	if exe, ok := s.workers[runtime]; ok {
		return exe
	}
	return s.worker
}

// users are the users of the range that the live commands of the process's
// privileged sandboxes run as. Users are a resource of the host, so they are
// shared by every Sandbox of the process; each command takes one at random, so
// that no command can tell which user the next one will run as (another pod
// of the node running processes as that user would use up its process limit),
// and two gateways on one host seldom hold the same at once.
var users = struct {
	sync.Mutex
	held map[int]bool
}{held: map[int]bool{}}

// uidOffset picks an offset in the range of users.
var uidOffset = func() int { return rand.IntN(uidSpan) }

// checkUIDRange refuses a range of users (Options.UIDBase) of a root caller
// that holds root or the caller's group, or passes the last user (2^32-2; -1 means "no
// change" to setresuid): a command would run as one of them.
func checkUIDRange(base int) error {
	end := base + uidSpan
	inRange := func(id int) bool { return id >= base && id < end }
	if base <= 0 || end > 1<<32-1 || inRange(os.Getgid()) {
		return fmt.Errorf("sandbox: the users [%d, %d) of Options.UIDBase: want a range above root and below 2^32-1 that does not hold the caller's group %d", base, end, os.Getgid())
	}
	return nil
}

// takeUID is a user of the range that no live command of the process runs as,
// for a command of a privileged sandbox; the command gives it back with
// releaseUID once none of its processes is left.
func (s *Sandbox) takeUID() (int, error) {
	users.Lock()
	defer users.Unlock()
	for range 1024 {
		// The range's first user is a zygote's (root of its user namespace,
		// and of each child's init): no command runs as it.
		if uid := s.uidBase + uidOffset(); uid != s.uidBase && !users.held[uid] {
			users.held[uid] = true
			return uid, nil
		}
	}
	return 0, fmt.Errorf("sandbox: no free user in [%d, %d): %d commands of this process hold one", s.uidBase, s.uidBase+uidSpan, len(users.held))
}

// releaseUID gives back a user of takeUID; 0 is none.
func releaseUID(uid int) {
	if uid == 0 {
		return
	}
	users.Lock()
	delete(users.held, uid)
	users.Unlock()
}

// New builds a sandbox of opts.Mode and checks that it works here; the error
// names what is missing. ModeAuto tries namespaces, then Landlock, and fails
// naming what each one lacks.
func New(opts Options) (*Sandbox, error) {
	reapOrphans()
	if opts.UIDBase == 0 {
		opts.UIDBase = DefaultUIDBase
	}
	if os.Geteuid() == 0 { // only a root caller's commands have users of their own
		if err := checkUIDRange(opts.UIDBase); err != nil {
			return nil, err
		}
	}
	switch opts.Mode {
	case ModeNamespaces:
		return newNamespaces(opts)
	case ModeLandlock:
		return newLandlock(opts)
	case "", ModeAuto:
	default:
		_, err := ParseMode(string(opts.Mode))
		return nil, fmt.Errorf("sandbox: %w", err)
	}
	s, nsErr := newNamespaces(opts)
	if nsErr == nil {
		return s, nil
	}
	s, llErr := newLandlock(opts)
	if llErr != nil {
		return nil, fmt.Errorf("sandbox: neither mechanism works here: namespaces: %s; Landlock: %s",
			strings.TrimPrefix(nsErr.Error(), "sandbox: "), strings.TrimPrefix(llErr.Error(), "sandbox: "))
	}
	s.fallback = nsErr
	return s, nil
}

// newNamespaces finds bubblewrap and the launcher and checks that bubblewrap can build
// a sandbox here.
func newNamespaces(opts Options) (*Sandbox, error) {
	if opts.Bwrap == "" {
		opts.Bwrap = DefaultBwrap
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
	launcher, err := launcherPath(opts.Launcher)
	if err != nil {
		return nil, err
	}
	worker, workers, err := workerPaths(opts.Worker, opts.Workers)
	if err != nil {
		return nil, err
	}
	privileged := os.Geteuid() == 0
	if !privileged {
		if err := checkUserNamespaces(); err != nil {
			return nil, err
		}
	}
	var filters [2][]byte
	for i, network := range []bool{false, true} {
		if filters[i], err = userNamespaceFilter(network); err != nil {
			return nil, err
		}
	}
	closeOnExecInherited()
	s := &Sandbox{mode: ModeNamespaces, bwrap: bwrap, launcher: launcher, worker: worker, workers: workers, uid: opts.UID, gid: opts.GID, uidBase: opts.UIDBase, privileged: privileged, filters: filters, cgroups: newCgroups(), zygotes: &zygoteSet{}}
	s.nsenter, _ = exec.LookPath("nsenter")
	s.launcherDynamic = dynamicallyLinked(launcher)
	if err := s.probe(); err != nil {
		s.Close()
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

// probe starts a sandbox whose launcher bounds itself and exits.
func (s *Sandbox) probe() error {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	cmd, err := s.CommandContext(ctx, Spec{})
	if err != nil {
		return err
	}
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	if err := cmd.Start(); err != nil {
		return fmt.Errorf("sandbox: starting %s: %w", s.bwrap, err)
	}
	if err := cmd.Wait(); err != nil {
		return fmt.Errorf("sandbox: bubblewrap cannot build a sandbox here (%s: %w): %s", s.bwrap, err, strings.TrimSpace(stderr.String()))
	}
	return nil
}

// Close releases what s holds in the process: it ends the zygotes s started,
// with their children, and waits for them, then removes the directory its
// commands' cgroups are made in, once no other sandbox of the process uses it.
// Call it once its commands have ended; s makes no command after it, and starts
// no zygote.
func (s *Sandbox) Close() {
	for _, z := range s.zygotes.close() {
		z.Close()
	}
	s.cgroups.close()
}

// Command returns the command that runs spec in a sandbox. Kill kills everything
// the command started.
func (s *Sandbox) Command(spec Spec) (*Command, error) {
	return s.CommandContext(context.Background(), spec)
}

// CommandContext is Command with a context that kills the sandbox when done.
func (s *Sandbox) CommandContext(ctx context.Context, spec Spec) (*Command, error) {
	if spec.forContainer() && (s.mode != ModeNamespaces || !s.privileged) {
		return nil, errors.New("sandbox: binds, a user, a directory, a network namespace, capabilities and a hostname need a namespace sandbox whose caller is root")
	}
	if s.mode == ModeLandlock {
		return s.landlockCommand(ctx, spec)
	}
	var trees []string
	if len(spec.Binds) > 0 {
		trees = hostTrees(spec)
	}
	for _, b := range spec.Binds {
		if !filepath.IsAbs(b.Target) || b.Target != filepath.Clean(b.Target) {
			return nil, fmt.Errorf("sandbox: a bind's target must be a clean absolute path (no ., .. or doubled /), got %q", b.Target)
		}
		if ReservedTarget(b.Target) {
			return nil, fmt.Errorf("sandbox: a bind at %s would reach %s, where the sandbox shows its own executables", b.Target, ReservedDir)
		}
		if dir, ok := SystemTarget(b.Target); ok {
			return nil, fmt.Errorf("sandbox: a bind at %s would be in %s, which the sandbox makes itself", b.Target, dir)
		}
		if err := s.checkTargetInHostTrees(trees, b.Target); err != nil {
			return nil, err
		}
	}
	caps, err := capabilityNumbers(spec.Capabilities)
	if err != nil {
		return nil, err
	}
	if spec.NetNS != "" && s.nsenter == "" {
		return nil, errors.New("sandbox: nsenter, which starts a sandbox in a network namespace, is not on PATH (apt-get install -y util-linux)")
	}
	l := spec.Limits.withDefaults()
	uid := 0
	if s.privileged && spec.User == nil {
		if uid, err = s.takeUID(); err != nil {
			return nil, err
		}
	}
	cg, err := s.cgroups.create(l)
	if err != nil {
		releaseUID(uid)
		return nil, err
	}
	lc := s.launch(spec, l, cg, uid)
	lc.Capabilities = caps
	cmd, err := launcherCommand(ctx, launcherInSandbox, lc, cg)
	if err != nil {
		releaseUID(uid)
		cg.remove()
		return nil, err
	}
	// bwrap takes the seccomp filter from the descriptor after the launch and the
	// cgroups, and passes the others on to the launcher.
	args := []string{}
	if filter := s.filters[boolIndex(spec.Network || spec.NetNS != "")]; filter != nil {
		r, err := filterPipe(filter)
		if err != nil {
			closeExtraFiles(cmd)
			releaseUID(uid)
			cg.remove()
			return nil, fmt.Errorf("sandbox: seccomp filter: %w", err)
		}
		args = append(args, "--seccomp", strconv.Itoa(launchFD+len(cmd.ExtraFiles)))
		cmd.ExtraFiles = append(cmd.ExtraFiles, r)
	}
	// The reaper, where there is one for the architecture, is the sandbox's
	// first process instead of bubblewrap's init (see InitInSandbox).
	initFD := 0
	if len(reaperProgram) > 0 {
		r, err := dataPipe(reaperProgram)
		if err != nil {
			closeExtraFiles(cmd)
			releaseUID(uid)
			cg.remove()
			return nil, fmt.Errorf("sandbox: the reaper: %w", err)
		}
		initFD = launchFD + len(cmd.ExtraFiles)
		cmd.ExtraFiles = append(cmd.ExtraFiles, r)
	}
	// Sources given open follow, in the order of spec.Binds.
	var fromFDs []int
	for _, b := range spec.Binds {
		if b.From == nil {
			fromFDs = append(fromFDs, -1)
			continue
		}
		err := s.checkBindFD()
		fd := -1
		if err == nil {
			fd, err = unix.FcntlInt(b.From.Fd(), unix.F_DUPFD_CLOEXEC, 3)
		}
		if err != nil {
			closeExtraFiles(cmd)
			releaseUID(uid)
			cg.remove()
			return nil, fmt.Errorf("sandbox: bind %s: %w", b.Target, err)
		}
		fromFDs = append(fromFDs, launchFD+len(cmd.ExtraFiles))
		cmd.ExtraFiles = append(cmd.ExtraFiles, os.NewFile(uintptr(fd), b.Source))
	}
	args = append(args, s.args(spec, l, initFD, fromFDs)...)
	if initFD != 0 {
		args = append(args, InitInSandbox, "--")
	}
	args = append(args, cmd.Args...)
	cmd.Path, cmd.Args = s.bwrap, append([]string{s.bwrap}, args...)
	if spec.NetNS != "" {
		// nsenter joins the namespace and executes bwrap in its place, with the
		// same empty environment and descriptors.
		cmd.Path, cmd.Args = s.nsenter, append([]string{s.nsenter, "--net=" + spec.NetNS, "--"}, cmd.Args...)
	}
	cmd.Err = nil
	return &Command{Cmd: cmd, cgroup: cg, uid: uid}, nil
}

// launch is what the launcher of a namespace sandbox does for spec; uid is the
// command's own user (takeUID) of a privileged sandbox.
func (s *Sandbox) launch(spec Spec, l Limits, cg *cgroup, uid int) launch {
	dir := cmp.Or(spec.Dir, "/tmp")
	env := append(withoutVars(spec.Env, "PWD"), "PWD="+dir)
	lc := launch{Args: spec.Args, Env: env, Limits: &l, Cgroups: len(cg.procs()), LookPath: spec.forContainer()}
	if spec.forContainer() {
		lc.WorkDir = dir
	}
	switch {
	case spec.User != nil:
		lc.UID, lc.GID, lc.Groups, lc.SetUser = spec.User.UID, spec.User.GID, spec.User.Groups, true
		lc.CgroupProcesses = true // see Spec.User
	case s.privileged:
		lc.UID = uid
		lc.GID = lc.UID
	}
	return lc
}

// ReservedDir is where a namespace sandbox shows its own executables, the
// launcher and the reaper, which run before the command's bounds exist (the
// launcher as root with the capabilities to change user, in a sandbox of a
// root caller). No Bind may reach it: a host directory bound at it or above
// it, shared with another process (a pod's volume shared by its containers),
// would let that process rename files over those executables between
// bubblewrap's mounts and their execution.
const ReservedDir = "/run/metalambda"

// ReservedTarget reports whether a bind at target would reach ReservedDir: the
// directory itself, a path inside it, or one of its parents (/run, /).
func ReservedTarget(target string) bool {
	t := filepath.Clean(target)
	return t == ReservedDir || strings.HasPrefix(t, ReservedDir+"/") || t == "/" || strings.HasPrefix(ReservedDir, t+"/")
}

// SystemTarget reports the directory the sandbox makes itself that a bind at
// target would be in or at: /proc, or one of /bin, /lib, /lib64 and /sbin
// (links into /usr on a merged-/usr system). Binds there are refused: through
// /proc/1/root a target reaches bubblewrap's own root while it sets up, where
// the host is /oldroot, and through a link a target lands where no check of
// its path looked. The sandbox makes these after the binds, so that none
// exists while bubblewrap follows the binds' targets.
func SystemTarget(target string) (string, bool) {
	t := filepath.Clean(target)
	for _, dir := range []string{"/proc", "/bin", "/lib", "/lib64", "/sbin"} {
		if t == dir || strings.HasPrefix(t, dir+"/") {
			return dir, true
		}
	}
	return "", false
}

// checkTargetInHostTrees refuses a bind target inside what the sandbox binds
// from the host before the binds: in /usr, or through a symbolic link in the
// network files or spec.ReadOnly. bubblewrap follows such a link as root while
// it sets up, to wherever it leads, such as into a volume bound elsewhere and
// from there into the host (/oldroot). These trees are the host's, so a look
// now holds when bubblewrap looks. A launcher that is dynamically linked runs
// as root before it bounds the command, with its loader reading /etc: no bind
// may then be at /etc or its loader's files there.
// trees are the host paths bound before the binds (hostTrees).
func (s *Sandbox) checkTargetInHostTrees(trees []string, target string) error {
	if Within(target, "/usr") {
		return fmt.Errorf("sandbox: a bind at %s would be in /usr, which the sandbox binds from the host", target)
	}
	for _, tree := range trees {
		if !Within(target, tree) || target == tree {
			continue
		}
		if link := FirstSymlink(tree, strings.TrimPrefix(target, tree+"/")); link != "" {
			return fmt.Errorf("sandbox: a bind at %s would pass through the symbolic link %s, which the sandbox binds from the host", target, link)
		}
	}
	if s.launcherDynamic && (target == "/etc" || strings.HasPrefix(target, "/etc/ld.so")) {
		return fmt.Errorf("sandbox: a bind at %s would give the loader of the launcher %s, which is dynamically linked and runs as root, its files; build the launcher with CGO_ENABLED=0", target, s.launcher)
	}
	return nil
}

// FirstSymlink is the first of base/rel's components below base that is a
// symbolic link, "" when none is (components that do not exist end the walk).
func FirstSymlink(base, rel string) string {
	p := base
	for _, part := range strings.Split(rel, "/") {
		if part == "" || part == "." {
			continue
		}
		p += "/" + part
		fi, err := os.Lstat(p)
		if err != nil {
			return ""
		}
		if fi.Mode()&os.ModeSymlink != 0 {
			return p
		}
	}
	return ""
}

// hostTrees are the host paths the sandbox binds at their own paths before
// spec's binds: the network files (with network) and spec.ReadOnly.
func hostTrees(spec Spec) []string {
	if spec.Network || spec.NetNS != "" {
		return append(networkFiles(), spec.ReadOnly...)
	}
	return spec.ReadOnly
}

// Within reports whether path p is dir or inside it, both cleaned first.
func Within(p, dir string) bool {
	p, dir = filepath.Clean(p), filepath.Clean(dir)
	return p == dir || dir == "/" || strings.HasPrefix(p, dir+"/")
}

// dynamicallyLinked reports whether the executable at path has an ELF
// interpreter (a loader, which reads /etc/ld.so.* and the libraries).
func dynamicallyLinked(path string) bool {
	f, err := elf.Open(path)
	if err != nil {
		return false
	}
	defer f.Close()
	for _, p := range f.Progs {
		if p.Type == elf.PT_INTERP {
			return true
		}
	}
	return false
}

// launcherInSandbox is where a namespace sandbox shows its launcher.
const launcherInSandbox = ReservedDir + "/launcher"

// InitInSandbox is where a namespace sandbox shows the reaper (metalambda-init,
// see reaper.go), which bubblewrap runs as the first process of the sandbox's
// PID namespace (--as-pid-1) in place of its own init, a forked bubblewrap of
// 0.13 to 0.22 MiB of PSS that lives as long as the command: the reaper costs
// a few pages. It forks and executes the launcher, then holds nothing (no
// descriptor, no capability, no_new_privs), reaps what is orphaned into the
// namespace and exits with the command's status, as bubblewrap's init does.
//
// It does not change user, unlike the launcher after it: it stays the user of
// bubblewrap's monitor, the gateway's child, so that when the monitor dies the
// parent-death signal bubblewrap set on it may still be sent (the kernel sends
// it as a kill from the dying monitor, which holds no capability), and its
// death ends the namespace. It is not dumpable, so the command may neither
// trace it nor reach its memory or descriptors, even as its user (a gateway
// that is not root), and a signal the command sends it is refused or, from
// inside the namespace to an init without handlers, dropped. bubblewrap copies it from a pipe into the sandbox's own
// read-only file, so nothing outside the gateway can change what runs there.
const InitInSandbox = ReservedDir + "/init"

func boolIndex(b bool) int {
	if b {
		return 1
	}
	return 0
}

// Command is a sandboxed command: an exec.Cmd whose Start, Kill and Usage know
// its sandbox's directory and cgroup.
type Command struct {
	*exec.Cmd
	dir      string  // a Landlock command's directory, made by its launcher and removed at exit
	launcher string  // a root caller's Landlock command: its launcher, which removes dir as the command's user
	cgroup   *cgroup // nil: the command has no cgroup of its own
	uid      int     // the user of its own (takeUID) it runs as; 0: none
	// groupMu is held while the command's process group is signalled and
	// while ended is set: ended is set, and the process may be reaped (which
	// frees the group's number for another process group), only after a Kill
	// that found it unset has signalled the group.
	groupMu sync.Mutex
	ended   bool // its process has exited and its process group was killed
	exited  chan struct{}
}

// killGroup kills the process group pgid.
var killGroup = func(pgid int) { _ = syscall.Kill(-pgid, syscall.SIGKILL) }

// Plain returns cmd, a process outside any sandbox (Options.InsecureNoSandbox's
// workers), as a Command with no cgroup, directory or user of its own, so that
// its process group is killed and signalled as a sandboxed command's is: only
// before its process can be reaped. cmd must start in a process group of its
// own (Setpgid).
func Plain(cmd *exec.Cmd) *Command { return &Command{Cmd: cmd} }

// Exited is closed once the command's process has exited and its process group
// was killed; it is not reaped yet. Wait returns at once then, where waiting in
// Wait holds an OS thread for as long as the process runs.
func (c *Command) Exited() <-chan struct{} { return c.exited }

// Start starts the command and closes the descriptors it handed over. The
// directory of a Landlock command (made by its launcher) and the command's
// cgroup are removed once the command has exited.
func (c *Command) Start() error {
	err := c.Cmd.Start()
	closeExtraFiles(c.Cmd)
	if err != nil {
		if c.dir != "" {
			c.removeWorkerDir()
		}
		c.cgroup.remove()
		releaseUID(c.uid)
		return err
	}
	c.exited = make(chan struct{})
	go c.cleanAtExit()
	return nil
}

// Wait waits for the command's process to exit and for cleanAtExit to have
// killed its process group, then reaps it: reaped before, the process would
// free its group's number, and the kill could reach another process group.
func (c *Command) Wait() error {
	if c.exited != nil {
		<-c.exited
	}
	return c.Cmd.Wait()
}

// cleanAtExit kills what is left of the command once its process has exited
// (its process group, which the command cannot leave, and its cgroup), then
// removes its cgroup and directory, and gives its user back. Without a cgroup,
// a process the command left behind would otherwise run on, as its user.
func (c *Command) cleanAtExit() {
	WaitExit(c.Process.Pid)
	c.groupMu.Lock()
	killGroup(c.Process.Pid)
	c.ended = true
	c.groupMu.Unlock()
	close(c.exited) // only now may it be reaped, which frees its group's number
	c.cgroup.kill()
	c.cgroup.remove()
	if c.dir != "" {
		c.removeWorkerDir()
	}
	releaseUID(c.uid)
}

// Kill kills every process of the command: its process group, and everything
// in its cgroup. Once the command's process has exited, its group was killed
// then, and the group's number, freed when the process was reaped, may be
// another process group's: Kill signals no group then.
func (c *Command) Kill() {
	if c.Process != nil {
		c.groupMu.Lock()
		if !c.ended {
			killGroup(c.Process.Pid)
		}
		c.groupMu.Unlock()
	}
	c.cgroup.kill()
}

// Signal sends sig to the command's own process, as a container runtime signals
// a container's first process: in a Landlock sandbox the launcher's, in a
// namespace sandbox each process of the command's cgroup whose parent is
// outside it (the command, and any orphan bubblewrap's init adopted). A command
// without a cgroup gets sig at bubblewrap, which then ends the sandbox whole.
// Once the command's process has exited, its pid may be another process's
// (it was reaped): Signal returns os.ErrProcessDone then.
func (c *Command) Signal(sig syscall.Signal) error {
	if c.Process == nil {
		return errors.New("sandbox: the command has not started")
	}
	if c.dir != "" || c.cgroup == nil {
		c.groupMu.Lock()
		defer c.groupMu.Unlock()
		if c.ended {
			return os.ErrProcessDone
		}
		return syscall.Kill(c.Process.Pid, sig)
	}
	for _, pid := range c.cgroup.roots() {
		_ = syscall.Kill(pid, sig)
	}
	return nil
}

// Usage is what the processes of a command hold.
type Usage struct {
	// Tasks counts the command's threads, in all its processes.
	Tasks int
	// CPU is the processor time they have used.
	CPU time.Duration
}

// Usage reports what the command's processes hold, from its cgroup; false when
// it has none.
func (c *Command) Usage() (Usage, bool) {
	return c.cgroup.usage()
}

// Foreground gives a command started in the background (Limits.Background)
// the usual processor weight; for any other command it does nothing.
func (c *Command) Foreground() error {
	return c.cgroup.foreground()
}

// Tasks counts the command's threads, in all its processes, from its cgroup;
// false when it has none. It reads one counter where Usage reads two: the
// gateway reads it after every call.
func (c *Command) Tasks() (int, bool) {
	return c.cgroup.tasks()
}

// Memory is the memory charged to the command's processes (v1
// memory.usage_in_bytes, v2 memory.current): their pages, page cache, tmpfs and
// shared memory; false when it has no cgroup.
func (c *Command) Memory() (int64, bool) {
	return c.cgroup.memory()
}

func closeExtraFiles(cmd *exec.Cmd) {
	for _, f := range cmd.ExtraFiles {
		_ = f.Close()
	}
}

// args are bubblewrap's options for spec, up to the launcher's command line;
// initFD, when not 0, is the descriptor bubblewrap reads the reaper from, to
// run it as the first process (InitInSandbox) instead of an init of its own;
// fromFDs[i], when spec.Binds[i].From is set, is the descriptor bubblewrap
// binds it from.
func (s *Sandbox) args(spec Spec, l Limits, initFD int, fromFDs []int) []string {
	a := []string{"--die-with-parent", "--new-session", "--unshare-pid", "--unshare-ipc", "--unshare-uts", "--unshare-cgroup", "--hostname", cmp.Or(spec.Hostname, "sandbox"), "--clearenv"}
	if initFD != 0 {
		a = append(a, "--as-pid-1")
	}
	network := spec.Network || spec.NetNS != ""
	if !network {
		a = append(a, "--unshare-net")
	}
	if s.privileged {
		// The launcher needs these to drop to the command's user; it then drops them
		// but for spec.Capabilities.
		a = append(a, "--cap-drop", "ALL", "--cap-add", "CAP_SETUID", "--cap-add", "CAP_SETGID", "--cap-add", "CAP_SETPCAP")
		for _, c := range spec.Capabilities {
			a = append(a, "--cap-add", c)
		}
	} else {
		a = append(a, "--unshare-user", "--uid", strconv.Itoa(s.uid), "--gid", strconv.Itoa(s.gid), "--disable-userns", "--cap-drop", "ALL")
	}
	a = append(a, "--ro-bind", "/usr", "/usr")
	a = append(a, "--perms", "0755", "--dir", "/dev")
	for _, dev := range devices {
		a = append(a, "--dev-bind", dev, dev)
	}
	a = append(a, "--perms", "1777", "--size", strconv.FormatInt(l.TmpSize, 10), "--tmpfs", "/tmp")
	a = append(a, bindArgs(hostTrees(spec))...)
	for i, b := range spec.Binds {
		a = append(a, parentDirs(b.Target, nil)...)
		if i < len(fromFDs) && fromFDs[i] >= 0 {
			a = append(a, map[bool]string{false: "--ro-bind-fd", true: "--bind-fd"}[b.Writable], strconv.Itoa(fromFDs[i]), b.Target)
			continue
		}
		a = append(a, map[bool]string{false: "--ro-bind", true: "--bind"}[b.Writable], b.Source, b.Target)
	}
	// After the binds (see SystemTarget): bubblewrap follows links on the way
	// to a target, and /proc/1/root is its own root while it sets up.
	a = append(a, systemLinks()...)
	a = append(a, "--proc", "/proc")
	if spec.User != nil {
		// bubblewrap leaves these writable when they look read-only to it; a
		// command that is root could write the host's kernel settings there.
		for _, p := range procReadOnly {
			a = append(a, "--ro-bind-try", p, p)
		}
	}
	a = append(a, "--perms", "0755", "--dir", filepath.Dir(launcherInSandbox), "--ro-bind", s.launcher, launcherInSandbox)
	if initFD != 0 {
		a = append(a, "--perms", "0555", "--ro-bind-data", strconv.Itoa(initFD), InitInSandbox)
	}
	// bubblewrap enters the directory as root without capabilities, which a
	// volume of the command's user may refuse: the launcher of a container enters
	// it once it is that user.
	dir := "/tmp"
	if spec.forContainer() {
		dir = "/"
	}
	return append(a, "--remount-ro", "/", "--chdir", dir, "--")
}

// procReadOnly are the files of /proc that a command that is root must not
// write: the kernel's settings and triggers.
var procReadOnly = []string{"/proc/sys", "/proc/sysrq-trigger", "/proc/fs", "/proc/irq", "/proc/bus", "/proc/acpi", "/proc/scsi"}

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
	var files []string
	for _, p := range []string{"/etc/resolv.conf", "/etc/hosts", "/etc/nsswitch.conf", "/etc/ssl", "/etc/ca-certificates"} {
		if _, err := os.Stat(p); err == nil {
			files = append(files, p)
		}
	}
	return files
}

// bindArgs binds paths read-only at the same place, their missing parents made
// traversable (bubblewrap run as root makes them 0700).
func bindArgs(paths []string) []string {
	var a []string
	made := map[string]bool{}
	for _, p := range paths {
		a = append(a, parentDirs(p, made)...)
		a = append(a, "--ro-bind", p, p)
	}
	return a
}

// parentDirs makes the parents of p traversable, but for those in made (which
// it adds to, when not nil).
func parentDirs(p string, made map[string]bool) []string {
	var a, parents []string
	for dir := filepath.Dir(p); dir != "/" && dir != "."; dir = filepath.Dir(dir) {
		parents = append(parents, dir)
	}
	for i := len(parents) - 1; i >= 0; i-- {
		if !made[parents[i]] {
			if made != nil {
				made[parents[i]] = true
			}
			a = append(a, "--perms", "0755", "--dir", parents[i])
		}
	}
	return a
}
