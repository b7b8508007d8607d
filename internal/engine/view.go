package engine

import (
	"net/http"
	"sort"
	"time"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/client-go/kubernetes"

	"github.com/metalambda/metalambda/internal/engine/api"
	"github.com/metalambda/metalambda/internal/engine/hook"
	"github.com/metalambda/metalambda/internal/engineapi"
)

// DefaultHookCallHistory is how many hook calls the engine remembers by default.
const DefaultHookCallHistory = api.DefaultHookCallHistory

// API returns the handler of the engine's API (package api). kube reviews the
// callers' tokens and access; the engine's own identity needs create on tokenreviews
// and subjectaccessreviews.
func (m *Manager) API(kube kubernetes.Interface) (http.Handler, error) {
	return api.New(engineView{m}, m.env.calls, kube)
}

// engineView is the engine as its API reads it.
type engineView struct{ m *Manager }

var _ api.Engine = engineView{}

func (v engineView) Ready() bool { return v.m.Ready() }

func (v engineView) Standby() (string, bool) {
	if v.m.env.opts.Standby == nil {
		return "", false
	}
	return v.m.env.opts.Standby()
}

// Controllers are the controller objects this engine serves, the namespaced ones
// included, sorted by kind, namespace and name.
func (v engineView) Controllers() []*unstructured.Unstructured {
	var out []*unstructured.Unstructured
	for _, kind := range []string{CompositeKind, DecoratorKind, NamespacedCompositeKind, NamespacedDecoratorKind} {
		sub := v.m.subs[kind]
		if sub == nil {
			continue // the namespaced kinds are not served
		}
		for _, obj := range sub.List("") {
			if v.m.env.opts.TargetSelector.Matches(labelsOf(obj)) {
				out = append(out, obj)
			}
		}
	}
	sort.SliceStable(out, func(i, j int) bool {
		a, b := out[i], out[j]
		if a.GetKind() != b.GetKind() {
			return a.GetKind() < b.GetKind()
		}
		if a.GetNamespace() != b.GetNamespace() {
			return a.GetNamespace() < b.GetNamespace()
		}
		return a.GetName() < b.GetName()
	})
	return out
}

// Controller is the running controller of kind, namespace and name, or nil (an
// untyped nil: a nil *controller in the interface would not compare equal to nil).
func (v engineView) Controller(kind, namespace, name string) api.Controller {
	v.m.mu.Lock()
	defer v.m.mu.Unlock()
	h := v.m.hosted[controllerKey{kind: kind, namespace: namespace, name: name}]
	if h == nil || h.stopped {
		return nil
	}
	return controllerView{h.controller}
}

func (v engineView) Resource(apiVersion, kind string) (api.Resource, error) {
	res, err := v.m.env.discovery.GetKind(apiVersion, kind)
	if err != nil {
		return api.Resource{}, err
	}
	return api.Resource{Group: res.Group, Resource: res.Resource}, nil
}

// controllerView is a running controller as the API reads it: from its caches and
// what it remembers of its parents, never by an API call.
type controllerView struct{ c *controller }

var _ api.Controller = controllerView{}

func (v controllerView) Overview() api.Overview {
	var o api.Overview
	for _, p := range v.c.parents {
		o.ParentResources = append(o.ParentResources, engineapi.Resource{APIVersion: p.res.APIVersion(), Resource: p.res.Resource})
		for _, obj := range p.sub.List("") {
			if p.selects(obj) {
				o.Parents++
			}
		}
	}
	for _, ct := range v.c.children {
		o.ChildResources = append(o.ChildResources, engineapi.Resource{APIVersion: ct.res.APIVersion(), Resource: ct.res.Resource})
	}
	o.Hooks = map[string]string{}
	hooks := v.c.hooks
	for name, ep := range map[string]*hook.Endpoint{engineapi.HookSync: hooks.sync, engineapi.HookFinalize: hooks.finalize, engineapi.HookCustomize: hooks.customize} {
		if ep != nil {
			o.Hooks[name] = ep.URL
		}
	}
	return o
}

func (v controllerView) ParentResources() []api.Resource {
	out := make([]api.Resource, len(v.c.parents))
	for i, p := range v.c.parents {
		out[i] = api.Resource{Group: p.res.Group, Resource: p.res.Resource}
	}
	return out
}

func (v controllerView) Parents(namespace, name, kind string) []api.Parent {
	var found []api.Parent
	for i, p := range v.c.parents {
		if (kind != "" && p.res.Kind != kind) || p.res.Namespaced != (namespace != "") {
			continue
		}
		if obj, ok := p.sub.Get(namespace, name); ok && p.selects(obj) {
			found = append(found, api.Parent{Object: obj, Resource: api.Resource{Group: p.res.Group, Resource: p.res.Resource}, Type: i})
		}
	}
	return found
}

func (v controllerView) ParentState(p api.Parent) api.ParentState {
	var out api.ParentState
	key := parentKey{parent: p.Type, namespace: p.Object.GetNamespace(), name: p.Object.GetName()}
	st, _ := v.c.states.get(key)
	out.LastSync, out.LastError = st.lastSync, st.lastErr
	for _, d := range st.desired {
		out.Desired = append(out.Desired, v.desiredChild(d))
	}
	for _, ct := range v.c.children {
		out.Controlled = append(out.Controlled, ct.sub.Controlled(p.Object.GetUID())...)
	}
	return out
}

// desiredChild pairs a child the hook asked for with the cluster's object.
func (v controllerView) desiredChild(desired *unstructured.Unstructured) api.DesiredChild {
	out := api.DesiredChild{Desired: desired}
	ct := v.c.childTypeOf(desired)
	if ct == nil {
		return out
	}
	if observed, ok := ct.sub.Get(desired.GetNamespace(), desired.GetName()); ok {
		out.Observed, out.InSync = observed, v.c.inSync(desired, observed)
	}
	return out
}

func (v controllerView) ChildResource(group, kind string) (api.Resource, bool) {
	for _, ct := range v.c.children {
		if ct.res.Kind == kind && ct.res.Group == group {
			return api.Resource{Group: ct.res.Group, Resource: ct.res.Resource}, true
		}
	}
	return api.Resource{}, false
}

func (v controllerView) AllParents() []api.Parent {
	var out []api.Parent
	for i, p := range v.c.parents {
		for _, obj := range p.sub.List("") {
			if p.selects(obj) {
				out = append(out, api.Parent{Object: obj, Resource: api.Resource{Group: p.res.Group, Resource: p.res.Resource}, Type: i})
			}
		}
	}
	sort.SliceStable(out, func(i, j int) bool {
		a, b := out[i].Object, out[j].Object
		if a.GetNamespace() != b.GetNamespace() {
			return a.GetNamespace() < b.GetNamespace()
		}
		return a.GetName() < b.GetName()
	})
	return out
}

// Enqueue queues p with the queue's Add, as an event does: the parent is synced as
// soon as a worker is free, before any parent whose resync or backoff is still
// pending, and past its own error backoff. A Retry-After hold still holds: the
// worker that takes the parent puts it back until the hold ends, since the hook
// asked not to be called before then.
func (v controllerView) Enqueue(p api.Parent) time.Duration {
	key := parentKey{parent: p.Type, namespace: p.Object.GetNamespace(), name: p.Object.GetName()}
	v.c.queue.Add(key)
	return v.c.workLoop.Held(key)
}
