package lambda

import (
	"bufio"
	"bytes"
	"cmp"
	"context"
	_ "embed"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"sort"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/metalambda/metalambda/internal/gateway/sandbox"
	"github.com/metalambda/metalambda/internal/reservedenv"
	"github.com/metalambda/metalambda/internal/tracing"
	"golang.org/x/sys/unix"
)

// DefaultPythonHandler is the function a Python source defines when
// Function.Handler is empty.
const DefaultPythonHandler = "sync"

// PythonWorkerMarker is an argument of every Python worker's command line, so
// that its processes can be recognised (ps, /proc).
const PythonWorkerMarker = "metalambda-python-worker"

// PythonWorkerPIDs returns the pids of the Python workers that the process gateway
// started, found by their command lines in /proc: every one (spares too) when
// function is empty, else those given function ("namespace/name"), which only
// the gateway's own process knows (a worker learns its function after it
// starts). The bubblewrap process around a sandboxed worker is left out.
func PythonWorkerPIDs(gateway int, function string) []int {
	return workerPIDs(PythonWorkerMarker, gateway, function)
}

// workerPIDs finds the workers whose command lines hold marker and gateway, and
// that serve function unless it is empty.
func workerPIDs(marker string, gateway int, function string) []int {
	want := []string{marker, "gateway=" + strconv.Itoa(gateway)}
	var forked []int // known by this process, whose command lines tell less
	if gateway == os.Getpid() {
		forked = forkedPIDs(marker, function)
	}
	cmdlines, _ := filepath.Glob("/proc/[0-9]*/cmdline")
	pids := slices.Clone(forked)
	for _, path := range cmdlines {
		raw, err := os.ReadFile(path)
		if err != nil {
			continue
		}
		args := strings.Split(string(raw), "\x00")
		// bubblewrap's processes and a script worker's init (metalambda-spawn)
		// carry the worker's command line among their own arguments.
		if base := filepath.Base(args[0]); base == "bwrap" || base == sandbox.SpawnProgram || !containsAll(args, want) {
			continue
		}
		if function != "" && !servesFunction(args, function) {
			continue
		}
		pid, _ := strconv.Atoi(filepath.Base(filepath.Dir(path)))
		if !slices.Contains(forked, pid) {
			pids = append(pids, pid)
		}
	}
	return pids
}

// servesFunction reports whether the worker with these arguments was given
// function, as this process's workerFunctions records it.
func servesFunction(args []string, function string) bool {
	for _, a := range args {
		if id, ok := strings.CutPrefix(a, "worker="); ok {
			fn, ok := workerFunctions.Load(id)
			return ok && fn == function
		}
	}
	return false
}

func containsAll(have, want []string) bool {
	for _, w := range want {
		if !slices.Contains(have, w) {
			return false
		}
	}
	return true
}

// pythonStartAllowance is added to the function's timeout to bound a worker's
// start (interpreter start-up and loading the source).
const pythonStartAllowance = 10 * time.Second

// pythonKillWait bounds how long killing a worker waits for it to be reaped.
const pythonKillWait = 5 * time.Second

//go:embed python_worker.py
var pythonWorkerScript string

// python runs functions in warm CPython worker processes, each in its own sandbox
// (package sandbox): its own user, PID, mount and network namespaces (the host's
// network when Function.Network asks for it), a read-only
// view of /usr and the interpreter's installation, a private /tmp, a clean
// environment, no capabilities and rlimits, its address space bounded by
// Options.PythonMemoryLimit. With Options.InsecureNoSandbox a worker is a plain
// process in its own process group and temporary directory.
type python struct {
	opts   Options
	pools  *poolSet
	spares *spareSets

	mu           sync.Mutex
	zygotes      map[bool]*zygotes // by network view, with Options.PythonZygote
	interpreter  string            // resolved Options.PythonBinary, once known
	binds        []string          // the interpreter's installation, outside /usr
	sitePackages string            // its site-packages directories, a JSON list
	worker       compiledWorker    // the worker's code, compiled by the interpreter
}

// NewPython returns the Python runtime. A source defines
//
//	def sync(request): return response
//
// (the handler named by Function.Handler, default "sync") taking and returning
// dicts. What it prints, on stdout or stderr, is the call's logs.
func NewPython(opts Options) Runtime {
	opts = opts.withDefaults()
	if opts.PythonZygote == ZygoteAuto && opts.Sandbox != nil && !opts.InsecureNoSandbox {
		if err := opts.Sandbox.ZygoteSupported(); err != nil {
			slog.Info("python zygote: none here; each Python worker starts its own interpreter", "reason", err)
		}
	}
	pools := newPoolSet(opts.MemoryBudget)
	return &python{opts: opts, pools: pools, spares: &spareSets{want: opts.WorkerSpares, pools: pools}}
}

// Stats counts the workers of all open Python functions.
func (p *python) Stats() PoolStats {
	return p.pools.Stats()
}

// Compile starts a first worker, which compiles and loads the source: a syntax
// error, a top-level exception or a missing handler is a *CompileError.
func (p *python) Compile(fn Function) (Compiled, error) {
	if err := checkEnv(fn); err != nil {
		return nil, err
	}
	sb, err := p.opts.workerSandbox()
	if err != nil {
		return nil, fmt.Errorf("function %s: the python runtime has no sandbox (the gateway's --insecure-no-sandbox runs without one): %w", fn.Name, err)
	}
	interpreter, binds, err := p.resolveInterpreter()
	if err != nil {
		return nil, fmt.Errorf("function %s: %w", fn.Name, err)
	}
	memoryLimit := max(p.opts.PythonMemoryLimit, 0)
	spec := workerSpec{
		command: []string{interpreter, "-I", "-S", "-c", p.worker.boot, "site-packages=" + p.sitePackages}, marker: PythonWorkerMarker,
		preamble: p.worker.code, env: environ(pythonBaseEnv), binds: binds, network: fn.Network, sandbox: sb, maxReply: p.opts.MaxReplyBytes,
		limits: p.opts.workerLimits(p.opts.PythonMemoryLimit, p.opts.PythonMemoryLimit),
	}
	spec.zygote = p.zygoteFor(sb, interpreter, binds, fn.Network)
	f := &pyFunction{
		fn: fn, timeout: p.opts.timeout(fn), checkTasks: true, idleTimeout: p.opts.WorkerIdleTimeout,
		spares: p.spares.get(spec, sb),
	}
	if f.fn.Handler == "" {
		f.fn.Handler = DefaultPythonHandler
	}
	first, err := json.Marshal(pyInit{Source: f.fn.Source, Handler: f.fn.Handler, Filename: f.fn.Name, MemoryLimit: memoryLimit, Env: fn.Env})
	if err != nil {
		return nil, fmt.Errorf("function %s: %w", fn.Name, err)
	}
	f.init = append(first, '\n')
	if err := f.warm(p.opts.PythonPoolSize, p.pools); err != nil {
		return nil, err
	}
	return f, nil
}

// warm makes f's pool of workers and starts the first, so that a source that does
// not load fails here, at compile time.
func (f *pyFunction) warm(size int, pools *poolSet) error {
	f.pool = newPool(size, pools, f.startWorker, (*pyWorker).kill, f.keepIdle)
	f.pool.memory = (*pyWorker).memory
	f.pool.recycle = (*pyWorker).recycleDue
	w, err := f.pool.get(context.Background())
	if err != nil {
		f.Close()
		return err
	}
	// The worker that checked the source is not kept: a registered function
	// holds no memory until it is called. Only now that the function loads do
	// the spares it took from refill: a source that fails takes one and
	// starts none.
	f.pool.put(w, false)
	f.compiled.Store(true)
	f.spares.refill()
	return nil
}

// pythonPaths prints sys.executable, then the installation's four prefixes, then
// its site-packages directories as a JSON list (a virtual environment's, when
// the interpreter is one's: workers start with -S, which skips finding them).
const pythonPaths = "import json, site, sys; print(sys.executable); print(sys.prefix, sys.base_prefix, sys.exec_prefix, sys.base_exec_prefix, sep='\\n'); print(json.dumps(site.getsitepackages()))"

// resolveInterpreter asks Options.PythonBinary for its sys.executable, so that
// workers bypass wrapper scripts (pyenv or asdf shims add to the environment), and
// for the directories of its installation that a sandbox must show besides /usr.
// A failure is not remembered: the next Compile tries again.
func (p *python) resolveInterpreter() (string, []string, error) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.interpreter != "" {
		return p.interpreter, p.binds, nil
	}
	ctx, cancel := context.WithTimeout(context.Background(), pythonStartAllowance)
	defer cancel()
	inst, err := findPython(ctx, p.opts.PythonBinary)
	if err != nil {
		return "", nil, err
	}
	worker, err := compileWorker(ctx, inst.interpreter)
	if err != nil {
		return "", nil, fmt.Errorf("running %s: %w", inst.interpreter, err)
	}
	p.interpreter, p.worker = inst.interpreter, worker
	p.binds, p.sitePackages = inst.binds, inst.sitePackages
	return p.interpreter, p.binds, nil
}

// pythonInstallation is where an interpreter is installed.
type pythonInstallation struct {
	interpreter  string   // its sys.executable
	binds        []string // its installation, outside /usr
	sitePackages string   // its site-packages directories, a JSON list
}

// findPython asks binary where it is installed (pythonPaths).
func findPython(ctx context.Context, binary string) (pythonInstallation, error) {
	out, err := exec.CommandContext(ctx, binary, "-I", "-c", pythonPaths).Output()
	if err != nil {
		return pythonInstallation{}, fmt.Errorf("running %s: %w", binary, err)
	}
	lines := strings.Split(strings.TrimSpace(string(out)), "\n")
	if len(lines) != 6 {
		return pythonInstallation{}, fmt.Errorf("running %s: it printed %d lines where its executable, prefixes and site-packages were expected", binary, len(lines))
	}
	interpreter := cmp.Or(lines[0], binary)
	return pythonInstallation{interpreter: interpreter, binds: installationBinds(filepath.Dir(interpreter), lines[1:5]), sitePackages: lines[5]}, nil
}

// compiledWorker is python_worker.py compiled by one interpreter: a worker
// started with the command line "-c boot" reads code, marshalled, on its stdin
// before its first frame, and runs it in __main__.
//
// The source is not given to each worker to compile: the interpreter keeps
// about 0.9 MiB of what compiling it took (the parser's and the compiler's
// memory, freed but not given back to the system, and the source's copies that
// a -c command line leaves), in every warm worker.
type compiledWorker struct {
	boot string
	code []byte
}

// pythonCompileWorker writes the interpreter's bytecode magic number, then the
// worker's source (on stdin) compiled as -c compiles it: as "<string>", with
// the interpreter's own flags (-I -S, as the workers').
const pythonCompileWorker = `import marshal, sys
from _frozen_importlib_external import MAGIC_NUMBER
sys.stdout.buffer.write(MAGIC_NUMBER + marshal.dumps(compile(sys.stdin.buffer.read(), "<string>", "exec")))`

// pythonWorkerBoot is a worker's -c command, given the magic number its code
// was compiled for (hex) and the code's length: it reads the code on stdin, and
// runs it in __main__, where -c would have run the source. It leaves nothing
// behind but the worker's own names. A worker started by another interpreter
// (one replaced in place since the gateway compiled the code) exits with a
// message.
const pythonWorkerBoot = `def _boot():
    import marshal, os
    from _frozen_importlib_external import MAGIC_NUMBER
    del globals()["_boot"]
    if MAGIC_NUMBER != bytes.fromhex("%s"):
        raise SystemExit("metalambda: this interpreter is not the one the gateway compiled the worker with: restart the gateway")
    code = bytearray()
    while len(code) < %d:
        chunk = os.read(0, %d - len(code))
        if not chunk:
            raise SystemExit("metalambda: the worker's code ended early")
        code += chunk
    return marshal.loads(code)
exec(_boot())
`

// compileWorker compiles pythonWorkerScript with interpreter.
func compileWorker(ctx context.Context, interpreter string) (compiledWorker, error) {
	cmd := exec.CommandContext(ctx, interpreter, "-I", "-S", "-c", pythonCompileWorker)
	cmd.Stdin = strings.NewReader(pythonWorkerScript)
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		return compiledWorker{}, fmt.Errorf("compiling the worker: %w: %s", err, bytes.TrimSpace(stderr.Bytes()))
	}
	const magicLen = 4 // importlib.util.MAGIC_NUMBER: a 16-bit number and "\r\n"
	if len(out) <= magicLen {
		return compiledWorker{}, fmt.Errorf("compiling the worker: %d bytes of output", len(out))
	}
	magic, code := out[:magicLen], out[magicLen:]
	return compiledWorker{boot: fmt.Sprintf(pythonWorkerBoot, hex.EncodeToString(magic), len(code), len(code)), code: code}, nil
}

// installationBinds are the directories among dirs outside /usr, without
// duplicates; dir is the interpreter's, bound when no prefix holds it.
func installationBinds(dir string, prefixes []string) []string {
	var binds []string
	for _, d := range prefixes {
		if d != "" && d != "/usr" && !strings.HasPrefix(d, "/usr/") && !slices.Contains(binds, d) {
			binds = append(binds, d)
		}
	}
	for _, d := range append(binds, "/usr") {
		if dir == d || strings.HasPrefix(dir, d+"/") {
			return binds
		}
	}
	return append(binds, dir)
}

// pythonBaseEnv is the environment every Python worker starts with. A
// function's own (Function.Env) comes in its init frame, which the worker adds
// to os.environ before it loads the source.
var pythonBaseEnv = map[string]string{
	"PATH": "/usr/local/bin:/usr/bin:/bin",
	"LANG": "C.UTF-8",
}

// environ is env as KEY=value, sorted.
func environ(env map[string]string) []string {
	list := make([]string, 0, len(env))
	for k, v := range env {
		list = append(list, k+"="+v)
	}
	sort.Strings(list)
	return list
}

// checkEnv refuses what no environment can hold (an empty name, "=" in one, a
// NUL anywhere) and the names reserved to the platform.
func checkEnv(fn Function) error {
	for k, v := range fn.Env {
		if k == "" || strings.ContainsAny(k, "=\x00") || strings.Contains(v, "\x00") {
			return &CompileError{Function: fn.Name, Message: fmt.Sprintf("invalid environment variable %q", k)}
		}
		if err := reservedenv.Error(k); err != nil {
			return &CompileError{Function: fn.Name, Message: err.Error()}
		}
	}
	return nil
}

// pyFunction is a compiled function and its pool of workers: Python's, or the
// script workers of JavaScript and Jsonnet, which speak the same protocol.
type pyFunction struct {
	fn          Function
	timeout     time.Duration
	pool        *pool[*pyWorker]
	spares      *spares // where its workers come from
	compiled    atomic.Bool
	closing     sync.Once
	init        []byte // the first frame, which loads the function
	checkTasks  bool   // a worker with more threads after a call than after loading is replaced
	idleTimeout time.Duration
}

// Invoke runs the function in a pooled worker. A worker that times out, crashes or
// runs out of memory is killed; the pool starts a fresh one on demand.
func (f *pyFunction) Invoke(ctx context.Context, request json.RawMessage) (Result, error) {
	frame, err := requestFrame(f.fn.Name, request)
	if err != nil {
		return Result{}, err
	}
	ctx, cancel := context.WithTimeout(ctx, f.timeout)
	defer cancel()
	for attempt := 1; ; attempt++ {
		w, err := f.acquire(ctx)
		if err != nil {
			return Result{}, err
		}
		if ctx.Err() != nil {
			f.put(w, true)
			return Result{}, doneError(ctx, f.fn.Name, f.timeout)
		}
		_, span := workerSpan(ctx, f.fn.Runtime)
		reply, err := w.exchange(ctx, f.fn.Name, frame, f.timeout)
		tracing.End(span, err)
		f.put(w, err == nil && !reply.Fatal && f.settled(w))
		if err != nil && attempt < maxDeliveries && w.undelivered.Load() {
			continue // the worker died idle, before it read any of the request
		}
		if err != nil {
			return Result{}, err
		}
		return reply.result(f.fn.Name)
	}
}

// maxDeliveries bounds the workers a call is tried on. A call goes to another
// worker only when the one it went to had died before it read any of the
// request (pyWorker.undelivered): an idle worker killed (its idle time, a
// recycle, an eviction, or by itself) just before the pool saw its end. The
// function's code never ran with the request (it cannot read its stdin
// without taking what it read: the sandbox refuses tee; and only a worker of
// another user than the gateway's, which may not open the pipe again to put
// back what it read, is tried again), so trying again changes nothing a hook
// could tell, but a worker that always dies idle is tried no more than this.
const maxDeliveries = 3

// idleCPUAllowance is the processor time an idle worker may use before it is
// taken for still running (threads or children left behind by a call) and
// stopped. An idle CPython worker blocks in a read and uses none; an idle Go
// worker's runtime wakes now and then, and collects garbage every two minutes at
// most, for well under a millisecond each.
const idleCPUAllowance = 100 * time.Millisecond

// settled reports whether a Python worker that answered may serve again: it must
// hold no more threads and processes than once it had loaded. A script worker's
// Go runtime starts and parks threads of its own, so only its processor time
// while idle tells (keepIdle). Where the sandbox gives no cgroup, nothing is
// known and the worker is kept.
func (f *pyFunction) settled(w *pyWorker) bool {
	if !f.checkTasks {
		return true
	}
	tasks, ok := 0, false
	switch {
	case w.fk != nil:
		tasks, ok = w.fk.Tasks()
	case w.sb != nil:
		tasks, ok = w.sb.Tasks()
	}
	return !ok || tasks <= w.loaded.Tasks
}

// keepIdle reports whether a worker idle since since may stay: not past the idle
// timeout, not forked by a retired zygote (recycleDue), and not running: a Python worker with more threads or processes than
// once it had loaded, or any worker that has used more than idleCPUAllowance of
// processor time since the first sweep of this idle period.
func (f *pyFunction) keepIdle(w *pyWorker, since time.Time) bool {
	if f.idleTimeout > 0 && time.Since(since) > f.idleTimeout || w.recycleDue() {
		return false
	}
	now, ok := w.usage()
	if !ok {
		return true
	}
	if f.checkTasks && now.Tasks > w.loaded.Tasks {
		return false
	}
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.idleFrom != since { // the first sweep of this idle period: the baseline
		w.idleFrom, w.idleCPU = since, now.CPU
		return true
	}
	return now.CPU-w.idleCPU <= idleCPUAllowance
}

// acquire gets a live worker, replacing one that died while idle.
func (f *pyFunction) acquire(ctx context.Context) (*pyWorker, error) {
	for {
		w, err := f.pool.get(ctx)
		if err != nil && ctx.Err() != nil {
			return nil, doneError(ctx, f.fn.Name, f.timeout)
		}
		if err != nil {
			return nil, fmt.Errorf("function %s: %w", f.fn.Name, err)
		}
		if !w.dead() {
			return w, nil
		}
		f.put(w, false)
	}
}

// Close kills the function's workers, busy ones included.
func (f *pyFunction) Close() {
	f.closing.Do(func() {
		f.pool.close()
		f.spares.release()
	})
}

// pyWorker is one python process serving one function, one call at a time.
type pyWorker struct {
	id string // its worker= argument
	// spareMemory is the memory read while the worker waited as a spare.
	spareMemory atomic.Int64
	cmd         *exec.Cmd
	stdin       *os.File // the write end of the worker's stdin
	stdout      *os.File // the read end of the worker's stdout, closed by kill
	// overran is set when the worker wrote more than a reply (readReply).
	overran    atomic.Bool
	exited     chan struct{} // closed once the process is reaped and its directory removed
	stderr     *tailBuffer
	stderrRead *os.File         // the read end of the worker's stderr, drained into stderr
	stderrDone chan struct{}    // closed once stderrRead is drained and closed
	stderrStop atomic.Bool      // ends the drain of stderrRead
	dir        string           // the unsandboxed worker's temporary directory
	sb         *sandbox.Command // the worker's command (sandbox.Plain when unsandboxed); nil when forked
	fk         *sandbox.Forked  // the worker forked by a zygote; nil when started by a command
	zygotes    *zygotes         // the zygotes of fk's network view
	once       sync.Once

	loaded sandbox.Usage // what the worker held once it had loaded the source

	mu       sync.Mutex    // guards the idle sweep's baseline
	idleFrom time.Time     // the idle period the baseline belongs to
	idleCPU  time.Duration // processor time at the first sweep of that period

	sandboxed  bool
	processes  int64 // the sandbox's process limit
	sharedUser bool  // the sandbox's workers share its user (sandbox.Sandbox.SharesUser)
	goWorker   bool
	maxReply   int64
	tooLarge   atomic.Bool // a reply passed maxReply
	// undelivered is set when the worker ended before it read any of the
	// request exchange last wrote: the call may go to another worker.
	undelivered atomic.Bool
	// refillDue is set when the worker is taken for a function, and taken by
	// pyFunction.refillFor, which then refills the spares.
	refillDue atomic.Bool
}

// pipeUnread is how many bytes written to the pipe p have not been read
// (FIONREAD, which Linux names TIOCINQ, counts them on either end).
func pipeUnread(p *os.File) (int, bool) {
	rc, err := p.SyscallConn()
	if err != nil {
		return 0, false
	}
	n, ierr := 0, error(nil)
	if err := rc.Control(func(fd uintptr) { n, ierr = unix.IoctlGetInt(int(fd), unix.TIOCINQ) }); err != nil || ierr != nil {
		return 0, false
	}
	return n, true
}

func (f *pyFunction) startWorker() (*pyWorker, error) {
	for attempt := 1; ; attempt++ {
		w, err := f.spares.take()
		if err != nil {
			f.refillSpares()
			return nil, fmt.Errorf("function %s: %w", f.fn.Name, err)
		}
		// The spare is replaced once this worker has answered its first call
		// (put), or after maxRefillDelay: the function's load and call, whose
		// length its code decides, hold the refill back no longer.
		w.refillDue.Store(true)
		time.AfterFunc(maxRefillDelay, func() { f.refillFor(w) })
		// The function's top-level code runs while it loads, for up to its
		// timeout and pythonStartAllowance, and may fill the worker's memory
		// meanwhile: the budget counts it from now (a spare no longer counts
		// with the spares).
		f.pool.start(w)
		if err := w.load(f); err != nil {
			w.kill()
			f.pool.started(w)
			f.refillFor(w)
			if attempt < maxDeliveries && w.undelivered.Load() {
				continue // a spare that died waiting, before it read the source
			}
			return nil, err
		}
		w.loaded, _ = w.usage()
		return w, nil
	}
}

// refillSpares refills the spares a function uses once it has loaded: a
// source that fails to load at registration takes one and starts none.
func (f *pyFunction) refillSpares() {
	if f.compiled.Load() {
		f.spares.refill()
	}
}

// maxRefillDelay bounds how long a cold start holds back the refill of the
// spare it took: well past a load and first call (a few milliseconds), so
// that a function whose code takes long cannot keep the spares short.
const maxRefillDelay = 100 * time.Millisecond

// put gives w back to the pool; the first time after w started, it refills the
// spares w may have come from (refillFor).
func (f *pyFunction) put(w *pyWorker, healthy bool) {
	f.pool.put(w, healthy)
	f.refillFor(w)
}

// refillFor refills the spares for w, once: after w's first call, its failed
// load, or maxRefillDelay after it was taken, whichever comes first. Started as
// w was taken, the next spare's start competed for the processors with w's
// load and first call: on two processors, the slowest loads of 300 Functions
// called 100 ms apart were those that overlapped the start of the spare
// replacing their own.
func (f *pyFunction) refillFor(w *pyWorker) {
	if w.refillDue.Swap(false) {
		f.refillSpares()
	}
}

// foreground gives a spare started in the background the usual processor
// weight, as it is given a function.
func (w *pyWorker) foreground() error {
	switch {
	case w.fk != nil:
		return w.fk.Foreground()
	case w.sb != nil:
		return w.sb.Foreground()
	}
	return nil
}

// usage is what the sandboxed worker's processes hold; false without a sandbox
// or a cgroup.
func (w *pyWorker) usage() (sandbox.Usage, bool) {
	if w.fk != nil {
		return w.fk.Usage()
	}
	if w.sb == nil {
		return sandbox.Usage{}, false
	}
	return w.sb.Usage()
}

// memory is what the worker holds: its cgroup's count, or the resident memory
// of its processes where it has no cgroup.
func (w *pyWorker) memory() int64 {
	if w.fk != nil {
		m, _ := w.fk.Memory()
		return m
	}
	if w.sb != nil {
		if m, ok := w.sb.Memory(); ok {
			return m
		}
	}
	if w.cmd == nil || w.cmd.Process == nil {
		return 0
	}
	return processTreeMemory(w.cmd.Process.Pid)
}

func (w *pyWorker) removeDir() {
	if w.dir != "" {
		_ = os.RemoveAll(w.dir)
	}
}

// command is the worker's command: in its own sandbox, or a plain process in
// its own process group and directory.
func (w *pyWorker) command(s *workerSpec, args []string) (*exec.Cmd, error) {
	if s.sandbox != nil {
		sb, err := s.sandbox.Command(sandbox.Spec{Args: args, Env: s.env, ReadOnly: s.binds, Network: s.network, Limits: s.limits})
		if err != nil {
			return nil, err
		}
		w.sb = sb
		return sb.Cmd, nil
	}
	cmd := exec.Command(args[0], args[1:]...)
	cmd.Dir = w.dir
	cmd.Env = s.env
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGKILL}
	w.sb = sandbox.Plain(cmd)
	return cmd, nil
}

// startCmd starts the worker's command.
func (w *pyWorker) startCmd() error { return w.sb.Start() }

func (w *pyWorker) start(s *workerSpec, args []string) error {
	if s.zygote != nil {
		if err := w.startForked(s); err != errNoZygote {
			return err
		}
	}
	cmd, err := w.command(s, args)
	if err != nil {
		return err
	}
	w.cmd = cmd
	w.cmd.WaitDelay = time.Second
	// The worker's pipes are our own, not StdinPipe's and the like: Wait
	// closes those, and a reply the worker wrote just before it exited stays
	// readable; what the worker left unread on its stdin tells whether it read
	// a request (undelivered); and its stderr is drained without a buffer of
	// its own (drain).
	var mine, theirs [3]*os.File
	for i := range 3 {
		r, wr, err := os.Pipe()
		if err != nil {
			closeFiles(mine[:i])
			closeFiles(theirs[:i])
			return err
		}
		if i == 0 {
			mine[i], theirs[i] = wr, r
		} else {
			mine[i], theirs[i] = r, wr
		}
	}
	w.cmd.Stdin, w.cmd.Stdout, w.cmd.Stderr = theirs[0], theirs[1], theirs[2]
	err = w.startCmd()
	closeFiles(theirs[:])
	if err != nil {
		closeFiles(mine[:])
		return fmt.Errorf("starting %s: %w", args[0], err)
	}
	w.stdin, w.stdout = mine[0], mine[1]
	w.drainStderr(mine[2])
	go w.reap()
	if len(s.preamble) > 0 {
		if err := w.writePreamble(s.preamble); err != nil {
			w.kill()
			return fmt.Errorf("starting %s: writing the worker's code: %w", args[0], err)
		}
	}
	return nil
}

// writePreamble writes what a worker reads first, before its first frame: a
// worker that has not read it within pythonStartAllowance (a pipe holds 64 KiB,
// and as little as 4 KiB past the user's pipe-user-pages-soft) is killed, which
// ends the write.
func (w *pyWorker) writePreamble(p []byte) error {
	t := time.AfterFunc(pythonStartAllowance, func() { go w.kill() })
	defer t.Stop()
	_, err := w.stdin.Write(p)
	return err
}

// reap waits for the worker's process to exit, then reaps it. Its replies are
// read by the caller of exchange, on the caller's goroutine: handing each over
// from a reader goroutine cost a thread wake-up per call.
func (w *pyWorker) reap() {
	defer close(w.exited)
	defer workerFunctions.Delete(w.id)
	defer w.removeDir()
	if w.fk != nil {
		w.waitForked()
	} else {
		// Waiting in exec's Wait would hold an OS thread per worker: the
		// command's Wait waits in the runtime's poller, then reaps once the
		// worker's process group is killed.
		_ = w.sb.Wait()
	}
	// What the worker wrote last on its stderr, a traceback or a runtime's
	// crash, is what tells why it ended: it is read to its end before the
	// worker counts as exited, unless something the worker left behind holds
	// it open (as exec.Cmd's WaitDelay bounds it).
	select {
	case <-w.stderrDone:
	case <-time.After(time.Second):
		w.stderrStop.Store(true)
		w.stderrRead.Close()
		<-w.stderrDone
	}
}

// drainStderr reads f, the worker's stderr, into w.stderr in a goroutine of
// its own until its end.
func (w *pyWorker) drainStderr(f *os.File) {
	w.stderrRead, w.stderrDone = f, make(chan struct{})
	go func() {
		defer close(w.stderrDone)
		defer f.Close()
		w.stderr.drain(f, &w.stderrStop)
	}()
}

func closeFiles(files []*os.File) {
	for _, f := range files {
		f.Close()
	}
}

// replyReaders are the readers of replies, lent to one read at a time: a
// reader per worker would hold its 64 KiB while the worker is idle, the most
// an idle worker cost the gateway.
var replyReaders = sync.Pool{New: func() any { return bufio.NewReaderSize(nil, 64<<10) }}

// readReply reads the worker's next reply. Bytes read past it mean the worker
// wrote ahead of its calls, and it is dead to them. A reply longer than
// maxReply kills the worker.
func (w *pyWorker) readReply() ([]byte, error) {
	r := replyReaders.Get().(*bufio.Reader)
	r.Reset(w.stdout)
	line, err := readLine(r, w.maxReply)
	if r.Buffered() > 0 {
		w.overran.Store(true)
	}
	r.Reset(nil)
	replyReaders.Put(r)
	if errors.Is(err, errReplyTooLarge) {
		w.tooLarge.Store(true)
		w.kill()
	}
	return line, err
}

var errReplyTooLarge = errors.New("reply too large")

// readLine reads through the next newline, failing with errReplyTooLarge as soon
// as the line passes limit bytes.
func readLine(r *bufio.Reader, limit int64) ([]byte, error) {
	var line []byte
	for {
		chunk, err := r.ReadSlice('\n')
		if int64(len(line)+len(chunk)) > limit {
			return nil, errReplyTooLarge
		}
		line = append(line, chunk...)
		if err != bufio.ErrBufferFull {
			return line, err
		}
	}
}

// pyInit is the first frame a worker reads.
type pyInit struct {
	Source      string `json:"source"`
	Handler     string `json:"handler"`
	Filename    string `json:"filename"`
	MemoryLimit int64  `json:"memory_limit"`
	// Env is the function's environment, over the worker's base one.
	Env map[string]string `json:"env,omitempty"`
}

// load sends the function and waits for the worker to have loaded it: from
// then on the worker is the function's.
func (w *pyWorker) load(f *pyFunction) error {
	workerFunctions.Store(w.id, f.fn.Name)
	limit := f.timeout + pythonStartAllowance
	ctx, cancel := context.WithTimeout(context.Background(), limit)
	defer cancel()
	reply, err := w.exchange(ctx, f.fn.Name, f.init, limit)
	var ie *InvokeError
	if errors.As(err, &ie) {
		return &CompileError{Function: f.fn.Name, Message: "loading the source: " + ie.Message, Cause: ErrWorkerLost}
	}
	if err != nil {
		return err
	}
	if w.goWorker && reply.NoRuntime {
		w.kill()
		return &CompileError{Function: f.fn.Name, Cause: ErrWorkerLost, Message: fmt.Sprintf(
			"the worker executable %s was built without the %s runtime: install the worker executables that make build builds (%s) beside the gateway",
			f.spares.spec.command[0], f.fn.Runtime, sandbox.WorkerExecutableFor(f.fn.Runtime))}
	}
	if !reply.OK {
		return reply.compileError(f.fn.Name)
	}
	if w.goWorker && (reply.Protocol != scriptProtocol || otherBuild(reply.Build)) {
		w.kill()
		return otherBuildError(f.fn.Name, f.spares.spec.command[0], reply.Protocol, reply.Build)
	}
	return nil
}

// gatewayBuild is this executable's knownBuild; tests replace it.
var gatewayBuild = knownBuild

// otherBuild reports whether a Go worker that answered with build (its
// knownBuild) is of another build than the gateway: when both builds are known,
// a worker left beside the gateway by an earlier build, whose runtimes may
// differ, is not served from even if its protocol is the same.
func otherBuild(build string) bool {
	own := gatewayBuild()
	return own != "" && build != "" && build != own
}

// otherBuildError is the failure of a Go worker whose executable speaks
// another version of the script worker protocol (it ignored the gateway's), or
// is of another known build.
func otherBuildError(name, exe string, protocol int, build string) *CompileError {
	return &CompileError{Function: name, Cause: ErrWorkerLost, Message: fmt.Sprintf(
		"the worker executable %s is from another build of Metalambda than the gateway (worker protocol %d, build %q; the gateway's %d, %q): install the worker executables built with the gateway beside it",
		exe, protocol, build, scriptProtocol, gatewayBuild())}
}

// requestFrame is {"request": request} on one line: the request compacted, which
// also checks that it is JSON.
func requestFrame(name string, request json.RawMessage) ([]byte, error) {
	var frame bytes.Buffer
	frame.Grow(len(request) + 13)
	frame.WriteString(`{"request":`)
	if err := json.Compact(&frame, request); err != nil {
		return nil, fmt.Errorf("function %s: %w: %v", name, ErrInvalidRequest, err)
	}
	frame.WriteString("}\n")
	return frame.Bytes(), nil
}

// exchange writes a frame and reads the reply; at the context's end it kills the
// worker.
func (w *pyWorker) exchange(ctx context.Context, name string, frame []byte, limit time.Duration) (pyReply, error) {
	// A worker that stops reading its stdin, or never answers, would hold the
	// call past its end: the context's end kills it, which ends the write and
	// the read.
	stop := context.AfterFunc(ctx, func() { go w.kill() })
	n, err := w.stdin.Write(frame)
	var line []byte
	if err == nil {
		line, err = w.readReply()
	}
	if !stop() {
		return pyReply{}, doneError(ctx, name, limit)
	}
	if err != nil {
		// The worker's stdout has ended, so it has exited (or closed its
		// ends): what it left on its stdin is final. It tells only of a
		// worker that could not write into that pipe itself: one of the
		// gateway's own user (the Landlock sandbox of a gateway that is not
		// root, or no sandbox) can give the pipe's mode back and reopen it
		// through /proc/self/fd, and put back a request it read.
		if !w.sandboxed || w.sharedUser {
			return pyReply{}, w.crashError(name)
		}
		if unread, ok := pipeUnread(w.stdin); ok && unread == n {
			w.undelivered.Store(true)
		}
		return pyReply{}, w.crashError(name)
	}
	reply, err := decodeReply(line)
	if err != nil {
		w.kill()
		return pyReply{}, crash(name, fmt.Sprintf("worker protocol error: %v", err))
	}
	return reply, nil
}

// okPrefix starts the reply of a call that returned a response and logged
// nothing, as both workers write it: the response follows, then the closing
// brace.
const okPrefix = `{"ok":true,"response":`

// decodeReply decodes a reply frame. The common one, a response and no logs,
// is checked in one pass and sliced out of the frame instead of decoded.
func decodeReply(line []byte) (pyReply, error) {
	frame := bytes.TrimSuffix(line, []byte("\n"))
	if rest, ok := bytes.CutPrefix(frame, []byte(okPrefix)); ok && len(rest) > 2 && rest[len(rest)-1] == '}' {
		if response := rest[:len(rest)-1]; response[0] == '{' && response[len(response)-1] == '}' && json.Valid(response) {
			return pyReply{OK: true, Response: response}, nil
		}
	}
	var reply pyReply
	err := json.Unmarshal(line, &reply)
	return reply, err
}

// crashError describes a worker that exited: its status and last stderr output.
func (w *pyWorker) crashError(name string) error {
	select {
	case <-w.exited:
	case <-time.After(pythonKillWait):
	}
	if w.tooLarge.Load() {
		w.kill()
		return &InvokeError{Function: name, Reason: ReasonBadReturn, Message: fmt.Sprintf("the reply is larger than the limit of %d bytes; the worker was killed", w.maxReply)}
	}
	state := "still running"
	if w.fk != nil {
		state = w.forkedState()
	} else if w.cmd.ProcessState != nil {
		state = exitState(w.cmd.ProcessState, w.sandboxed)
	}
	msg := "worker exited (" + state + ")"
	tail := strings.TrimSpace(w.stderr.String())
	if cause, _, found := strings.Cut(tail, "\n\n"); w.goWorker && found {
		tail = cause // the Go runtime's message, without its goroutines' stacks
	}
	if limit := processLimitMessage(tail, w.processes, w.sharedUser); limit != "" {
		msg += ": " + limit
	}
	if tail != "" {
		msg += ": " + tail
	}
	w.kill()
	return crash(name, msg)
}

// threadFailures are what a worker writes when the kernel refuses it a thread
// or a process (EAGAIN): the Go runtime, CPython, the launcher.
var threadFailures = []string{"failed to create new OS thread", "runtime/cgo: pthread_create failed: Resource temporarily unavailable", "can't start new thread", "RLIMIT_NPROC", "BlockingIOError: [Errno 11]"}

// processLimitMessage names the process limit when a worker's stderr (tail)
// says it could not start a thread or process; "" otherwise.
func processLimitMessage(tail string, processes int64, shared bool) string {
	if !slices.ContainsFunc(threadFailures, func(s string) bool { return strings.Contains(tail, s) }) {
		return ""
	}
	msg := fmt.Sprintf("it could not start a thread or process: it reached its process limit (RLIMIT_NPROC, %d tasks", processes)
	if shared {
		msg += " beyond those its user ran when it started; its user is the gateway's, shared with every pod of that user on the node: run the gateway as root with SETUID, SETGID and KILL, gateway.workerUsers own, to give each worker a user of its own"
	}
	return msg + ")"
}

// exitState describes how a worker ended. Bubblewrap exits with 128+n when the
// sandboxed command is killed by signal n.
func exitState(ps *os.ProcessState, sandboxed bool) string {
	if code := ps.ExitCode(); sandboxed && code > 128 && code < 128+65 {
		return "signal: " + syscall.Signal(code-128).String()
	}
	return ps.String()
}

// dead reports whether the worker has exited, or is out of step with its calls:
// it wrote more than its last reply, read with it or still in its pipe.
func (w *pyWorker) dead() bool {
	if w.overran.Load() {
		return true
	}
	if unread, ok := pipeUnread(w.stdout); ok && unread > 0 {
		return true
	}
	select {
	case <-w.exited:
		return true
	default:
		return false
	}
}

// kill kills the worker's process group and waits for it to be reaped; it is
// idempotent.
func (w *pyWorker) kill() {
	w.once.Do(func() {
		// A sandboxed worker's Kill signals its process group only while the
		// worker's process has not exited: the group's number may be another's
		// once it has been reaped (a dead worker is replaced, and killed, only
		// when its function is next called, or when it has idled its time).
		if w.fk != nil {
			w.fk.Kill()
		} else {
			w.sb.Kill()
		}
		_ = w.stdin.Close()
		_ = w.stdout.Close()
	})
	select {
	case <-w.exited:
	case <-time.After(pythonKillWait):
	}
	workerFunctions.Delete(w.id) // a load that raced with the worker's exit stored it again
}

// pyReply is a worker's answer to the source or to a request.
type pyReply struct {
	OK       bool   `json:"ok"`
	Protocol int    `json:"protocol"` // a script worker's scriptProtocol, in its answer to the init frame
	Build    string `json:"build"`    // a script worker's knownBuild, in its answer to the init frame
	// NoRuntime: a script worker's executable was built without the function's runtime.
	NoRuntime bool            `json:"no_runtime"`
	Response  json.RawMessage `json:"response"`
	Logs      string          `json:"logs"`
	Fatal     bool            `json:"fatal"`
	Error     *pyError        `json:"error"`
}

type pyError struct {
	// Reason is a script worker's InvokeError reason; Message is then its message.
	Reason    string `json:"reason,omitempty"`
	Type      string `json:"type,omitempty"`
	Message   string `json:"message"`
	Traceback string `json:"traceback,omitempty"`
	Line      int    `json:"line,omitempty"`
	Column    int    `json:"column,omitempty"`
}

func (e *pyError) String() string {
	if e == nil {
		return "unknown error"
	}
	s := e.Type
	if e.Message != "" && s != "" {
		s += ": " + e.Message
	} else if e.Message != "" {
		s = e.Message
	}
	if e.Traceback != "" {
		s += "\n" + strings.TrimRight(e.Traceback, "\n")
	}
	return s
}

func (r pyReply) compileError(name string) *CompileError {
	if r.Error == nil {
		return &CompileError{Function: name, Message: "the worker did not load the source"}
	}
	return &CompileError{Function: name, Line: r.Error.Line, Column: r.Error.Column, Message: BoundError(r.Error.String())}
}

// result is the call's result and error. The worker bounds its logs itself, but
// it runs user code, which can write any reply frame: logs and messages are
// bounded again here.
func (r pyReply) result(name string) (Result, error) {
	r.Logs = BoundLogs(r.Logs)
	if r.Error != nil {
		r.Error.Message = BoundError(r.Error.Message)
		r.Error.Traceback = BoundError(r.Error.Traceback)
	}
	if r.OK {
		// The worker wrote the response with json.dumps, compact, and Unmarshal has
		// checked the whole reply.
		response, err := compactObject(name, r.Response)
		return Result{Response: response, Logs: r.Logs}, err
	}
	if r.Error != nil && r.Error.Reason != "" {
		return Result{Logs: r.Logs}, &InvokeError{Function: name, Reason: r.Error.Reason, Message: r.Error.Message}
	}
	if r.Error != nil && r.Error.Type == "BadReturn" {
		return Result{Logs: r.Logs}, badReturn(name, "%s", r.Error.Message)
	}
	return Result{Logs: r.Logs}, exception(name, r.Error.String())
}

// tailBuffer keeps the first and the last bytes written to it (a worker's
// stderr): a Python traceback ends with its cause, a Go runtime's crash starts
// with it.
type tailBuffer struct {
	mu      sync.Mutex
	head    []byte
	buf     []byte
	dropped bool // bytes between head and buf were dropped
}

const (
	headBytes = 1 << 10
	tailBytes = 4 << 10
)

// Write keeps the first headBytes and the last tailBytes written, each in a buffer
// allocated once, so that a worker flooding its standard error costs the gateway no
// allocation per write.
func (t *tailBuffer) Write(p []byte) (int, error) {
	t.mu.Lock()
	defer t.mu.Unlock()
	n := len(p)
	if room := headBytes - len(t.head); room > 0 {
		k := min(room, len(p))
		t.head = append(t.head, p[:k]...)
		p = p[k:]
	}
	if t.buf == nil {
		t.buf = make([]byte, 0, tailBytes)
	}
	if len(p) >= tailBytes {
		t.dropped = t.dropped || len(t.buf) > 0 || len(p) > tailBytes
		t.buf = append(t.buf[:0], p[len(p)-tailBytes:]...)
		return n, nil
	}
	if drop := len(t.buf) + len(p) - tailBytes; drop > 0 {
		t.buf = t.buf[:copy(t.buf, t.buf[drop:])]
		t.dropped = true
	}
	t.buf = append(t.buf, p...)
	return n, nil
}

// stderrChunks are what a worker's stderr is read into, lent to one read at a
// time: a worker's stderr is read for as long as it lives, and most of that
// time it writes nothing, so a buffer of each worker's own (io.Copy's 32 KiB)
// would be held for nothing.
var stderrChunks = sync.Pool{New: func() any { b := make([]byte, 4<<10); return &b }}

// stderrBurst and stderrPause pace the drain of a worker's stderr: after
// stderrBurst bytes it reads nothing for stderrPause. Unpaced, a worker that
// writes to its stderr without end (into a pipe it may make 1 MiB) kept a
// core of the gateway's copying it; paced, it costs the gateway 5 MiB/s of
// copying at most (TestStderrFloodIsPaced), and the worker's writes wait,
// which slows only the worker. What is left when the worker exits, a pipe's
// worth at most (what it left behind is killed), is read well within reap's
// second.
const (
	stderrBurst = 256 << 10
	stderrPause = 50 * time.Millisecond
)

// drain writes what f, a pipe's read end, gives into t until its end, an error
// or stop, at the pace of stderrBurst and stderrPause. It waits for f to be
// readable without holding a buffer.
func (t *tailBuffer) drain(f *os.File, stop *atomic.Bool) {
	rc, err := f.SyscallConn()
	if err != nil {
		_, _ = io.Copy(t, f)
		return
	}
	for !stop.Load() {
		read, paused := 0, false
		err := rc.Read(func(fd uintptr) bool {
			b := stderrChunks.Get().(*[]byte)
			defer stderrChunks.Put(b)
			for !stop.Load() {
				if read >= stderrBurst {
					paused = true
					return true
				}
				n, err := unix.Read(int(fd), *b)
				switch {
				case n > 0:
					_, _ = t.Write((*b)[:n])
					read += n
				case err == unix.EINTR:
				case err == unix.EAGAIN:
					return false // nothing more for now: wait, holding no buffer
				default:
					return true // the end, or an error
				}
			}
			return true
		})
		if !paused || err != nil {
			return
		}
		time.Sleep(stderrPause)
	}
}

func (t *tailBuffer) String() string {
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.dropped {
		return string(t.head) + "\n[...]\n" + string(t.buf)
	}
	return string(t.head) + string(t.buf)
}
