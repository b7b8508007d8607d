package engine

import (
	"errors"
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
)

// t0 is the time of the syncs the tests record.
var t0 = time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)

func TestParentStatesRememberHandledParentsOnly(t *testing.T) {
	s := newParentStates(true)
	ignored, failing, applied := parentKey{name: "ignored"}, parentKey{name: "failing"}, parentKey{name: "applied"}
	boom := errors.New("boom")
	s.synced(ignored, t0, nil)
	s.synced(failing, t0, boom)
	child := &unstructured.Unstructured{Object: map[string]any{"kind": "ConfigMap"}}
	s.applied(applied, []*unstructured.Unstructured{child})
	s.synced(applied, t0.Add(time.Second), nil)

	if _, ok := s.get(ignored); ok {
		t.Error("a parent synced without anything to do is remembered")
	}
	if st, ok := s.get(failing); !ok || st.lastErr != boom || !st.lastSync.Equal(t0) {
		t.Errorf("failing parent: %+v, %v", st, ok)
	}
	if st, ok := s.get(applied); !ok || st.lastErr != nil || len(st.desired) != 1 || !st.lastSync.Equal(t0.Add(time.Second)) {
		t.Errorf("applied parent: %+v, %v", st, ok)
	}
	s.synced(failing, t0.Add(time.Minute), nil)
	if st, _ := s.get(failing); st.lastErr != nil {
		t.Errorf("a parent that synced after failing keeps the error %v", st.lastErr)
	}
	s.forget(applied)
	if _, ok := s.get(applied); ok {
		t.Error("a deleted parent is remembered")
	}
	off := newParentStates(false)
	off.synced(failing, t0, boom)
	off.applied(applied, nil)
	if _, ok := off.get(failing); ok {
		t.Error("states that are off remember a parent")
	}
}
