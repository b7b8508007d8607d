package sandbox

import (
	"bufio"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"runtime"
	"runtime/debug"
	"strconv"
	"strings"
	"syscall"
	"unsafe"

	"github.com/landlock-lsm/go-landlock/landlock"
	"golang.org/x/sys/unix"
)

// LauncherMarker is the first argument of the launcher: the executable that hosts
// a Landlock sandbox (the gateway, the platform, a test binary), started again as
// the command's process, reads a launch from its descriptor 3, bounds itself
// (rlimits, no_new_privs, Landlock, seccomp) and executes the command in its
// place. Every binary whose main calls ServeLauncher can serve as the launcher.
const LauncherMarker = "metalambda-sandbox-launcher"

// launchFD is the descriptor a launcher reads its launch from, the first of
// exec.Cmd.ExtraFiles.
const launchFD = 3

// ServeLauncher makes this process the launcher when it was started as one
// (os.Args[1] is LauncherMarker): it never returns then. Otherwise it returns at
// once. Every executable a sandbox may start as its launcher calls it first thing
// in main (or TestMain), before flags or anything else that the launch must not
// see; package lambda's ServeWorker does.
func ServeLauncher() {
	if len(os.Args) > 1 && os.Args[1] == LauncherMarker {
		err := runLauncher(os.NewFile(launchFD, "launch"))
		fmt.Fprintln(os.Stderr, "sandbox launcher:", err)
		os.Exit(126)
	}
}

// launchProtocol is the version of launch. A launcher refuses a launch of
// another version, so that a launcher left from an older build fails
// the sandbox's probe at the caller's start, naming itself, instead of
// misreading what it is given.
const launchProtocol = 2

// launch is what a launcher does before it executes Args.
type launch struct {
	// Protocol is launchProtocol of the caller.
	Protocol int `json:"protocol"`
	// Args is the command; empty means exit 0 once bounded (a probe).
	Args []string `json:"args"`
	// Env is the command's whole environment. It is set only by the execution of
	// Args: the launcher itself, and bubblewrap before it, run with an empty
	// environment, so that nothing of a command's environment (LD_PRELOAD and the
	// like) steers a process that builds the sandbox.
	Env []string `json:"env,omitempty"`
	// KeepEnv executes Args with the launcher's own environment instead (for
	// RestrictedCommand, whose launcher runs trusted code).
	KeepEnv bool `json:"keepEnv,omitempty"`
	// UID and GID, when not zero, are the user the launcher drops to, with no
	// supplementary groups and no capabilities (a sandbox of a root caller).
	UID int `json:"uid,omitempty"`
	GID int `json:"gid,omitempty"`
	// SetUser drops to UID and GID even when UID is 0 (a command that asks to be
	// root keeps only its Capabilities), with Groups as supplementary groups.
	SetUser bool  `json:"setUser,omitempty"`
	Groups  []int `json:"groups,omitempty"`
	// Capabilities are the numbers of the capabilities the command keeps.
	Capabilities []int `json:"capabilities,omitempty"`
	// CgroupProcesses leaves RLIMIT_NPROC as it is: the command's cgroup bounds
	// its processes (Spec.User).
	CgroupProcesses bool `json:"cgroupProcesses,omitempty"`
	// WorkDir is made when missing and entered as the command's user, once the
	// launcher has dropped to it (Spec.Dir).
	WorkDir string `json:"workDir,omitempty"`
	// LookPath finds a command named without a slash in the directories of its
	// environment's PATH, as the user it runs as.
	LookPath bool `json:"lookPath,omitempty"`
	// Cgroups is how many descriptors after launchFD are cgroup.procs files that
	// the launcher moves itself into first, so that everything the command runs
	// is counted and bounded there.
	Cgroups int `json:"cgroups,omitempty"`
	// Dir is the command's directory, which it may write in.
	Dir string `json:"dir,omitempty"`
	// MakeDir makes Dir (0700) as the command's user, which owns it then: a
	// Landlock sandbox of a root caller, which holds no CAP_CHOWN to give it.
	MakeDir bool `json:"makeDir,omitempty"`
	// Remove, instead of a command, removes the directory of an ended command
	// as its user (see removeWorkerDir).
	Remove string `json:"remove,omitempty"`
	// Zygote, instead of a command, starts a zygote's bubblewrap (see
	// runZygoteHelper).
	Zygote *zygoteHelper `json:"zygote,omitempty"`
	// Landlock restricts the file system to ReadOnly, Dir and a few devices,
	// and, without Network, TCP; it scopes signals and abstract UNIX sockets.
	Landlock bool     `json:"landlock"`
	ReadOnly []string `json:"readOnly,omitempty"`
	Network  bool     `json:"network"`
	// Filter is a seccomp program of filterProgram.
	Filter []byte `json:"filter"`
	// Limits are set unless nil; Processes counts beyond the tasks the user runs
	// when the command starts.
	Limits *Limits `json:"limits,omitempty"`
}

// devices are the device nodes a Landlock sandbox may read and write.
var devices = []string{"/dev/null", "/dev/zero", "/dev/full", "/dev/random", "/dev/urandom"}

// runLauncher bounds the process as l says and executes its command; it returns
// only on failure.
func runLauncher(f *os.File) error {
	runtime.LockOSThread() // the thread that executes the command holds its bounds
	raw, err := io.ReadAll(io.LimitReader(f, 1<<20))
	f.Close()
	if err != nil {
		return fmt.Errorf("reading the launch: %w", err)
	}
	var l launch
	if err := json.Unmarshal(raw, &l); err != nil {
		return fmt.Errorf("reading the launch: %w", err)
	}
	if l.Protocol != launchProtocol {
		self, _ := os.Executable()
		return fmt.Errorf("%s speaks launch protocol %d and was given %d: it is from another build than its caller; rebuild both (make build) or remove it", self, launchProtocol, l.Protocol)
	}
	if l.Remove != "" {
		return removeAsOwner(l.Remove)
	}
	if l.Zygote != nil {
		return runZygoteHelper(l.Zygote) // which waits for its zygote, collecting as any process
	}
	holdAllocator() // before joinCgroups, whose CPU limit the runtime would adjust to
	if err := joinCgroups(l.Cgroups); err != nil {
		return err
	}
	if l.MakeDir {
		if err := os.Mkdir(l.Dir, 0o700); err != nil {
			return fmt.Errorf("making the command's directory as user %d: %w", os.Getuid(), err)
		}
	}
	if l.Dir != "" {
		if err := os.Chdir(l.Dir); err != nil {
			return err
		}
	}
	if l.UID != 0 || l.SetUser {
		if err := dropPrivileges(l.UID, l.GID, l.Groups, l.Capabilities); err != nil {
			return err
		}
	}
	if l.WorkDir != "" {
		if err := os.MkdirAll(l.WorkDir, 0o755); err != nil {
			return fmt.Errorf("making the working directory: %w", err)
		}
		if err := os.Chdir(l.WorkDir); err != nil {
			return fmt.Errorf("entering the working directory: %w", err)
		}
	}
	if l.LookPath && len(l.Args) > 0 {
		if l.Args[0], err = lookPath(l.Args[0], l.Env); err != nil {
			return err
		}
	}
	others := 0
	if l.Limits != nil && l.Landlock && l.UID == 0 {
		if others, err = otherTasks(); err != nil {
			return err
		}
	}
	if err := unix.Prctl(unix.PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0); err != nil {
		return fmt.Errorf("setting no_new_privs: %w", err)
	}
	if l.Landlock && os.Getuid() != 0 {
		// The change of user cleared the other sets, not the inheritable one the
		// caller may hold (a container's capabilities).
		if err := clearCapabilities(); err != nil {
			return err
		}
	}
	if l.Landlock {
		if err := restrictLandlock(l); err != nil {
			return err
		}
	}
	// The address-space limit may be below what this Go process holds, so nothing
	// is allocated from the limits to the command's execution.
	filter := newFilter(l.Filter)
	var path *byte
	var argv, envv []*byte
	if len(l.Args) > 0 {
		if path, err = syscall.BytePtrFromString(l.Args[0]); err != nil {
			return err
		}
		if argv, err = syscall.SlicePtrFromStrings(l.Args); err != nil {
			return err
		}
		env := l.Env
		if l.KeepEnv {
			env = os.Environ()
		}
		if envv, err = syscall.SlicePtrFromStrings(env); err != nil {
			return err
		}
	}
	if l.Limits != nil {
		settleAllocator()
		limits := limitValues(*l.Limits, others)
		if l.CgroupProcesses {
			limits = limits[1:] // RLIMIT_NPROC comes first
		}
		if err := setLimits(limits); err != nil {
			return err
		}
	}
	if err := filter.install(); err != nil {
		return err
	}
	if len(l.Args) == 0 {
		os.Exit(0)
	}
	_, _, errno := unix.RawSyscall(unix.SYS_EXECVE, uintptr(unsafe.Pointer(path)), uintptr(unsafe.Pointer(&argv[0])), uintptr(unsafe.Pointer(&envv[0])))
	if errno == unix.EAGAIN {
		// The kernel refuses the execution of a process whose user ran more tasks
		// than RLIMIT_NPROC when it became that user.
		return fmt.Errorf("executing %s: %w: user %d runs more tasks than its process limit (RLIMIT_NPROC)", l.Args[0], errno, os.Getuid())
	}
	return fmt.Errorf("executing %s: %w", l.Args[0], errno)
}

// holdAllocator keeps the Go runtime of a launcher from mapping memory in the
// background: once the launcher has set the command's address-space limit
// (RLIMIT_AS), which is below what any Go process holds, every new mapping
// fails, and one the runtime makes for itself (a collection's sweep, which
// grows its span lists; moving spans when the processor count changes) ends
// the process with "fatal error: runtime: cannot allocate memory". Collection
// is off for the launcher's short life, and the processor count is set, which
// stops its adjustment to the cgroup's CPU limit the launcher joins.
func holdAllocator() {
	debug.SetGCPercent(-1) // waits for a collection under way to finish its marking
	runtime.GOMAXPROCS(runtime.GOMAXPROCS(0))
}

// settleAllocator finishes, before the address-space limit is set, the sweep
// of any collection that ran before holdAllocator (in the initialization of a
// large executable serving as the launcher, such as a test binary).
func settleAllocator() {
	var stats debug.GCStats // not runtime/metrics, whose initialization costs each launch 0.5 ms
	if debug.ReadGCStats(&stats); stats.NumGC > 0 {
		runtime.GC() // returns once the sweep has ended; none starts after it
	}
}

// removeAsOwner removes the directory of an ended command as the command's
// user, which owns what it made there and may give itself the modes it took:
// a root caller without CAP_DAC_OVERRIDE and CAP_FOWNER cannot. Links are
// neither followed nor given modes.
func removeAsOwner(dir string) error {
	if err := unix.Prctl(unix.PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0); err != nil {
		return fmt.Errorf("setting no_new_privs: %w", err)
	}
	// Its parent (workersDirName) is not readable, which os.RemoveAll of dir
	// itself needs: its entries are removed, then it.
	ownDirs(dir)
	entries, err := os.ReadDir(dir)
	for _, e := range entries {
		if err == nil {
			err = os.RemoveAll(filepath.Join(dir, e.Name()))
		}
	}
	if err == nil {
		err = unix.Rmdir(dir)
	}
	if err != nil {
		return fmt.Errorf("removing the command's directory as user %d: %w", os.Getuid(), err)
	}
	os.Exit(0)
	return nil
}

// joinCgroups moves the launcher's thread, which executes the command, into the
// cgroups whose files (cgroup.procs or v1's tasks) are the n descriptors after
// launchFD, and closes them.
func joinCgroups(n int) error {
	for fd := launchFD + 1; fd <= launchFD+n; fd++ {
		f := os.NewFile(uintptr(fd), "cgroup.procs")
		_, err := f.WriteString("0")
		f.Close()
		if err != nil {
			return fmt.Errorf("joining the command's cgroup: %w", err)
		}
	}
	return nil
}

// lastCap is the highest capability a bounding set may hold (CAP_LAST_CAP of
// Linux 6.x is 40); PR_CAPBSET_DROP of a higher one fails with EINVAL, which
// ends the loop.
const lastCap = 63

// dropPrivileges makes the calling thread, which executes the command, uid and
// gid with groups as its supplementary groups, and empties its capability sets
// but for keep; the kernel clears the others at the change of user. The raw
// system calls change this thread alone, which is the one that executes the
// command.
func dropPrivileges(uid, gid int, groups []int, keep []int) error {
	kept := map[int]bool{}
	for _, c := range keep {
		kept[c] = true
	}
	for c := 0; c <= lastCap; c++ {
		if kept[c] {
			continue
		}
		if _, _, errno := unix.RawSyscall6(unix.SYS_PRCTL, unix.PR_CAPBSET_DROP, uintptr(c), 0, 0, 0, 0); errno == unix.EINVAL {
			break
		} else if errno != 0 {
			return fmt.Errorf("dropping capability %d from the bounding set: %w", c, errno)
		}
	}
	gids := make([]uint32, len(groups)+1)
	for i, g := range groups {
		gids[i] = uint32(g)
	}
	var list uintptr
	if len(groups) > 0 {
		list = uintptr(unsafe.Pointer(&gids[0]))
	}
	if _, _, errno := unix.RawSyscall(unix.SYS_SETGROUPS, uintptr(len(groups)), list, 0); errno != 0 {
		return fmt.Errorf("setting supplementary groups %v: %w", groups, errno)
	}
	if _, _, errno := unix.RawSyscall(unix.SYS_SETRESGID, uintptr(gid), uintptr(gid), uintptr(gid)); errno != 0 {
		return fmt.Errorf("setting group %d: %w", gid, errno)
	}
	if len(keep) > 0 {
		// The permitted set survives the change of user, to be narrowed below.
		if _, _, errno := unix.RawSyscall6(unix.SYS_PRCTL, unix.PR_SET_KEEPCAPS, 1, 0, 0, 0, 0); errno != 0 {
			return fmt.Errorf("keeping capabilities: %w", errno)
		}
	}
	if _, _, errno := unix.RawSyscall(unix.SYS_SETRESUID, uintptr(uid), uintptr(uid), uintptr(uid)); errno != 0 {
		return fmt.Errorf("setting user %d: %w", uid, errno)
	}
	// Without keep, the change of user cleared the effective and permitted sets
	// (unless uid is 0); setting them, and the inheritable one, to keep clears
	// the ambient set too, which is then raised to keep.
	header := unix.CapUserHeader{Version: unix.LINUX_CAPABILITY_VERSION_3}
	var data [2]unix.CapUserData
	for _, c := range keep {
		data[c/32].Effective |= 1 << (c % 32)
		data[c/32].Permitted |= 1 << (c % 32)
		data[c/32].Inheritable |= 1 << (c % 32)
	}
	if _, _, errno := unix.RawSyscall(unix.SYS_CAPSET, uintptr(unsafe.Pointer(&header)), uintptr(unsafe.Pointer(&data[0])), 0); errno != 0 {
		return fmt.Errorf("setting capabilities: %w", errno)
	}
	for _, c := range keep {
		if _, _, errno := unix.RawSyscall6(unix.SYS_PRCTL, unix.PR_CAP_AMBIENT, unix.PR_CAP_AMBIENT_RAISE, uintptr(c), 0, 0, 0); errno != 0 {
			return fmt.Errorf("raising ambient capability %d: %w", c, errno)
		}
	}
	return nil
}

// clearCapabilities empties the thread's capability sets, which any process
// may do.
func clearCapabilities() error {
	header := unix.CapUserHeader{Version: unix.LINUX_CAPABILITY_VERSION_3}
	var data [2]unix.CapUserData
	if _, _, errno := unix.RawSyscall(unix.SYS_CAPSET, uintptr(unsafe.Pointer(&header)), uintptr(unsafe.Pointer(&data[0])), 0); errno != 0 {
		return fmt.Errorf("clearing capabilities: %w", errno)
	}
	return nil
}

// lookPath finds name in the directories of env's PATH, as execvp does, unless
// it holds a slash.
func lookPath(name string, env []string) (string, error) {
	if strings.Contains(name, "/") {
		return name, nil
	}
	path := ""
	for _, kv := range env {
		if v, ok := strings.CutPrefix(kv, "PATH="); ok {
			path = v
		}
	}
	for _, dir := range filepath.SplitList(path) {
		if dir == "" {
			dir = "."
		}
		p := filepath.Join(dir, name)
		if fi, err := os.Stat(p); err == nil && !fi.IsDir() && unix.Access(p, unix.X_OK) == nil {
			return p, nil
		}
	}
	return "", fmt.Errorf("executing %s: not found in PATH %q", name, path)
}

// restrictLandlock enforces the Landlock ruleset of l: read and execute under
// /usr, the system links' directories and l.ReadOnly; read and write on the
// devices; everything in l.Dir; no TCP without l.Network; signals and abstract
// UNIX sockets scoped to the command and its descendants.
func restrictLandlock(l launch) error {
	if abi, err := landlockABI(); err != nil {
		return err
	} else if abi < MinLandlockABI {
		return fmt.Errorf("landlock ABI %d, want at least %d", abi, MinLandlockABI)
	}
	cfg := landlock.V11.BestEffort() // what this kernel supports of the newest ABI
	if l.Network {
		cfg.HandledAccessNet = 0
	}
	var dirs, files []string
	for _, p := range append(systemDirs(), l.ReadOnly...) {
		fi, err := os.Stat(p)
		switch {
		case err != nil:
			return fmt.Errorf("read-only path %s: %w", p, err)
		case fi.IsDir():
			dirs = append(dirs, p)
		default:
			files = append(files, p)
		}
	}
	rules := []landlock.Rule{landlock.RODirs(dirs...), landlock.RWFiles(devices...)}
	if len(files) > 0 {
		rules = append(rules, landlock.ROFiles(files...))
	}
	if l.Dir != "" {
		rules = append(rules, landlock.RWDirs(l.Dir).WithRefer())
	}
	if err := cfg.Restrict(rules...); err != nil {
		return fmt.Errorf("landlock: %w", err)
	}
	return nil
}

// systemDirs are /usr and those of /bin, /lib, /lib64 and /sbin that are
// directories rather than links into /usr.
func systemDirs() []string {
	dirs := []string{"/usr"}
	for _, dir := range []string{"/bin", "/lib", "/lib64", "/sbin"} {
		if fi, err := os.Lstat(dir); err == nil && fi.IsDir() {
			dirs = append(dirs, dir)
		}
	}
	return dirs
}

// resourceLimit is a resource limit to set.
type resourceLimit struct {
	resource int
	value    unix.Rlimit
}

// limitValues are the rlimits of l, RLIMIT_AS last; the process limit is
// l.Processes beyond the others tasks of the real user, since the kernel counts
// RLIMIT_NPROC per user.
func limitValues(l Limits, others int) []resourceLimit {
	nproc := l.Processes
	if nproc >= 0 {
		nproc += int64(others)
	}
	limits := []resourceLimit{}
	for _, r := range []struct {
		resource int
		value    int64
	}{
		{unix.RLIMIT_NPROC, nproc},
		{unix.RLIMIT_NOFILE, l.OpenFiles},
		{unix.RLIMIT_FSIZE, l.FileSize},
		// 1, not 0: a core_pattern that pipes to a helper (systemd-coredump,
		// apport) ignores a limit of 0 and would store the worker's memory, its
		// function's secrets with it, on the host; the kernel refuses any core
		// dump of a process whose limit is 1 (below one page, no core file either).
		{unix.RLIMIT_CORE, 1},
		{unix.RLIMIT_AS, l.AddressSpace},
	} {
		v := uint64(unix.RLIM_INFINITY)
		if r.value >= 0 {
			v = uint64(r.value)
		}
		limits = append(limits, resourceLimit{r.resource, unix.Rlimit{Cur: v, Max: v}})
	}
	return limits
}

// setLimits sets limits without allocating.
func setLimits(limits []resourceLimit) error {
	for i := range limits {
		r := &limits[i]
		if _, _, errno := unix.RawSyscall6(unix.SYS_PRLIMIT64, 0, uintptr(r.resource), uintptr(unsafe.Pointer(&r.value)), 0, 0, 0); errno != 0 {
			return fmt.Errorf("setting resource limit %d to %d: %w", r.resource, r.value.Cur, errno)
		}
	}
	return nil
}

// otherTasks counts the tasks (threads) of the real user outside this process,
// as RLIMIT_NPROC counts them.
func otherTasks() (int, error) {
	total, err := userTasks(os.Getuid())
	if err != nil {
		return 0, err
	}
	_, own := statusFields("/proc/self/status")
	return total - own, nil
}

// userTasks counts the tasks (threads) whose real user is uid.
func userTasks(uid int) (int, error) {
	paths, err := filepath.Glob("/proc/[0-9]*/status")
	if err != nil {
		return 0, err
	}
	want := strconv.Itoa(uid)
	n := 0
	for _, p := range paths {
		ruid, threads := statusFields(p)
		if ruid == want {
			n += threads
		}
	}
	if n == 0 {
		return 0, errors.New("counting the user's tasks: none found in /proc")
	}
	return n, nil
}

// statusFields reads the real user and the thread count of a /proc/<pid>/status.
func statusFields(path string) (string, int) {
	f, err := os.Open(path)
	if err != nil {
		return "", 0
	}
	defer f.Close()
	var ruid string
	threads := 0
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		line := sc.Text()
		if rest, ok := strings.CutPrefix(line, "Uid:"); ok {
			if fields := strings.Fields(rest); len(fields) > 0 {
				ruid = fields[0]
			}
		}
		if rest, ok := strings.CutPrefix(line, "Threads:"); ok {
			threads, _ = strconv.Atoi(strings.TrimSpace(rest))
			break
		}
	}
	return ruid, threads
}
