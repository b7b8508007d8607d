package lambda

import (
	"errors"
	"runtime"
	"time"

	"github.com/metalambda/metalambda/internal/gateway/sandbox"
)

// Defaults of Options.
const (
	DefaultPythonBinary      = "python3"
	DefaultPythonMemoryLimit = 256 << 20
	DefaultTimeout           = 10 * time.Second
	DefaultMaxReplyBytes     = 16 << 20
	DefaultWorkerCPU         = 1000
	DefaultWorkerIdleTimeout = 5 * time.Minute
)

// Options configures the runtimes. Every zero field but Sandbox takes its documented
// default; a runtime that starts workers needs a Sandbox, or InsecureNoSandbox.
type Options struct {
	// PythonBinary is the CPython 3 interpreter (default "python3", looked up in PATH).
	PythonBinary string
	// PythonMemoryLimit is each Python worker's address-space limit in bytes
	// (RLIMIT_AS; default 256 MiB; negative means no limit).
	PythonMemoryLimit int64
	// ScriptMemoryLimit is each JavaScript and Jsonnet worker's address-space limit
	// in bytes (RLIMIT_AS; default 1792 MiB; negative means no limit). An idle
	// worker holds about 1.3 GiB of address space (what the Go runtime reserves at
	// start, thread stacks), little of it memory, so its heap gets about this
	// limit less 1.3 GiB (default about 400 MiB); much below 1.5 GiB workers fail.
	ScriptMemoryLimit int64
	// PythonPoolSize is the most worker processes a Python function (and a
	// sandboxed JavaScript or Jsonnet one) keeps; they
	// start on demand, when a call finds every worker busy (default 2×GOMAXPROCS,
	// at least 2 and at most 8: on 2 cores, make bench measured 8,100 calls/s with 2
	// workers and 11,600 with 4, as workers waiting on the pipe leave CPUs idle).
	PythonPoolSize int
	// JavaScriptPoolSize is the number of goja VMs per JavaScript function
	// (default 2*GOMAXPROCS).
	JavaScriptPoolSize int
	// JsonnetEvaluators is the number of resident evaluators per Jsonnet function,
	// started at its first call (default GOMAXPROCS).
	JsonnetEvaluators int
	// DefaultTimeout bounds an invocation whose Function.Timeout is zero (default 10s).
	DefaultTimeout time.Duration
	// Builtins are the Go functions the builtin runtime can run.
	Builtins Builtins
	// Sandbox starts the worker processes: one built by sandbox.New, which the
	// caller closes after the runtimes. It is required unless InsecureNoSandbox is
	// set; without either a runtime refuses to compile (errNoSandbox). A gateway
	// never leaves it nil: gateway.New chooses and probes it at start.
	Sandbox *sandbox.Sandbox
	// InsecureNoSandbox runs Python workers as plain processes of the gateway's
	// user, with its view of the file system and network, and JavaScript and
	// Jsonnet functions in the gateway's process: for development only.
	InsecureNoSandbox bool
	// WorkerCPU bounds the processor time of each sandboxed worker and everything
	// it starts, in thousandths of a core (default 1000: one core), where the
	// sandbox gives workers cgroups.
	WorkerCPU int64
	// WorkerIdleTimeout is how long a worker may wait for a call before it is
	// stopped (default 5 minutes); the next call starts a fresh one.
	WorkerIdleTimeout time.Duration
	// WorkerSpares is how many workers each runtime keeps started ahead, per
	// network view, while it has functions: sandboxed and waiting for a function,
	// so that a call that needs a new worker only loads the function into one
	// (0 or negative: none, each new worker is started on the call; Defaults
	// has DefaultWorkerSpares).
	WorkerSpares int
	// PythonZygote is ZygoteAuto (the default) to fork Python workers from a
	// zygote where the sandbox can start one, ZygoteOff to start each with its
	// own interpreter.
	PythonZygote string
	// ScriptZygote is ZygoteAuto (the default) to fork JavaScript and Jsonnet
	// workers from a zygote where the sandbox can start one and
	// Options.PythonBinary runs (the zygote is a Python fork server, whose
	// children execute the worker executable once sandboxed), ZygoteOff to
	// start each in a sandbox of its own.
	ScriptZygote string
	// MaxReplyBytes bounds one reply of a worker process (default 16 MiB); a
	// larger reply kills the worker and fails the call.
	MaxReplyBytes int64
	// MemoryBudget, when set, bounds the memory of the workers of every runtime
	// made with it (one per gateway; nil: none).
	MemoryBudget *MemoryBudget
}

// Defaults are the runtimes' options without flags, which cmd/gateway's flags
// start from. The pool sizes stay 0, which means sized by GOMAXPROCS, and no
// sandbox is chosen: the gateway chooses and checks it at its start.
func Defaults() Options {
	return Options{
		PythonBinary:      DefaultPythonBinary,
		PythonMemoryLimit: DefaultPythonMemoryLimit,
		ScriptMemoryLimit: DefaultScriptMemoryLimit,
		DefaultTimeout:    DefaultTimeout,
		WorkerCPU:         DefaultWorkerCPU,
		WorkerIdleTimeout: DefaultWorkerIdleTimeout,
		WorkerSpares:      DefaultWorkerSpares,
		PythonZygote:      DefaultPythonZygote,
		ScriptZygote:      DefaultScriptZygote,
		MaxReplyBytes:     DefaultMaxReplyBytes,
	}
}

// errNoSandbox is a Compile's error when Options has neither a Sandbox nor
// InsecureNoSandbox.
var errNoSandbox = errors.New("no sandbox: Options.Sandbox is nil (gateway.New chooses one; sandbox.New builds one) and InsecureNoSandbox is not set")

// workerSandbox is Options.Sandbox: nil with InsecureNoSandbox, errNoSandbox
// without either.
func (o *Options) workerSandbox() (*sandbox.Sandbox, error) {
	switch {
	case o.InsecureNoSandbox:
		return nil, nil
	case o.Sandbox == nil:
		return nil, errNoSandbox
	}
	return o.Sandbox, nil
}

func (o Options) withDefaults() Options {
	if o.PythonBinary == "" {
		o.PythonBinary = DefaultPythonBinary
	}
	if o.PythonMemoryLimit == 0 {
		o.PythonMemoryLimit = DefaultPythonMemoryLimit
	}
	if o.ScriptMemoryLimit == 0 {
		o.ScriptMemoryLimit = DefaultScriptMemoryLimit
	}
	if o.PythonPoolSize <= 0 {
		o.PythonPoolSize = min(max(2*runtime.GOMAXPROCS(0), 2), 8)
	}
	if o.JavaScriptPoolSize <= 0 {
		o.JavaScriptPoolSize = 2 * runtime.GOMAXPROCS(0)
	}
	if o.JsonnetEvaluators <= 0 {
		o.JsonnetEvaluators = runtime.GOMAXPROCS(0)
	}
	if o.MaxReplyBytes <= 0 {
		o.MaxReplyBytes = DefaultMaxReplyBytes
	}
	if o.DefaultTimeout <= 0 {
		o.DefaultTimeout = DefaultTimeout
	}
	if o.WorkerCPU <= 0 {
		o.WorkerCPU = DefaultWorkerCPU
	}
	if o.WorkerIdleTimeout <= 0 {
		o.WorkerIdleTimeout = DefaultWorkerIdleTimeout
	}
	if o.PythonZygote == "" {
		o.PythonZygote = DefaultPythonZygote
	}
	if o.ScriptZygote == "" {
		o.ScriptZygote = DefaultScriptZygote
	}
	return o
}

// workerLimits are the sandbox limits of a worker with this address-space limit
// and memory bound (bytes; not positive: none).
func (o Options) workerLimits(addressSpace, memory int64) sandbox.Limits {
	l := sandbox.Limits{AddressSpace: addressSpace, Memory: memory, CPU: o.WorkerCPU}
	if addressSpace <= 0 {
		l.AddressSpace = -1
	}
	if memory <= 0 {
		l.Memory = -1
	}
	return l
}

// timeout is fn's invocation time limit.
func (o Options) timeout(fn Function) time.Duration {
	if fn.Timeout > 0 {
		return fn.Timeout
	}
	return o.DefaultTimeout
}
