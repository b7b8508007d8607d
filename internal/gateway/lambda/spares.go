package lambda

import (
	"cmp"
	"fmt"
	"log/slog"
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
	preamble []byte   // written on the stdin of a worker started by command, before anything else
	env      []string
	binds    []string
	limits   sandbox.Limits
	network  bool
	sandbox  *sandbox.Sandbox // nil: plain processes (Options.InsecureNoSandbox)
	maxReply int64
	goWorker bool
	zygote   *zygotes // Python's fork server of this network view; nil: none
}

// workerIDs numbers the workers of this process; workerFunctions maps the id
// of each worker that was given a function to the function's name.
var (
	workerIDs       atomic.Uint64
	workerFunctions sync.Map
)

// start starts a generic worker: sandboxed, waiting for its init frame; in
// the background (sandbox.Limits.Background) when it is a spare, until taken.
func (s *workerSpec) start(background bool) (*pyWorker, error) {
	if background {
		bg := *s
		bg.limits.Background = true
		s = &bg
	}
	w := &pyWorker{
		id:        strconv.FormatUint(workerIDs.Add(1), 10),
		exited:    make(chan struct{}),
		stderr:    &tailBuffer{},
		maxReply:  s.maxReply,
		sandboxed: s.sandbox != nil,
		goWorker:  s.goWorker,
		processes: cmp.Or(s.limits.Processes, sandbox.DefaultProcesses),
	}
	w.sharedUser = s.sandbox != nil && s.sandbox.SharesUser()
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
// start. Spares start in the background (sandbox.Limits.Background): while
// the processors are short, a spare's start yields them to the loads and
// calls that someone waits for, which on two processors it slowed the most.
// A spare is given to one function, once, and never comes back: it
// holds that function's code from then on. The set refills in the background,
// one start at a time, while it has users (the open functions of its network
// view); with the last one gone it kills its spares.
type spares struct {
	spec workerSpec
	want int

	mu      sync.Mutex
	ready   []*pyWorker
	users   int
	filling chan struct{} // closed when the running refill ends; nil when none runs

	hits, misses atomic.Uint64
}

func newSpares(spec workerSpec, want int) *spares {
	return &spares{spec: spec, want: max(want, 0)}
}

// take hands out a spare, oldest first, at the usual processor weight, or
// starts a worker when there is none. It does not refill the set: the caller
// does once its worker has answered, or after maxRefillDelay (pyFunction), so
// that the start of the next spare does not compete for the processors with
// the load and first call it was taken for.
func (s *spares) take() (*pyWorker, error) {
	for {
		s.mu.Lock()
		var w *pyWorker
		if len(s.ready) > 0 {
			w, s.ready = s.ready[0], s.ready[1:]
		}
		s.mu.Unlock()
		if w == nil {
			break
		}
		if w.dead() || w.retiredSpare() {
			go w.kill() // reaps it
			continue
		}
		// A function's worker never runs at the spares' weight: one that
		// cannot leave it is dropped.
		if err := w.foreground(); err != nil {
			if !w.dead() { // a dead one's cgroup is gone
				slog.Warn("worker: a spare could not be given the usual processor weight; it is dropped", "worker", w.id, "error", err)
			}
			go w.kill()
			continue
		}
		s.hits.Add(1)
		return w, nil
	}
	s.misses.Add(1)
	return s.spec.start(false)
}

// refill starts the spares missing, in the background.
func (s *spares) refill() {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.refillLocked()
}

func (s *spares) refillLocked() {
	if s.filling != nil || s.users == 0 || len(s.ready) >= s.want {
		return
	}
	done := make(chan struct{})
	s.filling = done
	go s.fill(done)
}

// fill starts spares until there are enough. A failed start ends it: the
// refill after the next cold start tries again, and that start, which finds
// no spare, reports the failure.
func (s *spares) fill(done chan struct{}) {
	defer close(done)
	for {
		s.mu.Lock()
		if s.users == 0 || len(s.ready) >= s.want {
			s.filling = nil
			s.mu.Unlock()
			return
		}
		s.mu.Unlock()
		w, err := s.spec.start(true)
		s.mu.Lock()
		if err != nil || s.users == 0 {
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

// sweep drops the spares forked by a retired zygote, which would keep it
// alive, and refills the set from the current one.
func (s *spares) sweep() {
	if s.spec.zygote == nil {
		return
	}
	s.mu.Lock()
	var keep, gone []*pyWorker
	for _, w := range s.ready {
		if w.retiredSpare() {
			gone = append(gone, w)
		} else {
			keep = append(keep, w)
		}
	}
	s.ready = keep
	if len(gone) > 0 {
		s.refillLocked()
	}
	s.mu.Unlock()
	destroyAll(gone, (*pyWorker).kill)
}

// use adds a user: a function of the set's network view.
func (s *spares) use() {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.users++
	if s.spec.zygote != nil {
		s.spec.zygote.use()
	}
}

// release removes a user; the last one kills the spares, once the refill
// under way has ended.
func (s *spares) release() {
	s.mu.Lock()
	s.users--
	if s.spec.zygote != nil {
		s.spec.zygote.release()
	}
	if s.users > 0 {
		s.mu.Unlock()
		return
	}
	filling := s.filling
	s.mu.Unlock()
	if filling != nil {
		<-filling
	}
	s.mu.Lock()
	var ready []*pyWorker
	if s.users == 0 {
		ready, s.ready = s.ready, nil
	}
	s.mu.Unlock()
	destroyAll(ready, (*pyWorker).kill)
}

// memory is what the spares hold. Unless fresh, a spare read before counts
// with its last reading, as a pool's workers do, so that a cold start reads no
// spare's memory.
func (s *spares) memory(fresh bool) int64 {
	s.mu.Lock()
	ready := slices.Clone(s.ready)
	s.mu.Unlock()
	var total int64
	for _, w := range ready {
		m := w.spareMemory.Load()
		if fresh || m == 0 {
			m = w.memory()
			w.spareMemory.Store(m)
		}
		total += m
	}
	return total
}

func (s *spares) count() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return len(s.ready)
}

// spareSets are a runtime's spares, one set per network view, made at the
// first function that needs one. Every field of a view's spec is the same for
// all its functions (options and the network view), so the first function's
// spec serves them all.
type spareSets struct {
	want  int
	pools *poolSet

	mu   sync.Mutex
	sets map[bool]*spares
}

// get is the set for spec's network view, made with spec if there is none,
// with one more user: the caller releases it when its function closes. A
// sandbox whose commands share one user, whose task limit (RLIMIT_NPROC)
// counts across them all, gets no spares: a spare's limit is set when it
// starts, so the workers started after it could use it up before it serves.
func (ss *spareSets) get(spec workerSpec, sb *sandbox.Sandbox) *spares {
	ss.mu.Lock()
	defer ss.mu.Unlock()
	s, ok := ss.sets[spec.network]
	if !ok {
		if ss.sets == nil {
			ss.sets = map[bool]*spares{}
		}
		want := ss.want
		if sb != nil && sb.SharesUser() {
			want = 0
		}
		s = newSpares(spec, want)
		ss.sets[spec.network] = s
		ss.pools.addSpares(s)
		if spec.zygote != nil {
			// At once, rather than at the next periodic sweep: a call in
			// between would find only the retired zygote's spares, drop
			// them, and start its worker without one.
			spec.zygote.onTakeover(s.sweep)
		}
	}
	s.use()
	return s
}
