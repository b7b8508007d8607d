package pythonlambda

import (
	"fmt"
	"time"

	"github.com/metalambda/metalambda/internal/hookapi"
)

// Sync is the PythonLambda sync hook: it answers the desired children (a ConfigMap,
// a Service, an Ingress and spec.replicas pods, all named from the parent with
// kmeta.ChildName) and the parent's status. An invalid parent is an error wrapping
// ErrInvalidParent, and the engine then leaves the children alone.
//
// A finalize call (req.Finalizing) answers the same, finalized: the children go with
// the parent by garbage collection.
func Sync(req *hookapi.CompositeRequest) (*hookapi.CompositeResponse, error) {
	return syncAt(req, time.Now())
}

// syncAt is Sync with the clock read: now is the Ready condition's
// lastTransitionTime when its status changes, and the time idleness is judged at.
func syncAt(req *hookapi.CompositeRequest, now time.Time) (*hookapi.CompositeResponse, error) {
	l, err := parseParent(req.Parent)
	if err != nil {
		return nil, err
	}
	resync, err := scaleAt(l, req.Parent, now)
	if err != nil {
		return nil, err
	}
	n := childNames(l)
	hash := podHash(l, n)
	desired, err := children(l, n, hash)
	if err != nil {
		return nil, fmt.Errorf("build children of %s/%s: %w", l.Namespace, l.Name, err)
	}
	obs, err := observe(req.Children)
	if err != nil {
		return nil, fmt.Errorf("read children of %s/%s: %w", l.Namespace, l.Name, err)
	}
	var st map[string]any
	if err := roundTrip(makeStatus(l, n, hash, obs, now), &st); err != nil {
		return nil, err
	}
	return &hookapi.CompositeResponse{Status: st, Children: desired, ResyncAfterSeconds: resync, Finalized: req.Finalizing}, nil
}
