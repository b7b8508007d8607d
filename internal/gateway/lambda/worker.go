package lambda

import (
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"

	"golang.org/x/sys/unix"

	"github.com/metalambda/metalambda/internal/gateway/sandbox"
)

// ScriptWorkerMarker is the first argument of a JavaScript or Jsonnet worker: the
// executable that hosts the gateway (the gateway, the platform, a test binary),
// started again in a sandbox, serves one function on its stdin and stdout instead
// of running the rest of its main. Every binary whose main calls ServeWorker can
// serve as a worker.
const ScriptWorkerMarker = "metalambda-script-worker"

// DefaultScriptMemoryLimit is the default of Options.ScriptMemoryLimit: about
// 384 MiB of heap beside the address space a worker reserves at start.
const DefaultScriptMemoryLimit = 1792 << 20

// goReservedAddressSpace is about the address space an idle worker holds before
// any heap (the Go runtime's page summaries and arena index, thread stacks, one
// malloc arena): measured 1.25 to 1.3 GiB on amd64.
const goReservedAddressSpace = 1408 << 20

// ServeWorker makes this process what a sandbox started it as, and then never
// returns: the sandbox's launcher (sandbox.ServeLauncher) or a JavaScript or
// Jsonnet worker (ScriptWorkerMarker). Otherwise it returns at once. Every
// executable that hosts a gateway (cmd/gateway, cmd/metalambda, the benchmarks,
// the test binaries of the packages that start workers) and cmd/metalambda-worker
// call it first thing in main or TestMain.
func ServeWorker() {
	sandbox.ServeLauncher()
	if len(os.Args) > 1 && os.Args[1] == ScriptWorkerMarker {
		// Executed by its descriptor (a script zygote's child), the process is
		// named after the descriptor's number: ps and top show the
		// executable's name instead, as for a worker bubblewrap started.
		_ = os.WriteFile("/proc/self/comm", []byte(filepath.Base(os.Args[0])), 0)
		// The function loads with blocking reads and writes (callPipe).
		_ = unix.SetNonblock(0, false)
		_ = unix.SetNonblock(1, false)
		os.Exit(serveScriptWorker(&callPipe{fd: 0}, &callPipe{fd: 1}))
	}
}

// ScriptWorkerPIDs returns the pids of the JavaScript and Jsonnet workers that the
// process gateway started for function ("namespace/name"; empty means every
// function), as PythonWorkerPIDs does for Python.
func ScriptWorkerPIDs(gateway int, function string) []int {
	return workerPIDs(ScriptWorkerMarker, gateway, function)
}

// WorkerFunction returns the function ("namespace/name") that the worker with
// pid, a worker of this process, was given; false when pid is not one of its
// workers or has not been given one yet (a spare).
func WorkerFunction(pid int) (string, bool) {
	raw, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/cmdline")
	if err != nil {
		return "", false
	}
	for _, a := range strings.Split(string(raw), "\x00") {
		if id, ok := strings.CutPrefix(a, "worker="); ok {
			fn, ok := workerFunctions.Load(id)
			name, _ := fn.(string)
			return name, ok
		}
	}
	return "", false
}

// scripts runs the functions of an in-process runtime (JavaScript or Jsonnet) in
// warm worker processes, each in its own sandbox like a Python worker's: the
// gateway's executable started again with ScriptWorkerMarker, which compiles the
// function with the in-process runtime and serves its calls one at a time. Its
// address space is bounded by Options.ScriptMemoryLimit; a call past its timeout
// kills the worker, and a fresh one takes its place at the next call. With
// Options.InsecureNoSandbox functions run in the gateway's process instead.
type scripts struct {
	name      string  // JavaScript or Jsonnet
	opts      Options // with defaults
	inProcess Runtime
	pools     *poolSet
	spares    *spareSets

	mu      sync.Mutex
	zygotes map[bool]*zygotes // by network view, with Options.ScriptZygote
	python  *pythonInstallation
	noPy    error // why no zygote can be had: Options.PythonBinary did not run
}

// newScripts returns the sandboxed form of the in-process runtime name.
func newScripts(name string, opts Options) *scripts {
	opts = opts.withDefaults()
	pools := newPoolSet(opts.MemoryBudget)
	s := &scripts{name: name, opts: opts, pools: pools, spares: &spareSets{want: opts.WorkerSpares, pools: pools}}
	switch name {
	case JavaScript:
		s.inProcess = NewJavaScript(opts)
	case Jsonnet:
		s.inProcess = NewJsonnet(opts)
	default:
		panic("runtime: no script worker for " + name)
	}
	return s
}

// NewSandboxedJavaScript returns the JavaScript runtime of NewJavaScript whose
// functions run in sandboxed worker processes (in process with
// Options.InsecureNoSandbox). New uses it.
func NewSandboxedJavaScript(opts Options) Runtime {
	return newScripts(JavaScript, opts)
}

// NewSandboxedJsonnet returns the Jsonnet runtime of NewJsonnet whose functions
// run in sandboxed worker processes (in process with Options.InsecureNoSandbox).
// New uses it.
func NewSandboxedJsonnet(opts Options) Runtime {
	return newScripts(Jsonnet, opts)
}

// Stats counts the workers of all open functions (with Options.InsecureNoSandbox,
// the in-process runtime's VMs or evaluations).
func (s *scripts) Stats() PoolStats {
	if s.opts.InsecureNoSandbox {
		if r, ok := s.inProcess.(StatsReporter); ok {
			return r.Stats()
		}
		return PoolStats{}
	}
	return s.pools.Stats()
}

// scriptProtocol is the version of the script worker protocol (scriptInit and
// the frames after it). The init frame carries the gateway's, and a worker
// that loaded its function answers with its own: the Go workers' executable
// is a file of its own (sandbox.WorkerExecutable), which an install may leave
// from another build, and which neither side may then misread.
const scriptProtocol = 1

// scriptInit is the first frame a script worker reads.
type scriptInit struct {
	Protocol    int               `json:"protocol"` // scriptProtocol of the gateway
	Runtime     string            `json:"runtime"`
	Name        string            `json:"name"`
	Source      string            `json:"source"`
	Handler     string            `json:"handler"`
	Env         map[string]string `json:"env"`
	Timeout     int64             `json:"timeout"` // nanoseconds, bounds the top-level code
	MemoryLimit int64             `json:"memory_limit"`
}

// Compile starts a first worker, which compiles and loads the source: what the
// in-process runtime reports as a *CompileError is one here too.
func (s *scripts) Compile(fn Function) (Compiled, error) {
	if s.opts.InsecureNoSandbox {
		return s.inProcess.Compile(fn)
	}
	sb, err := s.opts.workerSandbox()
	if err != nil {
		return nil, fmt.Errorf("function %s: the %s runtime has no sandbox (the gateway's --insecure-no-sandbox runs functions in its own process): %w", fn.Name, s.name, err)
	}
	// Workers run the sandbox's worker executable for the runtime, whose main
	// calls ServeWorker (sandbox.WorkerExecutableFor(s.name) beside the
	// gateway's, else sandbox.WorkerExecutable there, else the gateway's own).
	exe := sb.WorkerFor(s.name)
	timeout := s.opts.timeout(fn)
	memoryLimit := max(s.opts.ScriptMemoryLimit, 0)
	first, err := json.Marshal(scriptInit{Protocol: scriptProtocol, Runtime: s.name, Name: fn.Name, Source: fn.Source, Handler: fn.Handler, Env: fn.Env, Timeout: int64(timeout), MemoryLimit: memoryLimit})
	if err != nil {
		return nil, fmt.Errorf("function %s: %w", fn.Name, err)
	}
	spec := workerSpec{
		command: []string{exe}, marker: ScriptWorkerMarker,
		// A worker serves one call at a time, and waits for the next in the
		// runtime's poller with every P idle (callPipe). One P, not two, leaves
		// it one set of per-P caches: 0.1-0.17 MiB less memory per worker.
		// GOGC=400 collects as rarely as the gateway does (the heap is small;
		// the memory limit still bounds it), and a worker idle for releaseIdle
		// gives its garbage back (memoryRelease). One malloc arena keeps the
		// address space of threads that cgo starts small.
		env: []string{"GOMAXPROCS=1", "GOGC=400", "MALLOC_ARENA_MAX=1", warmUpEnv + "=" + s.name},
		// The Go runtime starts and parks threads of its own, so only the
		// processor time of an idle worker tells that it is still running.
		limits:  s.opts.workerLimits(memoryLimit, scriptWorkerMemory(memoryLimit)),
		sandbox: sb, binds: []string{exe}, maxReply: s.opts.MaxReplyBytes,
		network: fn.Network, goWorker: true,
	}
	spec.zygote = s.zygoteFor(spec)
	f := &pyFunction{
		fn: fn, timeout: timeout, idleTimeout: s.opts.WorkerIdleTimeout,
		spares: s.spares.get(spec, sb),
		init:   append(first, '\n'),
	}
	if err := f.warm(s.poolSize(), s.pools); err != nil {
		return nil, err
	}
	return f, nil
}

// zygoteFor is the zygote that forks spec's workers, started at its first
// fork; nil when Options.ScriptZygote is off, the sandbox cannot start one, or
// Options.PythonBinary does not run. It is a Python zygote (python_zygote.py)
// that preloads nothing: each child, with metalambda-spawn (or in the
// interpreter where there is none), is bounded as a forked Python worker is
// (its own namespaces, user, cgroup, rlimits, no capabilities, no_new_privs,
// the commands' seccomp filter), closes every descriptor but its pipes and
// then executes spec's command, with spec's environment alone.
// That skips bubblewrap and the launcher, most of a worker's start. The
// program executed starts afresh (its own layout, canary and hash seeds), so
// the zygote is not rotated after a number of forks or an age, as Python's
// is.
func (s *scripts) zygoteFor(spec workerSpec) *zygotes {
	sb := spec.sandbox
	if s.opts.ScriptZygote != ZygoteAuto || sb == nil || sb.ZygoteSupported() != nil {
		return nil
	}
	py := s.findPython()
	if py == nil {
		return nil
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if zs := s.zygotes[spec.network]; zs != nil {
		return zs
	}
	args := append(slices.Clone(spec.command), spec.marker, "gateway="+strconv.Itoa(os.Getpid()))
	zs := &zygotes{sb: sb, name: strings.ToLower(s.name) + " zygote", executes: true, limits: spec.limits, spec: execZygoteSpec(*py, args, spec.env, spec.network)}
	if s.zygotes == nil {
		s.zygotes = map[bool]*zygotes{}
	}
	s.zygotes[spec.network] = zs
	s.pools.addMemory(zs.memory)
	allZygotes.Store(zs, true)
	return zs
}

// findPython is where Options.PythonBinary is installed, asked once; nil when
// it did not run, which is logged and holds until the gateway restarts (each
// network view's spares keep the zygote they were made with). Compiles of the
// runtime do not wait for one another's asking.
func (s *scripts) findPython() *pythonInstallation {
	s.mu.Lock()
	py, failed := s.python, s.noPy != nil
	s.mu.Unlock()
	if py != nil || failed {
		return py
	}
	ctx, cancel := context.WithTimeout(context.Background(), pythonStartAllowance)
	inst, err := findPython(ctx, s.opts.PythonBinary)
	cancel()
	s.mu.Lock()
	defer s.mu.Unlock()
	if err != nil {
		if s.noPy == nil {
			slog.Info(strings.ToLower(s.name)+" zygote: none, as its Python fork server cannot run; each worker starts in a sandbox of its own", "reason", err)
			s.noPy = err
		}
		return nil
	}
	if s.python == nil {
		s.python = &inst
	}
	return s.python
}

// execZygoteSpec is a zygote of the interpreter py whose children execute
// args (args[0], an absolute path) with env alone.
func execZygoteSpec(py pythonInstallation, args, env []string, network bool) sandbox.ZygoteSpec {
	return sandbox.ZygoteSpec{
		Args:       []string{py.interpreter, "-I", "-S", "-c", pythonZygoteScript, ScriptZygoteMarker, "gateway=" + strconv.Itoa(os.Getpid())},
		Env:        environ(pythonBaseEnv),
		ReadOnly:   py.binds,
		Network:    network,
		Config:     execZygoteConfig{Exec: zygoteExec{Path: args[0], Args: args, Env: append([]string{}, env...)}},
		Executable: args[0],
		// Its children share none of its pages past their execution: it
		// holds its own interpreter alone.
		Memory: 64 << 20,
	}
}

// execZygoteConfig is what a script zygote is given: the program its children
// execute, nothing of any function.
type execZygoteConfig struct {
	Exec zygoteExec `json:"exec"`
}

// zygoteExec is the program a script zygote's children execute: the file of
// sandbox.ZygoteSpec.Executable (Path names it in messages), with Args and
// Env alone.
type zygoteExec struct {
	Path string   `json:"path"`
	Args []string `json:"args"`
	Env  []string `json:"env"`
}

// scriptWorkerMemory is the memory a script worker may hold (its cgroup's
// bound): the heap its address-space limit leaves it, and the runtime's own.
func scriptWorkerMemory(addressSpace int64) int64 {
	if addressSpace <= 0 {
		return 0
	}
	return max(addressSpace-goReservedAddressSpace, 0) + 128<<20
}

// poolSize is the most workers of one function: as many as Python's.
func (s *scripts) poolSize() int {
	return s.opts.PythonPoolSize
}
