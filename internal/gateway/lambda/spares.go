package lambda

import (
	"fmt"
	"os"
	"slices"
	"strconv"
	"sync"
	"sync/atomic"

	"github.com/metalambda/metalambda/internal/gateway/sandbox"
)

// DefaultWorkerSpares is the default of Options.WorkerSpares.
const DefaultWorkerSpares = 2

// workerSpec is how a runtime starts its workers for one network view. The
// command, environment, read-only binds and limits are the same whatever the
// function: a function (its source, handler, environment and name) reaches a
// worker only in the init frame, after the worker is sandboxed. So a worker can
// be started before anyone knows which function it will serve.
type workerSpec struct {
	command  []string // the executable and its arguments, before the marker's
	marker   string   // PythonWorkerMarker or ScriptWorkerMarker
	env      []string
	binds    []string
	limits   sandbox.Limits
	network  bool
	sandbox  *sandbox.Sandbox // nil: plain processes (Options.InsecureNoSandbox)
	maxReply int64
	goWorker bool
}

// workerIDs numbers the workers of this process; workerFunctions maps the id
// of each worker that was given a function to the function's name.
var (
	workerIDs       atomic.Uint64
	workerFunctions sync.Map
)

// start starts a generic worker: sandboxed, waiting for its init frame.
func (s *workerSpec) start() (*pyWorker, error) {
	w := &pyWorker{
		id:        strconv.FormatUint(workerIDs.Add(1), 10),
		frames:    make(chan []byte, 1),
		killed:    make(chan struct{}),
		exited:    make(chan struct{}),
		stderr:    &tailBuffer{},
		maxReply:  s.maxReply,
		sandboxed: s.sandbox != nil,
		goWorker:  s.goWorker,
	}
	if s.sandbox == nil {
		dir, err := os.MkdirTemp("", "metalambda-python-") // only Python runs unsandboxed
		if err != nil {
			return nil, fmt.Errorf("worker directory: %w", err)
		}
		w.dir = dir
	}
	args := append(slices.Clone(s.command), s.marker, "gateway="+strconv.Itoa(os.Getpid()), "worker="+w.id)
	if err := w.start(s, args); err != nil {
		w.removeDir()
		return nil, err
	}
	return w, nil
}

// spares keeps up to want workers of one spec started ahead, so that a call
// that needs a new worker finds one sandboxed and waiting for its function: it
// pays for loading the function, not for the sandbox and the interpreter's
// start. A spare is given to one function, once, and never comes back: it
// holds that function's code from then on. The set refills in the background,
// one start at a time; stop kills the spares and ends the refill, and the next
// take starts it again.
type spares struct {
	spec workerSpec
	want int

	mu      sync.Mutex
	ready   []*pyWorker
	stopped bool
	filling chan struct{} // closed when the running refill ends; nil when none runs

	hits, misses atomic.Uint64
}

func newSpares(spec workerSpec, want int) *spares {
	return &spares{spec: spec, want: max(want, 0)}
}

// take hands out a spare, oldest first, or starts a worker when there is none;
// either way it starts the refill.
func (s *spares) take() (*pyWorker, error) {
	s.mu.Lock()
	s.stopped = false
	var w *pyWorker
	for w == nil && len(s.ready) > 0 {
		w, s.ready = s.ready[0], s.ready[1:]
		if w.dead() {
			go w.kill() // reaps it
			w = nil
		}
	}
	s.refillLocked()
	s.mu.Unlock()
	if w != nil {
		s.hits.Add(1)
		return w, nil
	}
	s.misses.Add(1)
	return s.spec.start()
}

func (s *spares) refillLocked() {
	if s.filling != nil || s.stopped || len(s.ready) >= s.want {
		return
	}
	done := make(chan struct{})
	s.filling = done
	go s.refill(done)
}

// refill starts spares until there are enough. A failed start ends it: the
// next take tries again, and its own start reports the failure.
func (s *spares) refill(done chan struct{}) {
	defer close(done)
	for {
		s.mu.Lock()
		if s.stopped || len(s.ready) >= s.want {
			s.filling = nil
			s.mu.Unlock()
			return
		}
		s.mu.Unlock()
		w, err := s.spec.start()
		s.mu.Lock()
		if err != nil || s.stopped {
			s.filling = nil
			s.mu.Unlock()
			if w != nil {
				w.kill()
			}
			return
		}
		s.ready = append(s.ready, w)
		s.mu.Unlock()
	}
}

// stop kills the spares once the refill under way has ended.
func (s *spares) stop() {
	s.mu.Lock()
	s.stopped = true
	filling := s.filling
	s.mu.Unlock()
	if filling != nil {
		<-filling
	}
	s.mu.Lock()
	ready := s.ready
	s.ready = nil
	s.mu.Unlock()
	destroyAll(ready, (*pyWorker).kill)
}

// memory is what the spares hold.
func (s *spares) memory() int64 {
	s.mu.Lock()
	ready := slices.Clone(s.ready)
	s.mu.Unlock()
	var total int64
	for _, w := range ready {
		total += w.memory()
	}
	return total
}

func (s *spares) count() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return len(s.ready)
}

// spareSets are a runtime's spares, one set per network view, made at the
// first function that needs one and stopped with the runtime's last function.
type spareSets struct {
	want  int
	pools *poolSet

	mu   sync.Mutex
	sets map[bool]*spares
}

// get is the set for spec's network view, made with spec if there is none.
func (ss *spareSets) get(spec workerSpec) *spares {
	ss.mu.Lock()
	defer ss.mu.Unlock()
	if s, ok := ss.sets[spec.network]; ok {
		return s
	}
	if ss.sets == nil {
		ss.sets = map[bool]*spares{}
	}
	s := newSpares(spec, ss.want)
	ss.sets[spec.network] = s
	ss.pools.addSpares(s)
	return s
}
