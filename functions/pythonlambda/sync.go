package pythonlambda

import (
	"fmt"
	"time"

	"github.com/metalambda/metalambda/internal/hookapi"
)

// Sync is the PythonLambda sync hook: it answers the desired children (a ConfigMap,
// a Service, an Ingress and spec.replicas pods, all named from the parent with
// kmeta.ChildName, plus during a rollout a surge pod and the ConfigMaps older pods
// mount) and the parent's status. An invalid parent is an error wrapping
// ErrInvalidParent, and the engine then leaves the children alone.
//
// A finalize call (req.Finalizing) answers the same, finalized: the children go with
// the parent by garbage collection.
func Sync(req *hookapi.CompositeRequest) (*hookapi.CompositeResponse, error) {
	return syncWith(req, Options{}, time.Now())
}

// SyncWith is Sync configured by an operator's options.
func SyncWith(opts Options) func(req *hookapi.CompositeRequest) (*hookapi.CompositeResponse, error) {
	return func(req *hookapi.CompositeRequest) (*hookapi.CompositeResponse, error) {
		return syncWith(req, opts, time.Now())
	}
}

// syncAt is Sync with the clock read: now is the Ready condition's
// lastTransitionTime when its status changes, and the time idleness is judged at.
func syncAt(req *hookapi.CompositeRequest, now time.Time) (*hookapi.CompositeResponse, error) {
	return syncWith(req, Options{}, now)
}

func syncWith(req *hookapi.CompositeRequest, opts Options, now time.Time) (*hookapi.CompositeResponse, error) {
	l, err := parseParent(req.Parent)
	if err != nil {
		return nil, err
	}
	l.Pip = opts.Pip
	config, err := configRevision(refsOf(l.Spec), req.Related)
	if err != nil {
		return nil, fmt.Errorf("read related objects of %s/%s: %w", l.Namespace, l.Name, err)
	}
	l.ServedConfig = servedConfig(l.ConfigRevision, config)
	resync, err := scaleAt(l, req.Parent, now)
	if err != nil {
		return nil, err
	}
	n := childNames(l)
	hash := podHash(l, n)
	obs, err := observe(req.Children)
	if err != nil {
		return nil, fmt.Errorf("read children of %s/%s: %w", l.Namespace, l.Name, err)
	}
	desired, err := children(l, n, hash, planRollout(l, n, hash, obs))
	if err != nil {
		return nil, fmt.Errorf("build children of %s/%s: %w", l.Namespace, l.Name, err)
	}
	st := makeStatus(l, n, hash, obs, now)
	st.ConfigRevision = config
	var out map[string]any
	if err := roundTrip(st, &out); err != nil {
		return nil, err
	}
	return &hookapi.CompositeResponse{Status: out, Children: desired, ResyncAfterSeconds: resync, Finalized: req.Finalizing}, nil
}

// servedConfig is the config revision the pods are built with: the one recorded in
// the parent's status, so that a change of a Secret or ConfigMap first lands in
// status.configRevision, which is part of the parent's ControllerRevision, and the
// engine then rolls the pods to it one at a time. Before anything is recorded, and
// once the env reads nothing, it is the current one.
func servedConfig(recorded, current string) string {
	if recorded == "" || current == "" {
		return current
	}
	return recorded
}
