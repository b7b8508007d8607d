package lambda

import (
	"errors"
	"fmt"
	"sort"
)

// ErrUnknownRuntime is returned for a Function.Runtime no runtime serves.
var ErrUnknownRuntime = errors.New("unknown runtime")

// PoolStats counts the pooled VMs or worker processes of a runtime, over all its
// compiled functions that are not closed.
type PoolStats struct {
	Idle int
	Busy int
	// Spares are the workers started ahead, not given to a function yet.
	Spares int
	// Starts, Evictions and Reaps count the workers given a function (cold
	// starts: a spare loading the function, or a worker started for it), stopped
	// to keep the memory budget, and stopped by the idle sweep (idle past the
	// timeout, or busy while idle), since the runtime was made.
	Starts, Evictions, Reaps uint64
	// SpareMisses counts the workers a function had to start itself, finding no
	// spare: each a full cold start.
	SpareMisses uint64
}

// StatsReporter is implemented by the runtimes that pool VMs or workers; the
// gateway exports the counts as gauges.
type StatsReporter interface {
	Stats() PoolStats
}

// New returns the four runtimes by name (JavaScript, Python, Jsonnet, Builtin),
// JavaScript and Jsonnet in sandboxed workers.
func New(opts Options) map[string]Runtime {
	return map[string]Runtime{
		JavaScript: NewSandboxedJavaScript(opts),
		Python:     NewPython(opts),
		Jsonnet:    NewSandboxedJsonnet(opts),
		Builtin:    NewBuiltin(opts),
	}
}

// Registry dispatches functions to the runtime their Runtime field names.
type Registry struct {
	runtimes map[string]Runtime
}

// NewRegistry returns a registry of the runtimes of New.
func NewRegistry(opts Options) *Registry {
	return &Registry{runtimes: New(opts)}
}

// Get returns the runtime called name.
func (r *Registry) Get(name string) (Runtime, error) {
	rt, ok := r.runtimes[name]
	if !ok {
		return nil, fmt.Errorf("%w %q (known: %v)", ErrUnknownRuntime, name, r.Names())
	}
	return rt, nil
}

// Names returns the runtime names, sorted.
func (r *Registry) Names() []string {
	names := make([]string, 0, len(r.runtimes))
	for name := range r.runtimes {
		names = append(names, name)
	}
	sort.Strings(names)
	return names
}

// Compile compiles fn with the runtime fn.Runtime names.
func (r *Registry) Compile(fn Function) (Compiled, error) {
	rt, err := r.Get(fn.Runtime)
	if err != nil {
		return nil, err
	}
	return rt.Compile(fn)
}

// Stats returns the pool counts of the runtimes that pool, by runtime name.
func (r *Registry) Stats() map[string]PoolStats {
	stats := map[string]PoolStats{}
	for name, rt := range r.runtimes {
		if reporter, ok := rt.(StatsReporter); ok {
			stats[name] = reporter.Stats()
		}
	}
	return stats
}
