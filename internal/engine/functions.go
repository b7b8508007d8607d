package engine

import (
	"context"
	"net/url"
	"strings"
	"sync"

	"golang.org/x/time/rate"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/tools/cache"
	"k8s.io/klog/v2"

	fnv1 "github.com/metalambda/metalambda/internal/apis/metalambda/v1alpha1"
	"github.com/metalambda/metalambda/internal/engine/informer"
)

var functionsGVR = schema.GroupVersionResource{Group: fnv1.Group, Version: fnv1.Version, Resource: fnv1.Resource}

// functionKey names a gateway Function.
type functionKey struct{ namespace, name string }

// functions follows the gateway's Functions, when their CRD is served, and re-syncs
// every parent of the controllers a Function serves once its code changes and the
// new revision serves every parent at once (no rollout policy).
type functions struct {
	m   *Manager
	sub *informer.Subscription
	// rollouts drives the Functions' stepped rollouts (spec.rollout).
	rollouts *rollouts

	mu      sync.Mutex
	current map[functionKey]string // last status.currentRevision seen
	pending []functionKey          // Functions whose parents wait to be queued
	wake    chan struct{}
}

// watchFunctions subscribes to Functions when discovery serves their resource; it
// returns nil when it does not (no gateway installed).
func (m *Manager) watchFunctions(ctx context.Context) (*functions, error) {
	if _, err := m.env.discovery.Get(functionsGVR.GroupVersion().String(), functionsGVR.Resource); err != nil {
		klog.FromContext(ctx).V(1).Info("Functions not served; code changes of gateway hooks re-sync no parent", "err", err.Error())
		return nil, nil
	}
	f := &functions{m: m, current: map[functionKey]string{}, wake: make(chan struct{}, 1)}
	f.rollouts = newRollouts(m, f)
	// Set before any controller starts: their syncs report to it.
	m.env.rollouts = f.rollouts
	f.sub = m.env.informers.Subscribe(functionsGVR)
	if err := f.sub.AddHandler(cache.ResourceEventHandlerFuncs{
		AddFunc:    func(obj any) { f.observe(asObject(obj)) },
		UpdateFunc: func(_, obj any) { f.observe(asObject(obj)) },
		DeleteFunc: func(obj any) {
			if u := asObject(obj); u != nil {
				f.mu.Lock()
				delete(f.current, functionKey{u.GetNamespace(), u.GetName()})
				f.mu.Unlock()
				f.rollouts.enqueue(functionKey{u.GetNamespace(), u.GetName()})
			}
		},
	}); err != nil {
		f.sub.Close()
		return nil, err
	}
	return f, nil
}

// observe records the Function's current revision. The first sight of a Function
// (the initial list at start) changes nothing; a later change to a revision that
// serves every parent queues the Function's parents.
func (f *functions) observe(obj *unstructured.Unstructured) {
	if obj == nil {
		return
	}
	rev, _, _ := unstructured.NestedString(obj.Object, "status", "currentRevision")
	if rev == "" {
		return
	}
	key := functionKey{obj.GetNamespace(), obj.GetName()}
	f.rollouts.enqueue(key)
	f.mu.Lock()
	defer f.mu.Unlock()
	prev, seen := f.current[key]
	if seen && prev == rev {
		return
	}
	if seen && !servesAll(obj, rev) {
		// A rollout policy holds the new revision back: the parents move with
		// the shares, not all at once. Record the revision only once it serves all.
		return
	}
	f.current[key] = rev
	if !seen || rolledOut(obj, rev) {
		// At start nothing changed; after a rollout its driver moved the parents.
		return
	}
	f.pending = append(f.pending, key)
	select {
	case f.wake <- struct{}{}:
	default:
	}
}

// servesAll reports whether status.revisions gives rev a share of 100.
func servesAll(obj *unstructured.Unstructured, rev string) bool {
	revisions, _, _ := unstructured.NestedSlice(obj.Object, "status", "revisions")
	for _, r := range revisions {
		m, _ := r.(map[string]any)
		if m["name"] == rev {
			share, _, _ := unstructured.NestedInt64(m, "share")
			return share >= 100
		}
	}
	return false
}

// rolledOut reports whether status.rollout says rev's rollout completed: the
// driver moved the parents step by step. A revision that serves every parent
// after its rollout halted or stopped midway (the policy removed) did not move
// them all: every parent is re-synced.
func rolledOut(obj *unstructured.Unstructured, rev string) bool {
	r, _, _ := unstructured.NestedString(obj.Object, "status", "rollout", "revision")
	phase, _, _ := unstructured.NestedString(obj.Object, "status", "rollout", "phase")
	return r == rev && phase == fnv1.RolloutComplete
}

// run queues the parents of changed Functions, at most rps per second.
func (f *functions) run(ctx context.Context, rps float64) {
	limiter := rate.NewLimiter(rate.Limit(rps), max(1, int(rps)))
	for {
		select {
		case <-ctx.Done():
			return
		case <-f.wake:
		}
		for {
			f.mu.Lock()
			if len(f.pending) == 0 {
				f.mu.Unlock()
				break
			}
			key := f.pending[0]
			f.pending = f.pending[1:]
			f.mu.Unlock()
			if err := f.resync(ctx, key, limiter); err != nil {
				return
			}
		}
	}
}

// resync queues every parent of every hosted controller the Function serves.
func (f *functions) resync(ctx context.Context, key functionKey, limiter *rate.Limiter) error {
	served := f.m.servedBy(key)
	n := 0
	for _, c := range served {
		for i, p := range c.parents {
			for _, parent := range p.sub.List("") {
				if !p.selects(parent) {
					continue
				}
				if err := limiter.Wait(ctx); err != nil {
					return err
				}
				c.queue.Add(parentKey{parent: i, namespace: parent.GetNamespace(), name: parent.GetName()})
				n++
			}
		}
	}
	klog.FromContext(ctx).Info("Function code changed; parents queued for a sync", "function", key.namespace+"/"+key.name, "controllers", len(served), "parents", n)
	return nil
}

// controllersReady reports whether every controller object the engine hosts (of
// its target selector, not being deleted) runs, as its current spec says, with its
// parents' caches synced.
func (m *Manager) controllersReady() bool {
	m.mu.Lock()
	defer m.mu.Unlock()
	for kind, sub := range m.subs {
		for _, obj := range sub.List("") {
			if obj.GetDeletionTimestamp() != nil || !m.env.opts.TargetSelector.Matches(labels.Set(obj.GetLabels())) {
				continue
			}
			h := m.hosted[controllerKey{kind: kind, name: obj.GetName()}]
			if h == nil || h.stopped || h.specHash != specHash(obj) {
				return false
			}
			for _, p := range h.controller.parents {
				if !p.sub.HasSynced() {
					return false
				}
			}
		}
	}
	return true
}

// servedBy lists the hosted controllers one of whose hooks is the Function's.
func (m *Manager) servedBy(key functionKey) []*controller {
	m.mu.Lock()
	defer m.mu.Unlock()
	var out []*controller
	for _, h := range m.hosted {
		if h.stopped || h.controller.queue == nil {
			continue
		}
		if h.controller.servedBy(key) {
			out = append(out, h.controller)
		}
	}
	return out
}

// servedBy reports whether any hook of c calls the Function: its URL's path is
// /hooks/{namespace}/{name}, as the gateway serves it.
func (c *controller) servedBy(key functionKey) bool {
	for _, ep := range c.hookURLs() {
		if functionOfURL(ep) == key {
			return true
		}
	}
	return false
}

func (c *controller) hookURLs() []string {
	var out []string
	if c.hooks.sync != nil {
		out = append(out, c.hooks.sync.URL)
	}
	if c.hooks.finalize != nil {
		out = append(out, c.hooks.finalize.URL)
	}
	if c.hooks.customize != nil {
		out = append(out, c.hooks.customize.URL)
	}
	return out
}

// functionOfURL is the Function a gateway hook URL calls, the zero key for any
// other URL. The path ends in /hooks/{namespace}/{name}; a gateway behind a path
// prefix is found as well.
func functionOfURL(raw string) functionKey {
	u, err := url.Parse(raw)
	if err != nil {
		return functionKey{}
	}
	parts := strings.Split(strings.Trim(u.Path, "/"), "/")
	n := len(parts)
	if n < 3 || parts[n-3] != "hooks" || parts[n-2] == "" || parts[n-1] == "" {
		return functionKey{}
	}
	return functionKey{parts[n-2], parts[n-1]}
}
