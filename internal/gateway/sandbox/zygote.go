package sandbox

import (
	"bufio"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	"golang.org/x/sys/unix"
)

// A zygote is a fork server: an interpreter that has loaded what every worker
// of a runtime loads, never a function, and forks each worker from that
// image. It runs in a namespace sandbox of its own, inside a user namespace
// that the caller (root) makes and maps onto its range of users
// (Options.UIDBase): the capabilities it holds to specialize its children
// (CAP_SYS_ADMIN, CAP_SETUID, CAP_SETGID, CAP_SETPCAP, CAP_NET_ADMIN) are
// capabilities in that user namespace alone, over no object of the host. Each
// child, before it reads anything of a function, joins a cgroup of its own (the
// caller's descriptors), takes its own PID, mount, IPC, UTS, cgroup and
// (without network) network namespaces, a fresh /tmp and /proc, a user of its
// own in the range, an empty capability bounding set with locked securebits,
// no_new_privs, the rlimits of its Limits and the seccomp filter of a namespace
// sandbox's commands, stacked on the zygote's; then it closes every descriptor
// but its stdin, stdout and stderr. Its init, pid 1 of that PID namespace,
// drops every capability as well, installs the same filter, closes every
// descriptor and executes the reaper (reaper.go) where there is one. The
// zygote reads only fixed fork requests from a socket pair whose other end is
// the caller's.

// ZygoteSpec is a zygote to start.
type ZygoteSpec struct {
	// Args is the zygote's command (an absolute path and its arguments).
	Args []string
	// Env is its whole environment, which its children inherit.
	Env []string
	// ReadOnly are host paths shown read-only at the same path, beside the
	// system directories; the caller opens them, so that a path only root can
	// traverse (an interpreter under /root) is shown too.
	ReadOnly []string
	// Network keeps the host's network for the children; otherwise each has
	// only a loopback of its own.
	Network bool
	// Config is handed to the zygote on its descriptor 3, as a JSON object
	// under "config", beside what the zygote needs of the sandbox (see
	// zygoteConfig). It must hold nothing of any function.
	Config any
	// Executable, when set, is a host path the caller opens and hands to
	// the zygote (zygoteConfig.Executable), for children that execute it by
	// its descriptor once specialized: it need not be shown in the
	// zygote's view, and stays the file it was at the zygote's start.
	Executable string
	// NoSpawn has the children specialize themselves in the zygote's
	// interpreter before they execute Executable, even where
	// metalambda-spawn would (the path of other architectures, for tests).
	NoSpawn bool
	// Memory bounds what the zygote's cgroup holds (DefaultZygoteMemory when
	// 0): the zygote's own pages and the copies its children keep of the pages
	// it wrote after forking them (see Zygote.Memory).
	Memory int64
	// Background starts the zygote at a low processor weight (see
	// Limits.Background), which it keeps until it is ready, or half its start
	// allowance at most: for a zygote started ahead of need, to replace one
	// that still forks.
	Background bool
}

// zygoteConfig is what a zygote reads on its descriptor 3.
type zygoteConfig struct {
	// Control is the descriptor of its end of the control socket pair.
	Control int `json:"control"`
	// Cgroups are the descriptors of its own cgroup's files, which it joins
	// first.
	Cgroups []int `json:"cgroups"`
	// Reaper is the descriptor of a sealed memfd holding the reaper
	// (reaper.go), which each child's init executes once it has dropped its
	// capabilities and installed its filter; 0 when there is none (no reaper
	// for the architecture, or no executable memfd on the host): the init
	// then stays the zygote's own code.
	Reaper int `json:"reaper,omitempty"`
	// Executable is the descriptor of ZygoteSpec.Executable, open
	// read-only; 0 when none.
	Executable int `json:"executable,omitempty"`
	// Spawn, beside Executable, is the descriptor of a sealed memfd holding
	// metalambda-spawn (reaper/spawn.c), which each child executes at once to
	// specialize itself and its worker and execute Executable, rather than
	// do it in the zygote's interpreter; 0 when there is none (no program
	// for the architecture, or no executable memfd on the host).
	Spawn int `json:"spawn,omitempty"`
	// Filter is the seccomp program each child installs (a namespace
	// sandbox's commands').
	Filter []byte `json:"filter"`
	// Network: the children keep the zygote's network namespace.
	Network bool `json:"network"`
	// Config is ZygoteSpec.Config.
	Config any `json:"config"`
}

// zygoteCaps are the capabilities a zygote holds, in its user namespace only,
// to give each child its namespaces, mounts, user and loopback; each child
// drops them all before it is handed to the caller.
var zygoteCaps = []string{"CAP_SYS_ADMIN", "CAP_SETUID", "CAP_SETGID", "CAP_SETPCAP", "CAP_NET_ADMIN"}

// zygoteRefusable are the calls of refusedCalls that a zygote makes to
// specialize its children (unshare only without CLONE_NEWUSER); each child
// refuses them again in the filter it stacks.
var zygoteRefusable = []string{"mount", "umount2", "unshare", "setns"}

// zygoteFilter is a zygote's seccomp program: userNamespaceFilter but for
// zygoteRefusable.
func zygoteFilter(network bool) ([]byte, error) {
	var refused []refusal
	for _, r := range refusedCalls {
		if !slices.Contains(zygoteRefusable, r.name) {
			refused = append(refused, r)
		}
	}
	return filterProgram(refused, familiesUnless(network))
}

// ZygoteSupported reports why s cannot start zygotes: only a namespace
// sandbox of a root caller with CAP_SYS_ADMIN, which can map a user namespace
// onto its range of users, on an architecture whose seccomp filters it knows,
// does.
func (s *Sandbox) ZygoteSupported() error {
	switch {
	case s.mode != ModeNamespaces:
		return errors.New("sandbox: a zygote needs a namespace sandbox (this one is " + string(s.mode) + ")")
	case !s.privileged:
		return errors.New("sandbox: a zygote needs a namespace sandbox whose caller is root, which maps the zygote's user namespace onto its range of users")
	case s.filters[0] == nil:
		return errors.New("sandbox: a zygote needs seccomp filters, unknown for this architecture")
	}
	// The launcher takes a mount namespace of its own to show the
	// interpreter on the zygote's stage (a container's root seldom may).
	if caps, err := effectiveCapabilities(); err != nil || caps&(1<<unix.CAP_SYS_ADMIN) == 0 {
		return errors.New("sandbox: a zygote needs a caller with CAP_SYS_ADMIN, which its launcher's mount namespace takes")
	}
	return nil
}

// Zygote is a started zygote; it is safe for concurrent use.
type Zygote struct {
	cmd     *exec.Cmd
	ctl     *net.UnixConn
	cgroup  *cgroup
	started time.Time
	stderr  *lockedTail
	done    chan struct{} // closed once the zygote has exited

	mu       sync.Mutex
	nextID   int
	pending  map[int]chan forkReply
	children map[int]*Forked // by their pid in the zygote's PID namespace
	// early are the wait statuses of children that exited before Fork had
	// registered them (between the zygote's answer and Fork's taking mu).
	early  map[int]syscall.WaitStatus
	forks  int
	exited bool
	// stalled is set once a fork request went unanswered: z forks no more.
	stalled bool
	// reaped is set once the launcher has been waited for: its process
	// group number may be another's.
	reaped bool
}

// forkReply is the zygote's answer to a fork request.
type forkReply struct {
	ID    int    `json:"id"`
	PID   int    `json:"pid"`
	Error string `json:"error"`
	// Exit, when not 0, is a child that exited, and Status its wait status.
	Exit   int `json:"exit"`
	Status int `json:"status"`
}

// DefaultZygoteMemory is the default of ZygoteSpec.Memory.
const DefaultZygoteMemory = 256 << 20

// zygoteStartAllowance bounds a zygote's start, up to its "ready" line.
const zygoteStartAllowance = 20 * time.Second

// StartZygote starts a zygote of spec and waits until it writes "ready" on its
// stdout.
func (s *Sandbox) StartZygote(spec ZygoteSpec) (z *Zygote, err error) {
	if err := s.ZygoteSupported(); err != nil {
		return nil, err
	}
	if spec.Memory == 0 {
		spec.Memory = DefaultZygoteMemory
	}
	if s.zygotes.isClosed() {
		return nil, ErrSandboxClosed
	}
	var closers []io.Closer
	defer func() {
		for _, c := range closers {
			c.Close()
		}
	}()
	cg, err := s.cgroups.create(Limits{Memory: spec.Memory, Processes: 4096, CPU: DefaultCPU, Background: spec.Background}.withDefaults())
	if err != nil {
		return nil, err
	}
	defer func() {
		if err != nil {
			cg.remove()
		}
	}()
	pair, err := unix.Socketpair(unix.AF_UNIX, unix.SOCK_SEQPACKET|unix.SOCK_CLOEXEC, 0)
	if err != nil {
		return nil, fmt.Errorf("sandbox: the zygote's control socket: %w", err)
	}
	mine, theirs := os.NewFile(uintptr(pair[0]), "zygote-control"), os.NewFile(uintptr(pair[1]), "zygote-control")
	closers = append(closers, theirs)
	conn, err := net.FileConn(mine)
	mine.Close()
	if err != nil {
		return nil, fmt.Errorf("sandbox: the zygote's control socket: %w", err)
	}
	ctl := conn.(*net.UnixConn)
	defer func() {
		if err != nil {
			ctl.Close()
		}
	}()
	// Descriptors: 3 the configuration, 4 the control socket, then the
	// cgroup's files, the reaper, then bwrap's seccomp filter and the
	// read-only paths.
	cfg := zygoteConfig{Control: 4, Filter: s.filters[boolIndex(spec.Network)], Network: spec.Network, Config: spec.Config}
	files := []*os.File{nil, theirs}
	for _, p := range cg.procs() {
		f, err := os.OpenFile(p, os.O_WRONLY, 0)
		if err != nil {
			return nil, fmt.Errorf("sandbox: the zygote's cgroup: %w", err)
		}
		closers = append(closers, f)
		cfg.Cgroups = append(cfg.Cgroups, launchFD+len(files))
		files = append(files, f)
	}
	// A host that refuses executable memfds (vm.memfd_noexec = 2) starts
	// zygotes all the same: their children's inits stay the zygote's own
	// code, which costs memory, not bounds.
	if reaper, err := reaperFile(); err == nil && reaper != nil {
		closers = append(closers, reaper)
		cfg.Reaper = launchFD + len(files)
		files = append(files, reaper)
	}
	if spec.Executable != "" {
		exe, err := os.Open(spec.Executable)
		if err != nil {
			return nil, fmt.Errorf("sandbox: the zygote's executable: %w", err)
		}
		closers = append(closers, exe)
		cfg.Executable = launchFD + len(files)
		files = append(files, exe)
		if spawn, err := spawnFile(); err == nil && spawn != nil && !spec.NoSpawn {
			closers = append(closers, spawn)
			cfg.Spawn = launchFD + len(files)
			files = append(files, spawn)
		}
	}
	raw, err := json.Marshal(cfg)
	if err != nil {
		return nil, err
	}
	if files[0], err = filterPipe(raw); err != nil {
		return nil, err
	}
	closers = append(closers, files[0])
	filter, err := zygoteFilter(spec.Network)
	if err != nil {
		return nil, err
	}
	r, err := filterPipe(filter)
	if err != nil {
		return nil, err
	}
	closers = append(closers, r)
	args := []string{"--seccomp", strconv.Itoa(launchFD + len(files))}
	files = append(files, r)
	binds := spec.ReadOnly
	if spec.Network {
		binds = append(networkFiles(), binds...)
	}
	stage, err := makeStage()
	if err != nil {
		return nil, err
	}
	defer func() {
		if err != nil {
			_ = os.Remove(stage)
		}
	}()
	made := map[string]bool{}
	var bindArgs []string
	for i, p := range binds {
		bindArgs = append(bindArgs, parentDirs(p, made)...)
		bindArgs = append(bindArgs, "--ro-bind", stagedPath(stage, i), p)
	}
	args = append(args, "--die-with-parent", "--new-session", "--unshare-pid", "--unshare-ipc", "--unshare-uts", "--unshare-cgroup", "--hostname", "sandbox")
	if !spec.Network {
		args = append(args, "--unshare-net")
	}
	args = append(args, "--cap-drop", "ALL")
	for _, c := range zygoteCaps {
		args = append(args, "--cap-add", c)
	}
	args = append(args, "--ro-bind", "/usr", "/usr")
	args = append(args, systemLinks()...)
	args = append(args, "--proc", "/proc", "--perms", "0755", "--dir", "/dev")
	for _, dev := range devices {
		args = append(args, "--dev-bind", dev, dev)
	}
	args = append(args, "--perms", "1777", "--size", strconv.FormatInt(DefaultTmpSize, 10), "--tmpfs", "/tmp")
	args = append(args, bindArgs...)
	args = append(args, "--remount-ro", "/", "--chdir", "/tmp", "--")
	args = append(args, spec.Args...)

	helper := launch{Protocol: launchProtocol, Zygote: &zygoteHelper{
		Stage: stage, Sources: binds, Bwrap: s.bwrap, Args: args, Env: spec.Env, UIDBase: s.uidBase, Files: len(files),
	}}
	rawHelper, err := json.Marshal(helper)
	if err != nil {
		return nil, err
	}
	hp, err := filterPipe(rawHelper)
	if err != nil {
		return nil, err
	}
	closers = append(closers, hp)
	// The launcher, in a mount namespace of its own, shows the read-only paths
	// on the stage and starts bubblewrap in the zygote's user namespace.
	cmd := exec.Command(s.launcher, LauncherMarker)
	cmd.Env = []string{}
	cmd.ExtraFiles = append([]*os.File{hp}, files...)
	cmd.SysProcAttr = &syscall.SysProcAttr{Unshareflags: syscall.CLONE_NEWNS, Setpgid: true, Pdeathsig: syscall.SIGKILL}
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		return nil, err
	}
	z = &Zygote{cmd: cmd, ctl: ctl, cgroup: cg, stderr: &lockedTail{}, done: make(chan struct{}), pending: map[int]chan forkReply{}, children: map[int]*Forked{}, early: map[int]syscall.WaitStatus{}}
	cmd.Stderr = z.stderr
	if err := cmd.Start(); err != nil {
		return nil, fmt.Errorf("sandbox: starting the zygote (%s): %w", s.launcher, err)
	}
	z.started = time.Now()
	go func() {
		_ = cmd.Wait()
		z.mu.Lock()
		z.exited, z.reaped = true, true
		z.mu.Unlock()
		ctl.Close()
		cg.kill()
		cg.remove()
		_ = os.Remove(stage)
		close(z.done)
	}()
	ready := make(chan error, 1)
	go func() {
		line, err := bufio.NewReader(stdout).ReadString('\n')
		if err == nil && line != "ready\n" {
			err = fmt.Errorf("it wrote %q", line)
		}
		ready <- err
		_, _ = io.Copy(io.Discard, stdout)
	}()
	deadline := time.NewTimer(zygoteStartAllowance)
	defer deadline.Stop()
	// A zygote started in the background gets the usual weight once ready, or
	// half way to its deadline if the processors were so short that it is
	// not: its forks are answered at the usual weight. A failure leaves it at
	// the low one, which slows it only while the processors are short.
	var grace <-chan time.Time
	if spec.Background {
		halfway := time.NewTimer(zygoteStartAllowance / 2)
		defer halfway.Stop()
		grace = halfway.C
	}
wait:
	for {
		select {
		case err = <-ready:
			break wait
		case <-grace:
			_ = cg.foreground()
			grace = nil
		case <-deadline.C:
			err = errors.New("it did not get ready in time")
			break wait
		}
	}
	if err == nil {
		_ = cg.foreground()
	}
	if err != nil {
		_ = syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL)
		<-z.done
		return nil, fmt.Errorf("sandbox: starting the zygote: %v: %s", err, strings.TrimSpace(z.stderr.String()))
	}
	go z.readControl()
	if !s.zygotes.add(z) {
		z.Close()
		return nil, ErrSandboxClosed
	}
	return z, nil
}

// ErrSandboxClosed is StartZygote's error once the sandbox is closed.
var ErrSandboxClosed = errors.New("sandbox: closed")

// zygoteSet are the live zygotes of a sandbox. A nil set (a Sandbox made by
// hand, in tests) tracks none.
type zygoteSet struct {
	mu     sync.Mutex
	live   map[*Zygote]struct{}
	closed bool
}

// add tracks z until it exits; false when the set is closed.
func (zs *zygoteSet) add(z *Zygote) bool {
	if zs == nil {
		return true
	}
	zs.mu.Lock()
	defer zs.mu.Unlock()
	if zs.closed {
		return false
	}
	if zs.live == nil {
		zs.live = map[*Zygote]struct{}{}
	}
	zs.live[z] = struct{}{}
	go func() {
		<-z.done
		zs.mu.Lock()
		delete(zs.live, z)
		zs.mu.Unlock()
	}()
	return true
}

func (zs *zygoteSet) isClosed() bool {
	if zs == nil {
		return false
	}
	zs.mu.Lock()
	defer zs.mu.Unlock()
	return zs.closed
}

// close closes the set and returns the zygotes that live.
func (zs *zygoteSet) close() []*Zygote {
	if zs == nil {
		return nil
	}
	zs.mu.Lock()
	defer zs.mu.Unlock()
	zs.closed = true
	live := make([]*Zygote, 0, len(zs.live))
	for z := range zs.live {
		live = append(live, z)
	}
	return live
}

// readControl dispatches the zygote's replies and its children's exits.
func (z *Zygote) readControl() {
	buf := make([]byte, 4096)
	for {
		n, err := z.ctl.Read(buf)
		if err != nil || n == 0 {
			break
		}
		var r forkReply
		if json.Unmarshal(buf[:n], &r) != nil {
			continue
		}
		z.mu.Lock()
		if r.Exit != 0 {
			if f := z.children[r.Exit]; f != nil {
				delete(z.children, r.Exit)
				f.exit(syscall.WaitStatus(r.Status), true)
			} else {
				z.early[r.Exit] = syscall.WaitStatus(r.Status)
			}
		} else if ch := z.pending[r.ID]; ch != nil {
			delete(z.pending, r.ID)
			ch <- r
		}
		z.mu.Unlock()
	}
	// The zygote is gone, and with it its PID namespace and every child.
	z.mu.Lock()
	z.exited = true
	for id, ch := range z.pending {
		ch <- forkReply{ID: id, Error: ErrZygoteExited.Error()}
	}
	z.pending = map[int]chan forkReply{}
	children := z.children
	z.children = map[int]*Forked{}
	z.mu.Unlock()
	for _, f := range children {
		f.Kill()
		f.exit(0, false)
	}
}

// ErrZygoteExited is Fork's error when the zygote has exited, or stalled
// before.
var ErrZygoteExited = errors.New("sandbox: the zygote exited")

// ErrZygoteStalled is Fork's error when the zygote did not answer in time: it
// forks no more, and should be replaced and closed once its children are gone.
var ErrZygoteStalled = errors.New("sandbox: the zygote did not answer a fork request in time")

func isClosed(ch chan struct{}) bool {
	select {
	case <-ch:
		return true
	default:
		return false
	}
}

// Forks is how many children z has forked.
func (z *Zygote) Forks() int {
	z.mu.Lock()
	defer z.mu.Unlock()
	return z.forks
}

// Stalled reports whether a fork request of z went unanswered: z forks no
// more, and ends once its children have.
func (z *Zygote) Stalled() bool {
	z.mu.Lock()
	defer z.mu.Unlock()
	return z.stalled
}

// Children is how many of z's children live: those whose end z has not
// reported, less those whose init is seen to have ended (a stopped zygote
// reports no end).
func (z *Zygote) Children() int {
	z.mu.Lock()
	defer z.mu.Unlock()
	n := 0
	for _, f := range z.children {
		if !f.ended() {
			n++
		}
	}
	return n
}

// Memory is what z's cgroup holds. It grows with every child that lives: a
// page the zygote writes after a fork is copied, and the copy left to the
// child stays charged to the zygote's cgroup, as do the pages a child writes
// before it joins its own cgroup. A zygote whose cgroup fills is killed, and
// every child with it.
func (z *Zygote) Memory() (int64, bool) { return z.cgroup.memory() }

// Started is when z was started.
func (z *Zygote) Started() time.Time { return z.started }

// Done is closed once z has exited.
func (z *Zygote) Done() <-chan struct{} { return z.done }

// PID is the host pid of the zygote's own process (the interpreter), 0 when
// not known.
func (z *Zygote) PID() int {
	if z.cgroup == nil {
		return 0
	}
	// Its children pass through its cgroup before they join their own.
	pids := z.cgroup.roots()
	if len(pids) == 0 {
		return 0
	}
	return pids[0]
}

// Close kills z, and with it every child it forked. A zygote whose launcher
// has been reaped is not signalled: its process group number is free, and may
// be another process's by now (retire closes a dead zygote up to a second
// after its end).
func (z *Zygote) Close() {
	z.mu.Lock()
	if !z.reaped {
		_ = syscall.Kill(-z.cmd.Process.Pid, syscall.SIGKILL)
	}
	z.mu.Unlock()
	<-z.done
}

// Fork forks a child bounded by l, run as a user of its own; its stdin, stdout
// and stderr are the Forked's.
func (z *Zygote) Fork(s *Sandbox, l Limits) (f *Forked, err error) {
	l = l.withDefaults()
	uid, err := s.takeUID() // never the zygote's own (takeUID)
	if err != nil {
		return nil, err
	}
	keepUID := false // a child may still come to run as it
	defer func() {
		if err != nil && !keepUID {
			releaseUID(uid)
		}
	}()
	// The cgroup holds the child's init too (beside its worker, which alone
	// counts against RLIMIT_NPROC): one task more.
	cl := l
	if cl.Processes >= 0 {
		cl.Processes++
	}
	cg, err := s.cgroups.create(cl)
	if err != nil {
		return nil, err
	}
	var mine, theirs []*os.File
	defer func() {
		for _, f := range theirs {
			f.Close()
		}
		if err != nil {
			for _, f := range mine {
				f.Close()
			}
			cg.remove()
		}
	}()
	for i := range 3 {
		r, w, err := os.Pipe()
		if err != nil {
			return nil, err
		}
		if i == 0 {
			mine, theirs = append(mine, w), append(theirs, r)
		} else {
			mine, theirs = append(mine, r), append(theirs, w)
		}
	}
	for _, p := range cg.procs() {
		f, err := os.OpenFile(p, os.O_WRONLY, 0)
		if err != nil {
			return nil, fmt.Errorf("sandbox: the command's cgroup: %w", err)
		}
		theirs = append(theirs, f)
	}
	fds := make([]int, len(theirs))
	for i, f := range theirs {
		fds[i] = int(f.Fd())
	}
	type rlimit struct {
		Resource int    `json:"resource"`
		Value    uint64 `json:"value"`
	}
	var limits []rlimit
	for _, r := range limitValues(l, 0) {
		limits = append(limits, rlimit{r.resource, r.value.Cur})
	}
	z.mu.Lock()
	if z.exited || z.stalled {
		z.mu.Unlock()
		return nil, ErrZygoteExited
	}
	z.nextID++
	id := z.nextID
	ch := make(chan forkReply, 1)
	z.pending[id] = ch
	z.mu.Unlock()
	req, _ := json.Marshal(map[string]any{"id": id, "uid": uid - s.uidBase, "limits": limits, "tmpSize": l.TmpSize, "cgroups": len(fds) - 3})
	if _, _, err := z.ctl.WriteMsgUnix(req, unix.UnixRights(fds...), nil); err != nil {
		z.mu.Lock()
		delete(z.pending, id)
		exited := z.exited
		z.mu.Unlock()
		if exited || isClosed(z.done) {
			return nil, ErrZygoteExited
		}
		return nil, fmt.Errorf("sandbox: asking the zygote to fork: %w", err)
	}
	var r forkReply
	select {
	case r = <-ch:
	case <-time.After(zygoteStartAllowance):
		// Killing the zygote would kill every worker it forked, of every
		// function: it is only marked, forks no more, and ends with its last
		// child. A child it forks late finds its cgroup killed, and its user
		// is never given to another.
		z.mu.Lock()
		delete(z.pending, id)
		z.stalled = true
		z.mu.Unlock()
		cg.kill()
		keepUID = true
		return nil, ErrZygoteStalled
	}
	if r.Error == ErrZygoteExited.Error() {
		return nil, ErrZygoteExited
	}
	if r.Error != "" {
		return nil, fmt.Errorf("sandbox: the zygote could not fork: %s", r.Error)
	}
	f = &Forked{Stdin: mine[0], Stdout: mine[1], Stderr: mine[2], cgroup: cg, uid: uid, zygote: z, exited: make(chan struct{})}
	z.mu.Lock()
	if z.exited {
		z.mu.Unlock()
		cg.kill()
		f.exit(0, false)
		return f, nil
	}
	z.forks++
	if status, ok := z.early[r.PID]; ok {
		// It ended before it was registered (it failed to specialize).
		delete(z.early, r.PID)
		z.mu.Unlock()
		f.exit(status, true)
		return f, nil
	}
	z.children[r.PID] = f
	// The host pid is the zygote's child's whose NSpid names r.PID; the pidfd
	// is kept only if that still holds once it is open (a reaped child's pid
	// may be another process's).
	if pid := z.hostPID(r.PID); pid != 0 {
		if fd, err := unix.PidfdOpen(pid, 0); err == nil {
			if z.hostPID(r.PID) == pid {
				f.pid, f.pidfd = pid, fd
			} else {
				_ = unix.Close(fd)
			}
		}
	}
	z.mu.Unlock()
	return f, nil
}

// hostPID is the host pid of the zygote's child whose pid in the zygote's PID
// namespace is nsPID: the child of the zygote's process whose NSpid names it.
// The kernel lists a process's children oldest first, and the one sought has
// just been forked: the newest are read first, so that a fork reads one
// child's status, not every one of a zygote's hundreds of workers'.
func (z *Zygote) hostPID(nsPID int) int {
	zp := z.PID()
	if zp == 0 {
		return 0
	}
	raw, _ := os.ReadFile(fmt.Sprintf("/proc/%d/task/%d/children", zp, zp))
	children := strings.Fields(string(raw))
	slices.Reverse(children)
	for _, field := range children {
		pid, _ := strconv.Atoi(field)
		status, _ := os.ReadFile("/proc/" + field + "/status")
		for _, line := range strings.Split(string(status), "\n") {
			if rest, ok := strings.CutPrefix(line, "NSpid:"); ok {
				if ids := strings.Fields(rest); len(ids) > 1 && ids[1] == strconv.Itoa(nsPID) {
					return pid
				}
			}
		}
	}
	return 0
}

// makeStage makes the empty directory a zygote's launcher shows its read-only
// paths on: in the first of /run and the temporary directory whose parents
// anyone may traverse, as the zygote's user namespace's root must.
// A stage left by a process that ended before its zygote (it is empty: its
// tmpfs was its launcher's mount namespace's) is removed by the next.
func makeStage() (string, error) {
	var errs []error
	for _, parent := range []string{"/run", os.TempDir()} {
		if !traversable(parent) {
			errs = append(errs, fmt.Errorf("%s: not traversable by every user", parent))
			continue
		}
		removeStaleStages(parent)
		dir, err := os.MkdirTemp(parent, stagePrefix+strconv.Itoa(os.Getpid())+"-")
		if err == nil {
			err = os.Chmod(dir, 0o755)
		}
		if err == nil {
			return dir, nil
		}
		errs = append(errs, err)
	}
	return "", fmt.Errorf("sandbox: the zygote's stage: %w", errors.Join(errs...))
}

// traversable reports whether every user may traverse dir and its parents.
func traversable(dir string) bool {
	for ; ; dir = filepath.Dir(dir) {
		fi, err := os.Stat(dir)
		if err != nil || fi.Mode().Perm()&0o001 == 0 {
			return false
		}
		if dir == "/" {
			return true
		}
	}
}

const stagePrefix = "metalambda-zygote-"

// removeStaleStages removes the empty stages in parent of processes that no
// longer run.
func removeStaleStages(parent string) {
	dirs, _ := filepath.Glob(filepath.Join(parent, stagePrefix+"*"))
	for _, dir := range dirs {
		pid, _, _ := strings.Cut(strings.TrimPrefix(filepath.Base(dir), stagePrefix), "-")
		if n, err := strconv.Atoi(pid); err == nil && syscall.Kill(n, 0) == syscall.ESRCH {
			_ = syscall.Rmdir(dir)
		}
	}
}
