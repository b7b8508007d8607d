package engine

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"sync"
	"time"

	"golang.org/x/time/rate"
	authorizationv1 "k8s.io/api/authorization/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/util/flowcontrol"
	"k8s.io/klog/v2"

	fnv1 "github.com/metalambda/metalambda/internal/apis/metalambda/v1alpha1"
	"github.com/metalambda/metalambda/internal/engine/informer"
	"github.com/metalambda/metalambda/internal/jsonvalue"
)

// Kinds of namespaced controller objects: a namespace's own controllers, which the
// engine runs with the rights of one of the namespace's ServiceAccounts.
const (
	NamespacedCompositeKind = fnv1.NamespacedCompositeKind
	NamespacedDecoratorKind = fnv1.NamespacedDecoratorKind
)

// Finalizer name prefixes of namespaced controllers; a parent is in the controller's
// namespace, so the controller's name alone tells them apart.
const (
	namespacedCompositeFinalizerPrefix = "metalambda.dev/namespacedcompositecontroller-"
	namespacedDecoratorFinalizerPrefix = "metalambda.dev/namespaceddecoratorcontroller-"
)

var (
	namespacedCompositeGVR = schema.GroupVersionResource{Group: fnv1.Group, Version: fnv1.Version, Resource: fnv1.NamespacedCompositeResource}
	namespacedDecoratorGVR = schema.GroupVersionResource{Group: fnv1.Group, Version: fnv1.Version, Resource: fnv1.NamespacedDecoratorResource}
)

// namespacedKind reports whether kind is one of the namespaced controller kinds.
func namespacedKind(kind string) bool {
	return kind == NamespacedCompositeKind || kind == NamespacedDecoratorKind
}

// controllerName names a hosted controller in metrics, queues, events and the API:
// a namespaced controller is namespace/name, a cluster-scoped one its name.
func controllerName(obj *unstructured.Unstructured) string {
	if ns := obj.GetNamespace(); ns != "" {
		return ns + "/" + obj.GetName()
	}
	return obj.GetName()
}

// tenant is who a namespaced controller acts as: a ServiceAccount of its namespace.
type tenant struct {
	namespace, serviceAccount string
}

func tenantOf(obj *unstructured.Unstructured) tenant {
	sa, _, _ := unstructured.NestedString(obj.Object, "spec", "serviceAccountName")
	if sa == "" {
		sa = fnv1.DefaultControllerServiceAcct
	}
	return tenant{namespace: obj.GetNamespace(), serviceAccount: sa}
}

// user is the ServiceAccount's user name. Impersonating it without groups, the API
// server gives the request the ServiceAccount's groups itself (system:serviceaccounts,
// system:serviceaccounts:<namespace>, system:authenticated), so the engine needs no
// right to impersonate groups.
func (t tenant) user() string { return "system:serviceaccount:" + t.namespace + ":" + t.serviceAccount }

// groups are the groups the API server gives the impersonated ServiceAccount, which
// its SubjectAccessReviews name.
func (t tenant) groups() []string {
	return []string{"system:serviceaccounts", "system:serviceaccounts:" + t.namespace, "system:authenticated"}
}

func (t tenant) String() string { return t.namespace + "/" + t.serviceAccount }

// tenants holds the environments of namespaced controllers, one per ServiceAccount,
// and the sync limiter of each namespace.
type tenants struct {
	mu       sync.Mutex
	envs     map[tenant]*environment
	limiters map[string]*rate.Limiter
	clients  map[string]flowcontrol.RateLimiter // API requests, by namespace
}

func newTenants() *tenants {
	return &tenants{envs: map[tenant]*environment{}, limiters: map[string]*rate.Limiter{}, clients: map[string]flowcontrol.RateLimiter{}}
}

// clientLimiter is namespace's bucket of API requests, at the rate of cfg (the
// engine's --client-go-qps and --client-go-burst); call it with t.mu held.
func (t *tenants) clientLimiter(namespace string, cfg *rest.Config) flowcontrol.RateLimiter {
	if l := t.clients[namespace]; l != nil {
		return l
	}
	probe := &rest.Config{QPS: cfg.QPS, Burst: cfg.Burst}
	shareRateLimiter(probe)
	t.clients[namespace] = probe.RateLimiter
	return probe.RateLimiter
}

// tenantEnv is the environment of the controllers that act as t: the engine's,
// with clients that impersonate t and informers limited to t's namespace.
func (m *Manager) tenantEnv(t tenant) (*environment, error) {
	m.tenants.mu.Lock()
	defer m.tenants.mu.Unlock()
	if env := m.tenants.envs[t]; env != nil {
		return env, nil
	}
	cfg := rest.CopyConfig(m.cfg)
	cfg.Impersonate = rest.ImpersonationConfig{UserName: t.user()}
	if cfg.RateLimiter != nil {
		// The namespace's own client-side bucket, at the engine's rate: in one
		// shared bucket, a busy tenant's workers would queue ahead of everyone.
		cfg.RateLimiter = m.tenants.clientLimiter(t.namespace, m.cfg)
	}
	cl, err := newClients(cfg, m.env.opts)
	if err != nil {
		return nil, err
	}
	env := *m.env
	env.dynamic, env.meta = cl.dynamic, cl.meta
	env.informers = informer.NewFactory(cl.watches, informer.Options{
		Resync:            m.env.opts.CacheFlushInterval,
		DropManagedFields: m.env.opts.ApplyStrategy == ServerSideApply,
		Namespace:         t.namespace,
	})
	env.tenant, env.reviews = &t, m.kube
	// A tenant's hook answering a redirect would send the engine's request where
	// the hook policy (tenantHook) refuses to: its 3xx is the call's error.
	hooks := *m.env.hooks
	hooks.NoRedirects = true
	env.hooks = &hooks
	env.syncLimiter = m.tenants.limiters[t.namespace]
	if env.syncLimiter == nil && m.env.opts.NamespaceSyncRate > 0 {
		env.syncLimiter = rate.NewLimiter(rate.Limit(m.env.opts.NamespaceSyncRate), m.env.opts.NamespaceSyncBurst)
		m.tenants.limiters[t.namespace] = env.syncLimiter
	}
	m.tenants.envs[t] = &env
	return &env, nil
}

// pruneTenantEnvs drops the environments no hosted controller acts in (a controller
// deleted, or moved to another ServiceAccount, or one whose build failed), so that
// a tenant who edits serviceAccountName over and over does not pile up clients in
// the engine. Their informers stopped with their last subscriber.
func (m *Manager) pruneTenantEnvs() {
	inUse := map[tenant]bool{}
	m.mu.Lock()
	for _, h := range m.hosted {
		if h.controller != nil && h.controller.env != nil && h.controller.env.tenant != nil {
			inUse[*h.controller.env.tenant] = true
		}
	}
	m.mu.Unlock()
	m.tenants.mu.Lock()
	defer m.tenants.mu.Unlock()
	for t := range m.tenants.envs {
		if !inUse[t] {
			delete(m.tenants.envs, t)
		}
	}
}

// buildNamespaced turns a namespaced controller object into a hosted controller
// (not yet started) that acts as its ServiceAccount, once its resources are all of
// its namespace and the ServiceAccount holds every right it needs.
func (m *Manager) buildNamespaced(ctx context.Context, obj *unstructured.Unstructured) (*controller, []string, error) {
	t := tenantOf(obj)
	env, err := m.tenantEnv(t)
	if err != nil {
		return nil, nil, err
	}
	var (
		c           *controller
		unsupported []string
	)
	if obj.GetKind() == NamespacedDecoratorKind {
		var dc fnv1.NamespacedDecoratorController
		if err := jsonvalue.Convert(obj.Object, &dc); err != nil {
			return nil, nil, buildErr("InvalidSpec", "decode %s: %v", NamespacedDecoratorKind, err)
		}
		c, unsupported, err = m.buildDecorator(ctx, env, obj, NamespacedDecoratorKind, namespacedDecoratorFinalizerPrefix, &dc.Spec.DecoratorControllerSpec)
	} else {
		var cc fnv1.NamespacedCompositeController
		if err := jsonvalue.Convert(obj.Object, &cc); err != nil {
			return nil, nil, buildErr("InvalidSpec", "decode %s: %v", NamespacedCompositeKind, err)
		}
		c, unsupported, err = m.buildComposite(ctx, env, obj, NamespacedCompositeKind, namespacedCompositeFinalizerPrefix, &cc.Spec.CompositeControllerSpec)
	}
	if err != nil {
		return nil, unsupported, err
	}
	if err := namespacedScope(c); err != nil {
		c.shutdown()
		return nil, unsupported, err
	}
	if err := checkRights(ctx, m.kube, t, neededRights(c, env.opts.ApplyStrategy)); err != nil {
		c.shutdown()
		return nil, unsupported, err
	}
	return c, unsupported, nil
}

// namespacedScope refuses cluster-scoped parents and children: a namespaced
// controller's objects are all of its namespace.
func namespacedScope(c *controller) error {
	var cluster []string
	for _, p := range c.parents {
		if !p.res.Namespaced {
			cluster = append(cluster, "parent "+p.res.Resource)
		}
	}
	for _, ct := range c.children {
		if !ct.res.Namespaced {
			cluster = append(cluster, "child "+ct.res.Resource)
		}
	}
	if len(cluster) > 0 {
		return buildErr("ClusterScopedResource", "%s: a namespaced controller reads and writes only objects of its own namespace; use a CompositeController or DecoratorController (a cluster admin's) for cluster-scoped resources", strings.Join(cluster, ", "))
	}
	return nil
}

// overQuota reports, for a namespaced controller, the error that keeps it from
// running when its namespace already runs the most it may: the oldest controllers of
// a namespace run, the others wait until one goes.
func (m *Manager) overQuota(obj *unstructured.Unstructured) error {
	limit := m.env.opts.MaxNamespacedControllersPerNamespace
	if limit <= 0 {
		return nil
	}
	siblings := m.namespacedControllers(obj.GetNamespace())
	i := slices.IndexFunc(siblings, func(o *unstructured.Unstructured) bool { return o.GetUID() == obj.GetUID() })
	if i < limit {
		return nil
	}
	return buildErr("TooManyControllers", "namespace %s has %d namespaced controllers and may run %d (the engine's --max-namespaced-controllers-per-namespace); this one, among the newest, waits until an older one is deleted", obj.GetNamespace(), len(siblings), limit)
}

// namespacedControllers lists the namespaced controllers of namespace this engine
// serves, oldest first.
func (m *Manager) namespacedControllers(namespace string) []*unstructured.Unstructured {
	var out []*unstructured.Unstructured
	for _, kind := range []string{NamespacedCompositeKind, NamespacedDecoratorKind} {
		sub := m.subs[kind]
		if sub == nil {
			continue
		}
		for _, o := range sub.List(namespace) {
			if o.GetDeletionTimestamp() == nil && m.env.opts.TargetSelector.Matches(labelsOf(o)) {
				out = append(out, o)
			}
		}
	}
	slices.SortStableFunc(out, func(a, b *unstructured.Unstructured) int {
		if c := a.GetCreationTimestamp().Compare(b.GetCreationTimestamp().Time); c != 0 {
			return c
		}
		return strings.Compare(a.GetKind()+"/"+a.GetName(), b.GetKind()+"/"+b.GetName())
	})
	return out
}

func describeTenant(t tenant) string { return fmt.Sprintf("ServiceAccount %s", t) }

// watchNamespaced subscribes to the namespaced controller kinds when discovery
// serves them (their CRDs are optional: an engine installed as upstream's drop-in
// has none).
func (m *Manager) watchNamespaced(ctx context.Context) error {
	for kind, gvr := range map[string]schema.GroupVersionResource{NamespacedCompositeKind: namespacedCompositeGVR, NamespacedDecoratorKind: namespacedDecoratorGVR} {
		if _, err := m.env.discovery.Get(gvr.GroupVersion().String(), gvr.Resource); err != nil {
			klog.FromContext(ctx).V(1).Info("Namespaced controllers not served", "kind", kind, "err", err.Error())
			continue
		}
		if !m.mayWatch(ctx, gvr) {
			// Their CRD is installed, but this engine was not given them (the
			// chart's engine.namespacedControllers: false): a cache it may not
			// list would never sync, and the engine never be ready.
			klog.FromContext(ctx).Info("Namespaced controllers served but not granted to the engine; not serving them", "kind", kind)
			continue
		}
		sub := m.env.informers.Subscribe(gvr)
		if err := sub.AddHandler(m.handler(kind)); err != nil {
			sub.Close()
			return err
		}
		m.subs[kind] = sub
	}
	return nil
}

// enqueueNamespace queues every namespaced controller of namespace.
func (m *Manager) enqueueNamespace(namespace string) {
	for _, o := range m.namespacedControllers(namespace) {
		m.queue.Add(controllerKey{kind: o.GetKind(), namespace: o.GetNamespace(), name: o.GetName()})
	}
}

// forbidden marks the hosted controller of key for a check of its rights, which
// stops it with MissingRights when its ServiceAccount lost one.
// A refusal for another cause (a ResourceQuota) leaves the controller running, and
// its rights are checked at most once per Options.RightsRecheckInterval.
func (m *Manager) forbidden(key controllerKey) {
	m.mu.Lock()
	h := m.hosted[key]
	if h == nil || h.checking || h.stopped {
		m.mu.Unlock()
		return
	}
	h.checking = true
	m.mu.Unlock()
	go func() {
		ctx, cancel := context.WithTimeout(context.Background(), m.env.opts.RightsRecheckInterval)
		defer cancel()
		c := h.controller
		err := checkRights(ctx, m.kube, *c.env.tenant, neededRights(c, c.env.opts.ApplyStrategy))
		if reasonOf(err) == ReasonMissingRights {
			m.mu.Lock()
			h.forbidden = true
			m.mu.Unlock()
			m.queue.Add(key)
		}
		time.AfterFunc(m.env.opts.RightsRecheckInterval, func() {
			m.mu.Lock()
			h.checking = false
			m.mu.Unlock()
		})
	}()
}

// buildEventReason is the reason of the Warning event of a controller that cannot
// be created: MissingRights for missing rights, upstream's CreateError otherwise.
func buildEventReason(err error) string {
	if reasonOf(err) == ReasonMissingRights {
		return ReasonMissingRights
	}
	return ReasonCreateError
}

// mayWatch asks whether the engine may list and watch gvr in every namespace.
func (m *Manager) mayWatch(ctx context.Context, gvr schema.GroupVersionResource) bool {
	for _, verb := range []string{"list", "watch"} {
		review, err := m.kube.AuthorizationV1().SelfSubjectAccessReviews().Create(ctx, &authorizationv1.SelfSubjectAccessReview{
			Spec: authorizationv1.SelfSubjectAccessReviewSpec{ResourceAttributes: &authorizationv1.ResourceAttributes{Verb: verb, Group: gvr.Group, Resource: gvr.Resource}},
		}, metav1.CreateOptions{})
		if err != nil || !review.Status.Allowed {
			return false
		}
	}
	return true
}
