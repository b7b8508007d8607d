package engine

import (
	"sync"
	"time"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
)

// parentStates remember, per parent of one controller, its last sync and the
// children the hook last asked for, for the engine's API. A nil *parentStates
// remembers nothing (the call history is off).
type parentStates struct {
	mu     sync.Mutex
	states map[parentKey]*parentState
}

// parentState is what the API shows of one parent besides the cluster's objects.
type parentState struct {
	lastSync time.Time
	lastErr  error
	// desired are the children of the hook's last answer as the engine applied them
	// (controller reference, labels and desired hash stamped); nil before the first.
	desired []*unstructured.Unstructured
}

func newParentStates(enabled bool) *parentStates {
	if !enabled {
		return nil
	}
	return &parentStates{states: map[parentKey]*parentState{}}
}

func (s *parentStates) state(key parentKey) *parentState {
	st := s.states[key]
	if st == nil {
		st = &parentState{}
		s.states[key] = st
	}
	return st
}

// synced records the end of a sync of key. A successful sync of a parent never
// applied is one the controller does not handle (not selected, or gone): it is not
// remembered, so that objects of a parent resource the controller ignores cost
// nothing.
func (s *parentStates) synced(key parentKey, at time.Time, err error) {
	if s == nil {
		return
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	st, known := s.states[key]
	if !known && err == nil {
		return
	}
	if !known {
		st = s.state(key)
	}
	st.lastSync, st.lastErr = at, err
}

// applied records the children the hook asked for in a sync of key. The objects are
// not changed after this, so they are kept without a copy.
func (s *parentStates) applied(key parentKey, desired []*unstructured.Unstructured) {
	if s == nil {
		return
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	s.state(key).desired = desired
}

// forget drops a deleted parent.
func (s *parentStates) forget(key parentKey) {
	if s == nil {
		return
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	delete(s.states, key)
}

// get returns a copy of what is known of key.
func (s *parentStates) get(key parentKey) (parentState, bool) {
	if s == nil {
		return parentState{}, false
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	st, ok := s.states[key]
	if !ok {
		return parentState{}, false
	}
	return *st, true
}
