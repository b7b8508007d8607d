package engine

import (
	"context"
	"fmt"
	"slices"
	"sync"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/tools/cache"

	"github.com/metalambda/metalambda/internal/apis/metacontroller/v1alpha1"
	"github.com/metalambda/metalambda/internal/engine/discovery"
	"github.com/metalambda/metalambda/internal/engine/hook"
	"github.com/metalambda/metalambda/internal/engine/informer"
	"github.com/metalambda/metalambda/internal/hookapi"
	"github.com/metalambda/metalambda/internal/workloop"
)

// relatedTracker runs a controller's customize hook and serves the related objects
// each parent asked for. Customize answers are cached per parent UID and generation,
// so a status-only change does not call the hook again; a change to a related object
// queues every parent whose rules select it.
type relatedTracker struct {
	c *controller

	mu      sync.Mutex
	entries map[parentKey]*relatedEntry
	subs    map[schema.GroupVersionResource]*informer.Subscription
}

type relatedEntry struct {
	uid        types.UID
	generation int64
	expires    time.Time
	parentNS   string
	rules      []resolvedRule
}

type resolvedRule struct {
	rule     v1alpha1.RelatedResourceRule
	res      *discovery.Resource
	selector labels.Selector
	// namespace to look in; "" means every namespace.
	namespace string
	// namespaces, when set, selects the namespaces (by their labels) to look in;
	// nsSub is the shared Namespace informer it reads them from.
	namespaces labels.Selector
	nsSub      *informer.Subscription
}

func newRelatedTracker(c *controller) *relatedTracker {
	return &relatedTracker{c: c, entries: map[parentKey]*relatedEntry{}, subs: map[schema.GroupVersionResource]*informer.Subscription{}}
}

// objects returns the related objects of parent, grouped like children.
func (r *relatedTracker) objects(ctx context.Context, key parentKey, parent *unstructured.Unstructured) (hookapi.Objects, error) {
	out := hookapi.Objects{}
	if r == nil || r.c.hooks.customize == nil {
		return out, nil
	}
	entry, err := r.entry(ctx, key, parent)
	if err != nil {
		return nil, err
	}
	version := r.c.hooks.sync.Version
	parentNamespaced := parent.GetNamespace() != ""
	for _, rr := range entry.rules {
		sub := r.subscribe(rr.res)
		if !sub.HasSynced() || (rr.nsSub != nil && !rr.nsSub.HasSynced()) {
			return nil, workloop.After(500*time.Millisecond, fmt.Errorf("related %s: %w", rr.res.Resource, errNotSynced))
		}
		typeKey := hookapi.TypeKey(rr.res.Kind, rr.rule.APIVersion)
		if out[typeKey] == nil {
			out[typeKey] = hookapi.ObjectMap{}
		}
		for _, obj := range sub.List(rr.namespace) {
			if rr.selects(obj) {
				out[typeKey][hookapi.Key(version, parentNamespaced, obj)] = obj.Object
			}
		}
	}
	return out, nil
}

func (rr *resolvedRule) selects(obj *unstructured.Unstructured) bool {
	if rr.namespace != "" && obj.GetNamespace() != rr.namespace {
		return false
	}
	if rr.namespaces != nil {
		ns, ok := rr.nsSub.Get("", obj.GetNamespace())
		if !ok || !rr.namespaces.Matches(labels.Set(ns.GetLabels())) {
			return false
		}
	}
	if len(rr.rule.Names) > 0 && !slices.Contains(rr.rule.Names, obj.GetName()) {
		return false
	}
	return rr.selector.Matches(labels.Set(obj.GetLabels()))
}

// entry returns the parent's cached customize answer, calling the hook when the
// parent is new, its generation changed, or the answer is older than its lifetime.
func (r *relatedTracker) entry(ctx context.Context, key parentKey, parent *unstructured.Unstructured) (*relatedEntry, error) {
	r.mu.Lock()
	e := r.entries[key]
	r.mu.Unlock()
	if e != nil && e.uid == parent.GetUID() && e.generation == parent.GetGeneration() && time.Now().Before(e.expires) {
		return e, nil
	}
	var resp hookapi.CustomizeResponse
	req := &hookapi.CustomizeRequest{Controller: r.c.object, Parent: parent.Object}
	if err := r.c.env.hooks.Call(ctx, *r.c.hooks.customize, r.c.callInfo(hook.HookCustomize, parent), req, &resp); err != nil {
		return nil, throttled(err)
	}
	e = &relatedEntry{uid: parent.GetUID(), generation: parent.GetGeneration(), expires: time.Now().Add(r.ttl()), parentNS: parent.GetNamespace()}
	for i, rule := range resp.RelatedResources {
		rr, err := r.resolve(rule, parent)
		if err != nil {
			return nil, invalidResponse("customize relatedResources[%d]: %v", i, err)
		}
		e.rules = append(e.rules, rr)
	}
	r.mu.Lock()
	r.entries[key] = e
	r.mu.Unlock()
	return e, nil
}

func (r *relatedTracker) resolve(rule v1alpha1.RelatedResourceRule, parent *unstructured.Unstructured) (resolvedRule, error) {
	res, err := r.c.env.discovery.Get(rule.APIVersion, rule.Resource)
	if err != nil {
		return resolvedRule{}, err
	}
	if len(rule.Names) > 0 && rule.LabelSelector != nil {
		return resolvedRule{}, fmt.Errorf("names and labelSelector cannot be combined")
	}
	if rule.NamespaceSelector != nil && rule.Namespace != "" {
		return resolvedRule{}, fmt.Errorf("namespace and namespaceSelector cannot be combined")
	}
	sel := labels.Everything()
	if rule.LabelSelector != nil {
		if sel, err = metav1.LabelSelectorAsSelector(rule.LabelSelector); err != nil {
			return resolvedRule{}, fmt.Errorf("labelSelector: %w", err)
		}
	}
	rr := resolvedRule{rule: rule, res: res, selector: sel}
	if r.c.env.tenant != nil {
		if err := tenantRelated(r.c.env, rule, res); err != nil {
			return resolvedRule{}, err
		}
	}
	if rule.NamespaceSelector != nil {
		if err := r.selectNamespaces(&rr, parent); err != nil {
			return resolvedRule{}, err
		}
		return rr, nil
	}
	if res.Namespaced {
		rr.namespace = rule.Namespace
		v1 := r.c.hooks.sync.Version != v1alpha1.HookVersionV2
		if parent.GetNamespace() != "" && (v1 || rr.namespace == "") {
			if v1 && rule.Namespace != "" && rule.Namespace != parent.GetNamespace() {
				return resolvedRule{}, fmt.Errorf("namespace %q: a v1 hook of a namespaced parent sees only its own namespace %q (use hook version v2)", rule.Namespace, parent.GetNamespace())
			}
			rr.namespace = parent.GetNamespace()
		}
	}
	return rr, nil
}

// selectNamespaces makes rr look in the namespaces whose labels match the rule's
// namespaceSelector. Only v2 hooks, or cluster-scoped parents, may look beyond the
// parent's namespace, as upstream rules it.
func (r *relatedTracker) selectNamespaces(rr *resolvedRule, parent *unstructured.Unstructured) error {
	if !rr.res.Namespaced {
		return fmt.Errorf("namespaceSelector needs a namespaced resource, %s is cluster-scoped", rr.res.Resource)
	}
	if parent.GetNamespace() != "" && r.c.hooks.sync.Version != v1alpha1.HookVersionV2 {
		return fmt.Errorf("namespaceSelector: a v1 hook of a namespaced parent sees only its own namespace (use hook version v2)")
	}
	sel, err := metav1.LabelSelectorAsSelector(rr.rule.NamespaceSelector)
	if err != nil {
		return fmt.Errorf("namespaceSelector: %w", err)
	}
	nsRes, err := r.c.env.discovery.Get("v1", "namespaces")
	if err != nil {
		return err
	}
	rr.namespaces, rr.nsSub = sel, r.subscribe(nsRes)
	return nil
}

// ttl is how long a customize answer serves a parent whose generation stays the same.
func (r *relatedTracker) ttl() time.Duration {
	if t := r.c.env.opts.customizeTTL; t > 0 {
		return t
	}
	return customizeCacheTTL
}

// subscribe joins the informer of a related resource once per controller and queues
// the parents that relate to each changed object.
func (r *relatedTracker) subscribe(res *discovery.Resource) *informer.Subscription {
	r.mu.Lock()
	defer r.mu.Unlock()
	if sub := r.subs[res.GroupVersionResource]; sub != nil {
		return sub
	}
	sub := r.c.env.informers.Subscribe(res.GroupVersionResource)
	gvr := res.GroupVersionResource
	enqueue := func(obj any) {
		if u := asObject(obj); u != nil {
			r.enqueueRelating(gvr, u)
		}
	}
	_ = sub.AddHandler(cache.ResourceEventHandlerFuncs{
		AddFunc: enqueue,
		UpdateFunc: func(oldObj, newObj any) {
			if o, n := asObject(oldObj), asObject(newObj); o != nil && n != nil && o.GetResourceVersion() != n.GetResourceVersion() {
				enqueue(newObj)
			}
		},
		DeleteFunc: enqueue,
	})
	r.subs[gvr] = sub
	return sub
}

func (r *relatedTracker) enqueueRelating(gvr schema.GroupVersionResource, obj *unstructured.Unstructured) {
	r.mu.Lock()
	defer r.mu.Unlock()
	for key, e := range r.entries {
		for i := range e.rules {
			rr := &e.rules[i]
			// A namespace's labels changing may change what a namespaceSelector selects.
			if rr.nsSub != nil && gvr.Group == "" && gvr.Resource == "namespaces" {
				r.c.queue.Add(key)
				break
			}
			if rr.res.GroupVersionResource == gvr && rr.selects(obj) {
				r.c.queue.Add(key)
				break
			}
		}
	}
}

func (r *relatedTracker) forget(key parentKey) {
	if r == nil {
		return
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	delete(r.entries, key)
}

func (r *relatedTracker) close() {
	r.mu.Lock()
	defer r.mu.Unlock()
	for _, sub := range r.subs {
		sub.Close()
	}
	r.subs = nil
}
