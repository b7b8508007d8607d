package lambda

import (
	"bytes"
	"cmp"
	"context"
	_ "embed"
	"errors"
	"fmt"
	"io"

	"log/slog"
	"os"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/metalambda/metalambda/internal/gateway/sandbox"
)

// Values of Options.PythonZygote.
const (
	// ZygoteAuto forks Python workers from a zygote where the sandbox can
	// start one (a namespace sandbox of a root gateway), and starts each
	// with its own interpreter elsewhere.
	ZygoteAuto = "auto"
	// ZygoteOff starts each Python worker with its own interpreter.
	ZygoteOff = "off"
)

// DefaultPythonZygote is the default of Options.PythonZygote: where the
// sandbox cannot start a zygote, NewPython logs why, and each worker starts
// its own interpreter.
const DefaultPythonZygote = ZygoteAuto

// PythonZygoteMarker is an argument of a Python zygote's command line, which
// its children share until they load a function.
const PythonZygoteMarker = "metalambda-python-zygote"

// DefaultScriptZygote is the default of Options.ScriptZygote.
const DefaultScriptZygote = ZygoteAuto

// ScriptZygoteMarker is an argument of the command line of a zygote of
// JavaScript or Jsonnet workers (scripts.zygoteFor).
const ScriptZygoteMarker = "metalambda-script-zygote"

// zygoteMaxForks and zygoteMaxAge bound how many workers, and for how long,
// share one zygote's image: its memory layout, stack canary and string hash
// secret. A replacement is started in the background a quarter before either
// (prestart), so that it is usually ready before the current one is spent: a
// fork that finds no zygote starts its worker with its own interpreter, seven
// times slower. It takes over once ready, and the retired zygote ends once its
// last child has.
var (
	zygoteMaxForks = 64
	zygoteMaxAge   = 10 * time.Minute
)

// zygoteRetryAfter is how long a zygote that failed to start is not tried
// again: meanwhile workers are started with their own interpreter.
const zygoteRetryAfter = 30 * time.Second

//go:embed python_zygote.py
var pythonZygoteScript string

// zygotePreload are the modules a zygote loads beside the worker's, common in
// functions: their pages are then shared by every worker.
var zygotePreload = []string{"re", "datetime", "base64", "hashlib", "collections", "random", "resource", "time", "struct", "copy", "fcntl"}

// zygoteConfig is what a Python zygote is given: the worker's code and the
// modules to preload, nothing of any function.
type zygoteConfig struct {
	Worker  string   `json:"worker"`
	Preload []string `json:"preload"`
}

// ParsePythonZygote checks a value of Options.PythonZygote.
func ParsePythonZygote(v string) (string, error) {
	switch v {
	case ZygoteAuto, ZygoteOff:
		return v, nil
	}
	return "", fmt.Errorf("python zygote %q: want auto or off", v)
}

// zygotes is the zygote of one network view of the Python runtime, started at
// the first fork, replaced past zygoteMaxForks or zygoteMaxAge, and started
// again when it dies. A fork that finds none running gets errNoZygote: its
// worker is started with its own interpreter instead.
type zygotes struct {
	sb   *sandbox.Sandbox
	spec sandbox.ZygoteSpec
	// name is what the logs call it ("python zygote").
	name string
	// executes: its children execute a program of their own once
	// specialized (a JavaScript or Jsonnet worker; see scripts.zygoteFor), so
	// they share no memory layout, canary or hash secret with it, and no
	// bound of forks or age applies; its memory still does.
	executes bool
	// limits bound the child that checks a new zygote of executes (check).
	limits sandbox.Limits
	// broken is why zygotes of executes are not used at all: their children
	// could not execute the program, with metalambda-spawn or without (check).
	broken error

	mu       sync.Mutex
	current  *sandbox.Zygote
	granted  int // forks granted from current, which zygoteMaxForks bounds
	starting bool
	failed   time.Time // when the last start failed
	users    int       // the open functions of the view (spares.use)
	idle     *time.Timer
	misses   atomic.Uint64                // forks that found no zygote to fork from
	retiring map[*sandbox.Zygote]struct{} // retired, ending with their last child
	read     map[*sandbox.Zygote]int64    // memory, when last read (memory)
	// takeover are called, each on a goroutine of its own, when a new zygote
	// becomes the current one (the view's spares, which then replace those the
	// retired one forked).
	takeover []func()
}

// onTakeover has f called whenever a new zygote becomes the current one.
func (zs *zygotes) onTakeover(f func()) {
	zs.mu.Lock()
	defer zs.mu.Unlock()
	zs.takeover = append(zs.takeover, f)
}

// zygoteIdle is how long a zygote outlives the last function of its network
// view, so that a function registered again soon after finds it.
const zygoteIdle = time.Minute

// use adds a user.
func (zs *zygotes) use() {
	zs.mu.Lock()
	defer zs.mu.Unlock()
	zs.users++
	if zs.idle != nil {
		zs.idle.Stop()
		zs.idle = nil
	}
}

// release removes a user; zygoteIdle after the last, with no new one, the
// zygote is retired.
func (zs *zygotes) release() {
	zs.mu.Lock()
	defer zs.mu.Unlock()
	zs.users--
	if zs.users > 0 {
		return
	}
	zs.idle = time.AfterFunc(zygoteIdle, func() {
		zs.mu.Lock()
		idle := zs.users == 0
		zs.mu.Unlock()
		if idle {
			zs.close()
		}
	})
}

var errNoZygote = errors.New("no zygote running")

// fork forks a worker bounded by l from the current zygote. wait starts a
// zygote when none runs and waits for it (a function's first worker);
// otherwise the start is left in the background. A zygote past its bounds
// (zygoteMaxForks, zygoteMaxAge, half its memory) forks no more, even while
// its replacement starts: the fork gets errNoZygote meanwhile (counted in
// misses).
func (zs *zygotes) fork(l sandbox.Limits, wait bool) (*sandbox.Forked, error) {
	zs.mu.Lock()
	if zs.broken != nil {
		zs.mu.Unlock()
		zs.misses.Add(1)
		return nil, errNoZygote
	}
	z := zs.current
	if z != nil && isDone(z.Done()) {
		z = nil
		zs.setCurrentLocked(nil)
	}
	if z == nil || zs.spent(z) {
		zs.startLocked(z == nil && wait)
		z = zs.current
		if z != nil && zs.spent(z) {
			z = nil
		}
	}
	if z != nil {
		zs.granted++
		if zs.prestart(z) {
			zs.startLocked(false)
		}
	}
	zs.mu.Unlock()
	if z == nil {
		zs.misses.Add(1)
		return nil, errNoZygote
	}
	f, err := z.Fork(zs.sb, l)
	switch {
	case err == nil:
		return f, nil
	case errors.Is(err, sandbox.ErrZygoteExited):
		// Killed meanwhile: the next fork starts another.
	case errors.Is(err, sandbox.ErrZygoteStalled):
		// Replaced; it ends once its last child has, so that the workers it
		// forked, of every function, keep serving.
		zs.mu.Lock()
		if zs.current == z {
			zs.setCurrentLocked(nil)
			go zs.retire(z)
		}
		zs.mu.Unlock()
		slog.Warn(zs.name+": a fork request went unanswered; the zygote is replaced", "pid", z.PID())
	default:
		// The worker starts in a sandbox of its own rather than fail its call.
		slog.Warn(zs.name+": fork failed; the worker starts in a sandbox of its own", "error", err)
	}
	zs.misses.Add(1)
	return nil, errNoZygote
}

// spent reports whether z, the current zygote (zs.mu held), is past its
// bounds: zygoteMaxForks forks granted, zygoteMaxAge, or half its cgroup's
// memory, which the pages its live children keep fill (Zygote.Memory).
func (zs *zygotes) spent(z *sandbox.Zygote) bool {
	if !zs.executes && (zs.granted >= zygoteMaxForks || time.Since(z.Started()) > zygoteMaxAge) {
		return true
	}
	limit := cmp.Or(zs.spec.Memory, sandbox.DefaultZygoteMemory)
	m, ok := z.Memory()
	return ok && m > limit/2
}

// prestart reports whether the current zygote z (zs.mu held) is within a
// quarter of its bounds of forks or age, when its replacement is started.
func (zs *zygotes) prestart(z *sandbox.Zygote) bool {
	return !zs.executes && (zs.granted >= zygoteMaxForks-zygoteMaxForks/4 || time.Since(z.Started()) > zygoteMaxAge-zygoteMaxAge/4)
}

// startLocked starts a replacement of the current zygote in the background,
// or, with wait, in the caller (zs.mu held, released meanwhile).
func (zs *zygotes) startLocked(wait bool) {
	if zs.starting || time.Since(zs.failed) < zygoteRetryAfter {
		return
	}
	zs.starting = true
	if wait {
		zs.mu.Unlock()
		zs.start(false)
		zs.mu.Lock()
		return
	}
	// Ahead of need, while the current zygote still forks, the start yields
	// the processors; in place of one gone or spent, it does not.
	go zs.start(zs.current != nil && !isDone(zs.current.Done()) && !zs.spent(zs.current))
}

// start starts a zygote; in the background (sandbox.ZygoteSpec.Background)
// when it replaces one that still forks.
func (zs *zygotes) start(background bool) {
	spec := zs.spec
	spec.Background = background
	z, err := zs.sb.StartZygote(spec)
	if err == nil && zs.executes {
		z, err = zs.checked(z, spec)
	}
	zs.mu.Lock()
	defer zs.mu.Unlock()
	zs.starting = false
	old := zs.current
	if err != nil {
		zs.failed = time.Now()
		if !errors.Is(err, sandbox.ErrSandboxClosed) && zs.broken == nil { // the gateway is stopping, or checked said why
			slog.Warn(zs.name+": not started; workers start in sandboxes of their own meanwhile", "error", err)
		}
		if old == nil || !zs.spent(old) {
			return
		}
		z = nil // a zygote past its bounds is retired all the same
	}
	if old != nil {
		go zs.retire(old)
	}
	zs.setCurrentLocked(z)
	if z != nil && old != nil {
		for _, f := range zs.takeover {
			go f()
		}
	}
}

// checked returns z, a new zygote of spec whose children execute a program,
// once one child has executed it (check). A host may refuse the execution of
// metalambda-spawn's memfd: the zygote is then started again with its
// children specializing themselves in its interpreter (ZygoteSpec.NoSpawn),
// for good. One that refuses the program itself (a security module that
// checks paths, a file system mounted noexec) marks zs broken: its workers
// start without a zygote, as when none can start, and the warning is logged
// once.
func (zs *zygotes) checked(z *sandbox.Zygote, spec sandbox.ZygoteSpec) (*sandbox.Zygote, error) {
	err := zs.check(z)
	if err == nil {
		return z, nil
	}
	z.Close()
	// spawn_child's message: the execution of metalambda-spawn failed.
	if !spec.NoSpawn && sandbox.SpawnAvailable() && strings.Contains(err.Error(), "starting metalambda-spawn") {
		slog.Warn(zs.name+": its children could not start with metalambda-spawn; they specialize themselves in the zygote's interpreter instead", "error", err)
		spec.NoSpawn = true
		z, err2 := zs.sb.StartZygote(spec)
		if err2 != nil {
			return nil, err2
		}
		if err = zs.check(z); err == nil {
			zs.mu.Lock()
			zs.spec.NoSpawn = true
			zs.mu.Unlock()
			return z, nil
		}
		z.Close()
	}
	zs.mu.Lock()
	zs.broken = err
	zs.mu.Unlock()
	slog.Warn(zs.name+": not used, as its children cannot execute the worker; each worker starts in a sandbox of its own", "error", err)
	return nil, err
}

// check forks one child of z, a zygote whose children execute a program, and
// lets it end at once (its stdin closed, which a worker that started ends
// with status 0): a host that refuses the execution shows it here, before any
// function's worker depends on it.
func (zs *zygotes) check(z *sandbox.Zygote) error {
	f, err := z.Fork(zs.sb, zs.limits)
	if err != nil {
		return err
	}
	f.Stdin.Close()
	defer f.Stdout.Close()
	defer f.Stderr.Close()
	go func() { _, _ = io.Copy(io.Discard, f.Stdout) }()
	stderr := make(chan []byte, 1)
	go func() { b, _ := io.ReadAll(io.LimitReader(f.Stderr, 4096)); stderr <- b }()
	ctx, cancel := context.WithTimeout(context.Background(), pythonStartAllowance)
	defer cancel()
	ws, known := f.Wait(ctx)
	if !known {
		f.Kill()
		return errors.New("its first child did not end once its stdin was closed")
	}
	var tail []byte
	select {
	case tail = <-stderr:
	case <-time.After(time.Second):
	}
	if !ws.Exited() || ws.ExitStatus() != 0 {
		return fmt.Errorf("its first child, its stdin closed, ended with status %d (signal %d), not 0: %s", ws.ExitStatus(), max(ws.Signal(), 0), bytes.TrimSpace(tail))
	}
	return nil
}

// setCurrentLocked makes z the current zygote (zs.mu held).
func (zs *zygotes) setCurrentLocked(z *sandbox.Zygote) {
	zs.current, zs.granted = z, 0
}

// retired reports whether z no longer forks for zs: replaced, stalled, dead or
// closed. A current zygote past zygoteMaxAge gets its replacement started
// here, so that it is retired even when no worker is forked.
func (zs *zygotes) retired(z *sandbox.Zygote) bool {
	zs.mu.Lock()
	defer zs.mu.Unlock()
	return zs.retiredLocked(z)
}

func (zs *zygotes) retiredLocked(z *sandbox.Zygote) bool {
	if z != zs.current {
		return true
	}
	if !zs.executes && time.Since(z.Started()) > zygoteMaxAge {
		zs.startLocked(false)
	}
	return false
}

// recycle reports whether a worker forked by z, idle now, is to end, so that
// the next call starts one from the current zygote and z ends with its last
// child (retire), however often its workers are called: a worker of a retired
// zygote past zygoteMaxAge (so no zygote lives much longer than that, whatever
// its workers do), or of one that stalled (which reports no child's end).
//
// Not a worker of a zygote retired for its forks or its memory before its
// age: any tenant can fork a zygote past zygoteMaxForks in seconds (a
// function whose worker exits in every call), and ending the warm workers of
// every other tenant at each such rotation would throw their state away at
// the pace that tenant sets. Those workers keep the image they were forked
// with, which rotating bounds, and move at the zygote's age.
func (zs *zygotes) recycle(z *sandbox.Zygote) bool {
	zs.mu.Lock()
	defer zs.mu.Unlock()
	return zs.retiredLocked(z) && ((!zs.executes && time.Since(z.Started()) > zygoteMaxAge) || z.Stalled())
}

// retiring are the zygotes that end once their last child has (retire).
var retiring sync.Map

// retire ends z once its last child has ended.
func retire(z *sandbox.Zygote) {
	retiring.Store(z, true)
	defer retiring.Delete(z)
	for z.Children() > 0 && !isDone(z.Done()) {
		time.Sleep(time.Second)
	}
	z.Close()
}

// close retires the current zygote.
func (zs *zygotes) close() {
	zs.mu.Lock()
	z := zs.current
	zs.setCurrentLocked(nil)
	zs.mu.Unlock()
	if z != nil {
		go zs.retire(z)
	}
}

// retire ends z, retired from zs, once its last child has ended; until then
// its memory counts in zs's.
func (zs *zygotes) retire(z *sandbox.Zygote) {
	zs.mu.Lock()
	if zs.retiring == nil {
		zs.retiring = map[*sandbox.Zygote]struct{}{}
	}
	zs.retiring[z] = struct{}{}
	zs.mu.Unlock()
	retire(z)
	zs.mu.Lock()
	delete(zs.retiring, z)
	delete(zs.read, z)
	zs.mu.Unlock()
}

// memory is what the view's zygotes hold, the current one and those retired
// that still live: their cgroups' memory, which the gateway's memory budget
// counts with the workers'. Unless fresh, a zygote read before counts with its
// last reading, as a worker does, so that a cold start reads no cgroup file of
// a zygote already known.
func (zs *zygotes) memory(fresh bool) int64 {
	zs.mu.Lock()
	live := make([]*sandbox.Zygote, 0, 1+len(zs.retiring))
	if zs.current != nil {
		live = append(live, zs.current)
	}
	for z := range zs.retiring {
		live = append(live, z)
	}
	known := make([]int64, len(live))
	for i, z := range live {
		m, ok := zs.read[z]
		if !ok {
			m = -1
		}
		known[i] = m
	}
	if len(zs.read) > len(live) { // a zygote that died as current was never retired
		for z := range zs.read {
			if !slices.Contains(live, z) {
				delete(zs.read, z)
			}
		}
	}
	zs.mu.Unlock()
	var total int64
	for i, z := range live {
		m := known[i]
		if fresh || m < 0 {
			m, _ = z.Memory()
			zs.mu.Lock()
			if zs.read == nil {
				zs.read = map[*sandbox.Zygote]int64{}
			}
			if _, retiring := zs.retiring[z]; retiring || z == zs.current {
				zs.read[z] = m
			}
			zs.mu.Unlock()
		}
		total += m
	}
	return total
}

// stats are the current zygote's host pid and forks, for tests; 0, 0 when none
// runs.
func (zs *zygotes) stats() (pid, forks int) {
	zs.mu.Lock()
	defer zs.mu.Unlock()
	if zs.current == nil {
		return 0, 0
	}
	return zs.current.PID(), zs.current.Forks()
}

func isDone(ch <-chan struct{}) bool {
	select {
	case <-ch:
		return true
	default:
		return false
	}
}

// forkedWorkers maps each forked worker (its *sandbox.Forked) to its
// forkedEntry, which workerPIDs reads: a Python worker's command line is its
// zygote's, and an executed one's names no worker.
var forkedWorkers sync.Map

// forkedEntry is a forked worker's id and the marker of its kind
// (PythonWorkerMarker, ScriptWorkerMarker).
type forkedEntry struct {
	id, marker string
}

// startForked makes w a child of the zygote of s; errNoZygote when none runs.
func (w *pyWorker) startForked(s *workerSpec) error {
	f, err := s.zygote.fork(s.limits, true)
	if err != nil {
		return err
	}
	w.fk, w.zygotes = f, s.zygote
	w.stdin = f.Stdin
	forkedWorkers.Store(f, forkedEntry{id: w.id, marker: s.marker})
	w.drainStderr(f.Stderr)
	w.stdout = f.Stdout
	go w.reap()
	return nil
}

// recycleDue reports whether the worker, idle now, is to end because its
// zygote is retired (zygotes.recycle).
func (w *pyWorker) recycleDue() bool {
	return w.fk != nil && w.zygotes != nil && w.zygotes.recycle(w.fk.Zygote())
}

// retiredSpare reports whether the worker, a spare, was forked by a retired
// zygote: it is dropped, as a fresh one costs only a fork.
func (w *pyWorker) retiredSpare() bool {
	return w.fk != nil && w.zygotes != nil && w.zygotes.retired(w.fk.Zygote())
}

// waitForked waits for a forked worker's end.
func (w *pyWorker) waitForked() {
	w.fk.Wait(context.Background())
	forkedWorkers.Delete(w.fk)
}

// forkedState describes how a forked worker ended.
func (w *pyWorker) forkedState() string {
	select {
	case <-w.fk.Exited():
	default:
		return "still running"
	}
	ws, known := w.fk.Wait(context.Background())
	switch {
	case !known:
		return "signal: killed (its zygote ended)"
	case ws.Signaled():
		return "signal: " + ws.Signal().String()
	case ws.ExitStatus() > 128 && ws.ExitStatus() < 128+65: // the worker's, from its init
		return "signal: " + syscall.Signal(ws.ExitStatus()-128).String()
	default:
		return "exit status " + strconv.Itoa(ws.ExitStatus())
	}
}

// forkedPIDs are the host pids of this process's forked workers of a kind
// (their marker; the worker's own process, not its init's).
func forkedPIDs(marker, function string) []int {
	var pids []int
	forkedWorkers.Range(func(k, v any) bool {
		f, fw := k.(*sandbox.Forked), v.(forkedEntry)
		pid := f.Worker()
		if pid == 0 || isDone(f.Exited()) || fw.marker != marker {
			return true
		}
		if function != "" {
			fn, ok := workerFunctions.Load(fw.id)
			if !ok || fn != function {
				return true
			}
		}
		pids = append(pids, pid)
		return true
	})
	return pids
}

// zygoteFor is the zygote of a network view, nil when Options.PythonZygote
// is off or the sandbox cannot start one.
func (p *python) zygoteFor(sb *sandbox.Sandbox, interpreter string, binds []string, network bool) *zygotes {
	if p.opts.PythonZygote != ZygoteAuto || sb == nil || sb.ZygoteSupported() != nil {
		return nil
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	if zs := p.zygotes[network]; zs != nil {
		return zs
	}
	if p.zygotes == nil {
		p.zygotes = map[bool]*zygotes{}
	}
	zs := &zygotes{sb: sb, name: "python zygote", spec: sandbox.ZygoteSpec{
		Args:     []string{interpreter, "-I", "-S", "-c", pythonZygoteScript, PythonZygoteMarker, "gateway=" + strconv.Itoa(os.Getpid()), "site-packages=" + p.sitePackages},
		Env:      environ(pythonBaseEnv),
		ReadOnly: binds,
		Network:  network,
		Config:   zygoteConfig{Worker: pythonWorkerScript, Preload: zygotePreload},
	}}
	p.zygotes[network] = zs
	p.pools.addMemory(zs.memory)
	allZygotes.Store(zs, true)
	return zs
}

// allZygotes are the zygotes of every Python runtime of the process (the
// tests end them all).
var allZygotes sync.Map

// ForkedProcess is a live forked worker of this process: the worker's host
// pid, its init's, the function it serves ("" for a spare), and whether it
// is a JavaScript or Jsonnet worker (executed by a script zygote) rather
// than a Python one.
type ForkedProcess struct {
	Worker, Init int
	Function     string
	Script       bool
}

// ForkedProcesses lists this process's live forked workers, for the
// benchmarks that split a gateway's memory by process.
func ForkedProcesses() []ForkedProcess {
	var out []ForkedProcess
	forkedWorkers.Range(func(k, v any) bool {
		f, fw := k.(*sandbox.Forked), v.(forkedEntry)
		if pid := f.Worker(); pid != 0 && !isDone(f.Exited()) {
			fn, _ := workerFunctions.Load(fw.id)
			name, _ := fn.(string)
			out = append(out, ForkedProcess{Worker: pid, Init: f.PID(), Function: name, Script: fw.marker == ScriptWorkerMarker})
		}
		return true
	})
	return out
}
