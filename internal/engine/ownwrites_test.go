package engine

import (
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
)

var (
	ownParentsGVR = schema.GroupVersionResource{Group: "example.com", Version: "v1", Resource: "parents"}
	ownCMGVR      = schema.GroupVersionResource{Version: "v1", Resource: "configmaps"}
)

func at(name, rv string) *unstructured.Unstructured {
	u := &unstructured.Unstructured{Object: map[string]any{}}
	u.SetNamespace("ns")
	u.SetName(name)
	u.SetResourceVersion(rv)
	return u
}

// step is one thing that happens to a parent's tracked writes: a write the sync
// made, an event a handler sees, or the end of the sync.
type step struct {
	wrote    *unstructured.Unstructured
	before   string
	kind     writeKind
	event    *unstructured.Unstructured
	deleted  bool
	end      bool
	wantSync bool // of an event or the end of the sync
}

func TestOwnWrites(t *testing.T) {
	const uid = types.UID("parent-uid")
	gvrOf := func(s step) schema.GroupVersionResource {
		if s.kind == parentWritten || s.kind == parentInputWritten {
			return ownParentsGVR
		}
		return ownCMGVR
	}
	for _, tt := range []struct {
		name  string
		steps []step
		// wantHeld: a sync asked for at the end is held for the pending writes
		wantHeld bool
	}{
		{name: "children created, then seen: one more sync", steps: []step{
			{wrote: at("c0", "11"), kind: childCreated},
			{wrote: at("c1", "12"), kind: childCreated},
			{end: true},
			{event: at("c0", "11"), kind: childCreated},
			{event: at("c1", "12"), kind: childCreated, wantSync: true},
		}},
		{name: "a parent write the hook cannot see (a finalizer, a status under ignoreStatusChanges) causes no sync", steps: []step{
			{wrote: at("p", "20"), before: "19", kind: parentWritten},
			{end: true},
			{event: at("p", "20"), kind: parentWritten},
		}},
		{name: "a changed status is shown to the hook: one more sync once seen", steps: []step{
			{wrote: at("p", "20"), before: "19", kind: parentInputWritten},
			{end: true},
			{event: at("p", "20"), kind: parentInputWritten, wantSync: true},
		}},
		{name: "status, then labels: one sync once the last is seen", steps: []step{
			{wrote: at("p", "20"), before: "19", kind: parentInputWritten},
			{wrote: at("p", "21"), before: "20", kind: parentInputWritten},
			{end: true},
			{event: at("p", "20"), kind: parentInputWritten},
			{event: at("p", "21"), kind: parentInputWritten, wantSync: true},
		}},
		{name: "an event that overtakes its write's answer is the engine's own", steps: []step{
			{event: at("p", "20"), kind: parentWritten},
			{wrote: at("p", "20"), before: "19", kind: parentWritten},
			{end: true},
		}},
		{name: "children seen before the sync ends: sync at its end", steps: []step{
			{wrote: at("c0", "11"), kind: childCreated},
			{event: at("c0", "11"), kind: childCreated},
			{end: true, wantSync: true},
		}},
		{name: "a no-op write expects no event", steps: []step{
			{wrote: at("c0", "11"), before: "11", kind: childUpdated},
			{end: true},
		}},
		{name: "someone else writes after the engine", steps: []step{
			{wrote: at("p", "20"), before: "19", kind: parentWritten},
			{end: true},
			{event: at("p", "25"), kind: parentWritten, wantSync: true},
		}},
		{name: "someone else changes another object while writes are pending", steps: []step{
			{wrote: at("p", "20"), before: "19", kind: parentWritten},
			{end: true},
			{event: at("other", "21"), kind: childUpdated},
			{event: at("p", "20"), kind: parentWritten, wantSync: true},
		}},
		{name: "a pending write's object is deleted", steps: []step{
			{wrote: at("c0", "11"), kind: childUpdated, before: "5"},
			{end: true},
			{event: at("c0", "11"), kind: childUpdated, deleted: true, wantSync: true},
		}},
		{name: "an older version of a written object is no news", steps: []step{
			{wrote: at("p", "18"), before: "17", kind: parentWritten},
			{wrote: at("p", "20"), before: "18", kind: parentWritten},
			{end: true},
			{event: at("p", "18"), kind: parentWritten},
			{event: at("p", "20"), kind: parentWritten},
		}},
		{name: "a sync asked for while writes are pending is held", wantHeld: true, steps: []step{
			{wrote: at("c0", "11"), kind: childCreated},
			{end: true},
		}},
	} {
		t.Run(tt.name, func(t *testing.T) {
			w := newOwnWrites()
			w.begin(uid)
			for i, s := range tt.steps {
				var got bool
				switch {
				case s.wrote != nil:
					w.wrote(uid, gvrOf(s), s.wrote, s.before, s.kind)
					continue
				case s.end:
					got = w.end(uid)
				default:
					got = w.observed(uid, gvrOf(s), s.event, s.deleted)
				}
				if got != s.wantSync {
					t.Errorf("step %d: sync = %v, want %v", i, got, s.wantSync)
				}
			}
			if held := w.hold(uid) > 0; held != tt.wantHeld {
				t.Errorf("held = %v, want %v", held, tt.wantHeld)
			}
		})
	}
}

func TestOwnWritesTimeOut(t *testing.T) {
	const uid = types.UID("parent-uid")
	now := time.Unix(1000, 0)
	w := newOwnWrites()
	w.now = func() time.Time { return now }
	w.begin(uid)
	w.wrote(uid, ownCMGVR, at("c0", "11"), "", childCreated)
	w.end(uid)
	if w.hold(uid) != ownWriteTimeout {
		t.Fatalf("a sync right after the writes is not held for %s", ownWriteTimeout)
	}
	now = now.Add(ownWriteTimeout)
	if wait := w.hold(uid); wait != 0 {
		t.Errorf("a sync after the timeout is held for %s more", wait)
	}
	if !w.observed(uid, ownCMGVR, at("c1", "12"), false) {
		t.Error("after the timeout, someone else's change does not sync the parent")
	}
}
