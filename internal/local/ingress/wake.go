package ingress

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"sync"
	"time"

	"k8s.io/apimachinery/pkg/util/wait"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/validation"
	"k8s.io/client-go/dynamic"
	"k8s.io/klog/v2"
)

// Annotations of scale from zero.
const (
	// WakeTargetAnnotation on an Ingress names the object that scales its backends, as
	// "<resource>.<version>.<group>/<name>" ("pythonlambdas.v1.example.com/demo"; the
	// core group is empty: "configmaps.v1/demo") in the Ingress's namespace. A request
	// for a backend of that Ingress without ready endpoints is held while the router
	// signals demand to the object, and answered once an endpoint is ready.
	WakeTargetAnnotation = "metalambda.dev/wake-target"
	// LastDemandAnnotation is what the router writes on a wake target: the time of
	// the latest request for it (RFC 3339, UTC), at once when a request is held, and
	// otherwise at most once per Options.DemandInterval while requests come or are in
	// flight.
	LastDemandAnnotation = "metalambda.dev/last-demand"
)

// fieldManager names the router's writes.
const fieldManager = "metalambda-ingress"

// wakeTarget is the object a WakeTargetAnnotation names.
type wakeTarget struct {
	resource  schema.GroupVersionResource
	namespace string
	name      string
	key       string // namespace/resource.version.group/name
}

// parseWakeTarget reads a WakeTargetAnnotation value of an Ingress in namespace.
func parseWakeTarget(namespace, value string) (*wakeTarget, error) {
	res, name, ok := strings.Cut(value, "/")
	parts := strings.SplitN(res, ".", 3)
	if !ok || len(parts) < 2 || parts[0] == "" || parts[1] == "" {
		return nil, fmt.Errorf("annotation %s %q is not <resource>.<version>.<group>/<name>", WakeTargetAnnotation, value)
	}
	if errs := validation.IsDNS1123Subdomain(name); len(errs) > 0 {
		return nil, fmt.Errorf("annotation %s %q: name %q: %s", WakeTargetAnnotation, value, name, strings.Join(errs, "; "))
	}
	gvr := schema.GroupVersionResource{Resource: parts[0], Version: parts[1]}
	if len(parts) == 3 {
		gvr.Group = parts[2]
	}
	return &wakeTarget{resource: gvr, namespace: namespace, name: name, key: namespace + "/" + value}, nil
}

// patchDemand writes at as the target's LastDemandAnnotation.
func patchDemand(ctx context.Context, client dynamic.Interface, t *wakeTarget, at time.Time) error {
	body, _ := json.Marshal(map[string]any{"metadata": map[string]any{"annotations": map[string]string{
		LastDemandAnnotation: at.UTC().Format(time.RFC3339Nano),
	}}}) // plain maps: cannot fail
	_, err := client.Resource(t.resource).Namespace(t.namespace).Patch(ctx, t.name, types.MergePatchType, body, metav1.PatchOptions{FieldManager: fieldManager})
	return err
}

// demand tracks the requests of each wake target and writes their demand: at once to
// wake a target, and once per interval for targets with requests since the last
// write or in flight, so steady traffic writes at most once per interval per target
// and a long request keeps its target awake.
type demand struct {
	patch    func(ctx context.Context, t *wakeTarget, at time.Time) error
	interval time.Duration
	now      func() time.Time

	mu      sync.Mutex
	targets map[string]*targetDemand
}

// targetDemand is one target's requests.
type targetDemand struct {
	target   *wakeTarget
	inflight int
	seen     time.Time // start of the latest request not written yet; zero when none
	written  time.Time // when demand was last written

	wakeMu sync.Mutex // one wake write at a time; the others find it written
}

func newDemand(patch func(context.Context, *wakeTarget, time.Time) error, interval time.Duration) *demand {
	return &demand{patch: patch, interval: interval, now: time.Now, targets: map[string]*targetDemand{}}
}

func (d *demand) entry(t *wakeTarget) *targetDemand {
	e, ok := d.targets[t.key]
	if !ok {
		e = &targetDemand{target: t}
		d.targets[t.key] = e
	}
	return e
}

// begin counts a request to t in flight; end ends it.
func (d *demand) begin(t *wakeTarget) {
	d.mu.Lock()
	defer d.mu.Unlock()
	e := d.entry(t)
	e.inflight++
	e.seen = d.now()
}

func (d *demand) end(t *wakeTarget) {
	d.mu.Lock()
	defer d.mu.Unlock()
	d.entry(t).inflight--
}

// wake writes demand for t now, unless a write for t succeeded within the interval:
// the target then knows already (concurrent held requests make one write).
func (d *demand) wake(ctx context.Context, t *wakeTarget) error {
	d.mu.Lock()
	e := d.entry(t)
	d.mu.Unlock()
	e.wakeMu.Lock()
	defer e.wakeMu.Unlock()
	d.mu.Lock()
	recent := !e.written.IsZero() && d.now().Sub(e.written) < d.interval
	d.mu.Unlock()
	if recent {
		return nil
	}
	at := d.now()
	if err := d.patch(ctx, t, at); err != nil {
		return err
	}
	d.mu.Lock()
	e.written = at
	d.mu.Unlock()
	return nil
}

// due lists what flush writes at now: targets with requests in flight (demand now)
// or started since the last write (demand at the latest start). Entries with nothing
// to write and no recent write are forgotten.
func (d *demand) due(now time.Time) map[*targetDemand]time.Time {
	d.mu.Lock()
	defer d.mu.Unlock()
	out := map[*targetDemand]time.Time{}
	for key, e := range d.targets {
		switch {
		case e.inflight > 0:
			out[e] = now
		case !e.seen.IsZero():
			out[e] = e.seen
		case now.Sub(e.written) > 10*d.interval:
			delete(d.targets, key)
		}
		e.seen = time.Time{}
	}
	return out
}

// flush writes the demand due; a failed write is logged and retried at the next
// flush.
func (d *demand) flush(ctx context.Context) {
	for e, at := range d.due(d.now()) {
		if err := d.patch(ctx, e.target, at); err != nil {
			klog.FromContext(ctx).Error(err, "Cannot write demand", "target", e.target.key)
			d.mu.Lock()
			if e.seen.IsZero() {
				e.seen = at
			}
			d.mu.Unlock()
			continue
		}
		d.mu.Lock()
		e.written = d.now()
		d.mu.Unlock()
	}
}

// run flushes every interval until ctx ends.
func (d *demand) run(ctx context.Context) {
	wait.UntilWithContext(ctx, d.flush, d.interval)
}

// Why a held request was not served.
var (
	errHoldFull    = errors.New("too many requests are already held")
	errHoldTimeout = errors.New("no endpoint became ready in time")
)

// holdError is a held request's failure, answered 503 with Retry-After.
type holdError struct {
	target *wakeTarget
	err    error
	detail string
}

func (e *holdError) Error() string {
	return fmt.Sprintf("%s is scaled to zero and waking it failed: %v%s", e.target.key, e.err, e.detail)
}

func (e *holdError) Unwrap() error { return e.err }

// broadcast wakes every waiter at each notify: a waiter takes wait's channel, then
// reads the state it waits on, then blocks on the channel.
type broadcast struct {
	mu sync.Mutex
	ch chan struct{}
}

func newBroadcast() *broadcast { return &broadcast{ch: make(chan struct{})} }

func (b *broadcast) wait() <-chan struct{} {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.ch
}

func (b *broadcast) notify() {
	b.mu.Lock()
	defer b.mu.Unlock()
	close(b.ch)
	b.ch = make(chan struct{})
}

// holds counts the requests held per wake target.
type holds struct {
	max int
	mu  sync.Mutex
	n   map[string]int
}

func (h *holds) acquire(key string) bool {
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.n[key] >= h.max {
		return false
	}
	h.n[key]++
	return true
}

func (h *holds) release(key string) {
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.n[key]--; h.n[key] == 0 {
		delete(h.n, key)
	}
}
