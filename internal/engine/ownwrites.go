package engine

import (
	"strconv"
	"sync"
	"time"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
)

// ownWriteTimeout bounds how long a parent waits for the caches to show the engine's
// own writes before it is synced anyway.
const ownWriteTimeout = 30 * time.Second

// ownWrites tells the engine's own writes apart from everyone else's changes, so that
// the events of a sync's writes cause at most one more sync, and only when the hook
// can answer differently:
//
//   - a parent is not synced while the caches have not shown every write of its last
//     sync (the next sync would see a world older than the engine's own writes);
//   - once they have, it is synced again if the hook will be shown something it has
//     not seen: a child was written, the parent's status, labels or annotations
//     changed (a hook may wait to see its own status committed before it acts on it,
//     as upstream's hooks may), or someone else changed something meanwhile. Only
//     writes the hook cannot see, a finalizer or a status under ignoreStatusChanges,
//     cause no sync.
//
// Writes are tracked per parent UID, which every event of a child carries in its
// controller reference.
type ownWrites struct {
	mu      sync.Mutex
	parents map[types.UID]*pendingWrites
	now     func() time.Time
}

// objectRef names one object the engine wrote.
type objectRef struct {
	gvr             schema.GroupVersionResource
	namespace, name string
}

// writeKind says what an own write was.
type writeKind int

const (
	// parentWritten is a write of the parent that the hook's next answer cannot
	// depend on: its finalizer, or its status under ignoreStatusChanges.
	parentWritten writeKind = iota
	// parentInputWritten changed what the hook is shown of its parent (status, labels,
	// annotations): like a child's write, it calls for one more sync once the caches
	// show it.
	parentInputWritten
	childUpdated
	childCreated
)

type pendingWrites struct {
	objects map[objectRef]uint64 // resourceVersion each write returned
	// unclaimed holds, while the sync runs, the highest version each event showed of
	// an object not (yet) noted as written: an event can overtake the answer to the
	// write that caused it.
	unclaimed map[objectRef]uint64
	open      bool // the sync that writes them still runs
	inputs    bool // something the hook is shown was written: a child, or the parent's status
	news      bool // someone else changed something, or asked for a sync
	deadline  time.Time
}

func newOwnWrites() *ownWrites {
	return &ownWrites{parents: map[types.UID]*pendingWrites{}, now: time.Now}
}

// hold reports how long a sync of parent must wait for the caches to show the last
// sync's writes; 0 means sync now. A held sync is remembered as news.
func (w *ownWrites) hold(parent types.UID) time.Duration {
	w.mu.Lock()
	defer w.mu.Unlock()
	p := w.parents[parent]
	if p == nil {
		return 0
	}
	if wait := p.deadline.Sub(w.now()); wait > 0 && len(p.objects) > 0 {
		p.news = true
		return wait
	}
	delete(w.parents, parent)
	return 0
}

// begin starts tracking the writes of one sync of parent.
func (w *ownWrites) begin(parent types.UID) {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.parents[parent] = &pendingWrites{objects: map[objectRef]uint64{}, unclaimed: map[objectRef]uint64{}, open: true, deadline: w.now().Add(ownWriteTimeout)}
}

// end closes the sync of parent and reports whether it needs another one at once:
// every write it made is in the cache already, and one of them is shown to the hook.
func (w *ownWrites) end(parent types.UID) bool {
	w.mu.Lock()
	defer w.mu.Unlock()
	p := w.parents[parent]
	if p == nil {
		return false
	}
	p.open = false
	p.news = p.news || len(p.unclaimed) > 0
	p.unclaimed = nil
	return w.settle(parent, p)
}

// wrote notes that the engine wrote obj (previously at resourceVersion before) during
// a sync of parent.
func (w *ownWrites) wrote(parent types.UID, gvr schema.GroupVersionResource, obj *unstructured.Unstructured, before string, kind writeKind) {
	if obj == nil || obj.GetResourceVersion() == before {
		return // nothing changed, so no event comes
	}
	rv, ok := parseVersion(obj.GetResourceVersion())
	if !ok {
		return
	}
	w.mu.Lock()
	defer w.mu.Unlock()
	p := w.parents[parent]
	if p == nil || !p.open {
		return
	}
	p.inputs = p.inputs || kind != parentWritten
	ref := objectRef{gvr: gvr, namespace: obj.GetNamespace(), name: obj.GetName()}
	seen, early := p.unclaimed[ref]
	delete(p.unclaimed, ref)
	switch {
	case !early:
		p.objects[ref] = rv
	case seen > rv:
		p.news = true // someone else wrote after the engine
	case seen < rv:
		p.news = true // someone else wrote before the engine; its own event is to come
		p.objects[ref] = rv
	}
}

// observed is told of every event about obj, an object of gvr whose parent is
// parent (its controller, or itself). It reports whether the event needs a sync of
// the parent: false for the engine's own writes while others are pending, and for
// the last of them when none can change the hook's answer.
func (w *ownWrites) observed(parent types.UID, gvr schema.GroupVersionResource, obj *unstructured.Unstructured, deleted bool) bool {
	w.mu.Lock()
	defer w.mu.Unlock()
	p := w.parents[parent]
	if p == nil {
		return true
	}
	ref := objectRef{gvr: gvr, namespace: obj.GetNamespace(), name: obj.GetName()}
	want, tracked := p.objects[ref]
	seen, ok := parseVersion(obj.GetResourceVersion())
	switch {
	case !tracked && p.open:
		p.unclaimed[ref] = max(p.unclaimed[ref], seen) // wrote claims it if it is the engine's
		return false
	case !tracked:
		// Someone else's change: the last pending write's event brings the sync.
		p.news = true
		if w.now().After(p.deadline) {
			delete(w.parents, parent)
			return true
		}
		return false
	case deleted || !ok || seen > want:
		p.news = true // someone else wrote after the engine, or deleted it
		delete(p.objects, ref)
	case seen == want:
		delete(p.objects, ref)
	default:
		return false // an older version of an object the engine wrote since
	}
	return w.settle(parent, p)
}

// settle drops a closed, complete entry and reports whether its parent needs a sync.
func (w *ownWrites) settle(parent types.UID, p *pendingWrites) bool {
	if p.open || len(p.objects) > 0 {
		return false
	}
	delete(w.parents, parent)
	return p.inputs || p.news
}

// tracking reports whether writes of a sync of parent are being tracked: the sync
// runs, or the caches have not shown all its writes yet.
func (w *ownWrites) tracking(parent types.UID) bool {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.parents[parent] != nil
}

// forget drops what is tracked for a deleted parent.
func (w *ownWrites) forget(parent types.UID) {
	w.mu.Lock()
	defer w.mu.Unlock()
	delete(w.parents, parent)
}

// parseVersion reads a resourceVersion. They are opaque to clients in principle, but
// the API server's are etcd revisions: decimal numbers that grow with every write.
func parseVersion(rv string) (uint64, bool) {
	n, err := strconv.ParseUint(rv, 10, 64)
	return n, err == nil
}
