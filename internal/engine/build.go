package engine

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"net"
	"net/url"
	"slices"
	"strings"
	"time"

	"github.com/metalambda/metalambda/internal/jsonvalue"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/selection"

	"github.com/metalambda/metalambda/internal/apis/metacontroller/v1alpha1"
	"github.com/metalambda/metalambda/internal/engine/discovery"
	"github.com/metalambda/metalambda/internal/engine/hook"
)

// Finalizer name prefixes, as upstream Metacontroller names them, so parents carry the
// same finalizers whichever engine runs.
const (
	compositeFinalizerPrefix = "metacontroller.io/compositecontroller-"
	decoratorFinalizerPrefix = "metacontroller.io/decoratorcontroller-"
)

// finalizerName is upstream's finalizer name when it fits the 63-character limit of a
// finalizer's name part, and otherwise a truncated name with a hash, so that long
// controller names still work (upstream fails on them).
func finalizerName(prefix, controller string) string {
	domain, name, _ := strings.Cut(prefix+controller, "/")
	const max = 63
	if len(name) <= max {
		return domain + "/" + name
	}
	sum := sha256.Sum256([]byte(name))
	return domain + "/" + strings.TrimRight(name[:max-9], "-.") + "-" + hex.EncodeToString(sum[:4])
}

// buildError is a reason (for the Ready condition) with a message.
type buildError struct {
	reason string
	err    error
}

func (e *buildError) Error() string { return e.err.Error() }
func (e *buildError) Unwrap() error { return e.err }

func buildErr(reason string, format string, args ...any) error {
	return &buildError{reason: reason, err: fmt.Errorf(format, args...)}
}

func reasonOf(err error) string {
	var b *buildError
	if errors.As(err, &b) {
		return b.reason
	}
	return "Error"
}

// build turns a controller object into a hosted controller (not yet started), and
// lists the fields it sets that this engine does not support.
func (m *Manager) build(ctx context.Context, obj *unstructured.Unstructured) (*controller, []string, error) {
	if namespacedKind(obj.GetKind()) {
		if err := m.overQuota(obj); err != nil {
			return nil, nil, err
		}
		return m.buildNamespaced(ctx, obj)
	}
	if obj.GetKind() == DecoratorKind {
		var dc v1alpha1.DecoratorController
		if err := jsonvalue.Convert(obj.Object, &dc); err != nil {
			return nil, nil, buildErr("InvalidSpec", "decode DecoratorController: %v", err)
		}
		return m.buildDecorator(ctx, m.env, obj, DecoratorKind, decoratorFinalizerPrefix, &dc.Spec)
	}
	var cc v1alpha1.CompositeController
	if err := jsonvalue.Convert(obj.Object, &cc); err != nil {
		return nil, nil, buildErr("InvalidSpec", "decode CompositeController: %v", err)
	}
	return m.buildComposite(ctx, m.env, obj, CompositeKind, compositeFinalizerPrefix, &cc.Spec)
}

// buildComposite builds a composite controller of kind whose reads and writes go
// through env: the engine's own, or a namespaced controller's.
func (m *Manager) buildComposite(ctx context.Context, env *environment, obj *unstructured.Unstructured, kind, finalizerPrefix string, spec *v1alpha1.CompositeControllerSpec) (c *controller, unsupported []string, err error) {
	unsupported = compositeUnsupported(spec, true)
	if spec.Hooks == nil || spec.Hooks.Sync == nil {
		return nil, unsupported, buildErr("InvalidSpec", "spec.hooks.sync is required")
	}
	parentRes, err := m.resolve(spec.ParentResource.ResourceRule, "spec.parentResource")
	if err != nil {
		return nil, unsupported, err
	}
	unsupported = compositeUnsupported(spec, parentRes.Namespaced)
	if !parentRes.HasStatus {
		return nil, unsupported, buildErr("ParentStatusSubresourceMissing",
			"parent resource %s has no status subresource; add `subresources: {status: {}}` to its CRD version %s (without it, status writes would bump metadata.generation and loop)",
			parentRes.Resource, parentRes.Version)
	}
	selects := func(*unstructured.Unstructured) bool { return true }
	if ls := spec.ParentResource.LabelSelector; ls != nil {
		sel, err := metav1.LabelSelectorAsSelector(ls)
		if err != nil {
			return nil, unsupported, buildErr("InvalidSpec", "spec.parentResource.labelSelector: %v", err)
		}
		selects = func(o *unstructured.Unstructured) bool { return sel.Matches(labels.Set(o.GetLabels())) }
	}
	c = m.newController(env, obj, kind, finalizerPrefix, spec.ResyncPeriodSeconds)
	c.flavor = &composite{env: env, generateSelector: spec.GenerateSelector != nil && *spec.GenerateSelector}
	if c.hooks, err = m.resolveHooks(ctx, env, spec.Hooks.Sync, spec.Hooks.Finalize, spec.Hooks.Customize, spec.EndpointConfigs); err != nil {
		return nil, unsupported, err
	}
	m.pruneHookSeries(c)
	for i, rule := range spec.ChildResources {
		method := v1alpha1.ChildUpdateOnDelete
		if rule.UpdateStrategy != nil && rule.UpdateStrategy.Method != "" {
			method = rule.UpdateStrategy.Method
		}
		if err := m.addChild(c, rule.ResourceRule, method, fmt.Sprintf("spec.childResources[%d]", i)); err != nil {
			c.shutdown()
			return nil, unsupported, err
		}
		if rule.UpdateStrategy != nil {
			c.children[i].checks = rule.UpdateStrategy.StatusChecks
		}
	}
	if slices.ContainsFunc(c.children, (*childType).rolls) && parentRes.Namespaced {
		revs, err := m.resolve(v1alpha1.ResourceRule{APIVersion: ControllerRevisions.GroupVersion().String(), Resource: ControllerRevisions.Resource}, "rolling updates (ControllerRevisions)")
		if err != nil {
			c.shutdown()
			return nil, unsupported, err
		}
		c.rollout = &rollout{
			fieldPaths: fieldPaths(spec.ParentResource.RevisionHistory),
			revisions:  &childType{res: revs, sub: env.informers.Subscribe(revs.GroupVersionResource)},
		}
		c.flavor.(*composite).statusInRevision = slices.ContainsFunc(c.rollout.fieldPaths, func(p []string) bool { return len(p) > 0 && p[0] == "status" })
	}
	c.parents = []*parentType{{
		res: parentRes, sub: env.informers.Subscribe(parentRes.GroupVersionResource), selects: selects,
		ignoreStatusChanges: spec.ParentResource.IgnoreStatusChanges != nil && *spec.ParentResource.IgnoreStatusChanges,
	}}
	return c, unsupported, nil
}

// buildDecorator builds a decorator controller of kind, like buildComposite.
func (m *Manager) buildDecorator(ctx context.Context, env *environment, obj *unstructured.Unstructured, kind, finalizerPrefix string, spec *v1alpha1.DecoratorControllerSpec) (c *controller, unsupported []string, err error) {
	unsupported = decoratorUnsupported(spec)
	if spec.Hooks == nil || spec.Hooks.Sync == nil {
		return nil, unsupported, buildErr("InvalidSpec", "spec.hooks.sync is required")
	}
	if len(spec.Resources) == 0 {
		return nil, unsupported, buildErr("InvalidSpec", "spec.resources must name at least one resource")
	}
	c = m.newController(env, obj, kind, finalizerPrefix, spec.ResyncPeriodSeconds)
	c.flavor = &decorator{env: env, name: c.name}
	if c.hooks, err = m.resolveHooks(ctx, env, spec.Hooks.Sync, spec.Hooks.Finalize, spec.Hooks.Customize, spec.EndpointConfigs); err != nil {
		return nil, unsupported, err
	}
	m.pruneHookSeries(c)
	for i, rule := range spec.Resources {
		res, err := m.resolve(rule.ResourceRule, fmt.Sprintf("spec.resources[%d]", i))
		if err != nil {
			c.shutdown()
			return nil, unsupported, err
		}
		selects, err := decoratorSelector(rule)
		if err != nil {
			c.shutdown()
			return nil, unsupported, buildErr("InvalidSpec", "spec.resources[%d]: %v", i, err)
		}
		c.parents = append(c.parents, &parentType{
			res: res, sub: env.informers.Subscribe(res.GroupVersionResource), selects: selects,
			ignoreStatusChanges: rule.IgnoreStatusChanges != nil && *rule.IgnoreStatusChanges,
		})
	}
	for i, rule := range spec.Attachments {
		method := v1alpha1.ChildUpdateOnDelete
		if rule.UpdateStrategy != nil && rule.UpdateStrategy.Method != "" {
			method = rule.UpdateStrategy.Method
		}
		if err := m.addChild(c, rule.ResourceRule, method, fmt.Sprintf("spec.attachments[%d]", i)); err != nil {
			c.shutdown()
			return nil, unsupported, err
		}
	}
	return c, unsupported, nil
}

// newController is a controller of obj, named by controllerName (its namespace
// and name for a namespaced controller), that reads and writes through env.
func (m *Manager) newController(env *environment, obj *unstructured.Unstructured, kind, finalizerPrefix string, resync *int32) *controller {
	name := controllerName(obj)
	c := &controller{
		kind: kind, name: name, object: obj.DeepCopy().Object,
		finalizer: finalizerName(finalizerPrefix, obj.GetName()), env: env, caller: env.hooks,
		states:       newParentStates(env.calls != nil),
		hookRecorder: m.events.withSource(HookEventSource(kind, name)),
	}
	if resync != nil && *resync > 0 {
		c.resync = newResyncer(time.Duration(*resync) * time.Second)
	}
	c.related = newRelatedTracker(c)
	return c
}

func (m *Manager) resolve(rule v1alpha1.ResourceRule, field string) (*discovery.Resource, error) {
	if rule.APIVersion == "" || rule.Resource == "" {
		return nil, buildErr("InvalidSpec", "%s needs apiVersion and resource", field)
	}
	res, err := m.env.discovery.Get(rule.APIVersion, rule.Resource)
	if err != nil {
		return nil, buildErr("ResourceNotFound", "%s: %v", field, err)
	}
	return res, nil
}

func (m *Manager) addChild(c *controller, rule v1alpha1.ResourceRule, method v1alpha1.ChildUpdateMethod, field string) error {
	switch method {
	case v1alpha1.ChildUpdateOnDelete, v1alpha1.ChildUpdateRecreate, v1alpha1.ChildUpdateInPlace,
		v1alpha1.ChildUpdateRollingRecreate, v1alpha1.ChildUpdateRollingInPlace:
	default:
		return buildErr("InvalidSpec", "%s.updateStrategy.method %q is not one of OnDelete, Recreate, InPlace, RollingRecreate, RollingInPlace", field, method)
	}
	res, err := m.resolve(rule, field)
	if err != nil {
		return err
	}
	ct := &childType{rule: rule, res: res, method: method}
	env := c.env
	if comp, ok := c.flavor.(*composite); ok && comp.generateSelector {
		// Every child, and every orphan the controller could adopt, carries the
		// controller-uid label: the API server leaves the rest out of the cache. A
		// child's name taken by another object shows when the child is created.
		ct.sub = env.informers.SubscribeSelected(res.GroupVersionResource, hasControllerUID)
	} else {
		ct.sub = env.informers.Subscribe(res.GroupVersionResource)
	}
	c.children = append(c.children, ct)
	return nil
}

// hasControllerUID selects the objects that carry ControllerUIDLabel.
var hasControllerUID = func() labels.Selector {
	req, err := labels.NewRequirement(ControllerUIDLabel, selection.Exists, nil)
	if err != nil {
		panic(err)
	}
	return labels.NewSelector().Add(*req)
}()

func (m *Manager) resolveHooks(ctx context.Context, env *environment, sync, finalize, customize *v1alpha1.Hook, endpoints []v1alpha1.EndpointConfig) (hooks, error) {
	var h hooks
	for _, x := range []struct {
		name string
		spec *v1alpha1.Hook
		dst  **hook.Endpoint
	}{{"sync", sync, &h.sync}, {"finalize", finalize, &h.finalize}, {"customize", customize, &h.customize}} {
		if x.spec == nil {
			continue
		}
		spec := x.spec
		if env.tenant != nil {
			var err error
			if spec, err = m.tenantHook(ctx, env, spec); err != nil {
				return h, buildErr("HookNotAllowed", "spec.hooks.%s: %v", x.name, err)
			}
		}
		ep, err := hook.ResolveEndpoint(spec, m.env.opts.ResolveService)
		if err != nil {
			return h, buildErr("InvalidHook", "spec.hooks.%s: %v", x.name, err)
		}
		security, err := hook.ReadSecurity(ctx, securitySettings(spec.Webhook, ep.URL, endpoints), credentials{env: env})
		switch {
		case errors.Is(err, hook.ErrInvalidHook):
			return h, buildErr("InvalidHook", "spec.hooks.%s: %v", x.name, err)
		case err != nil:
			return h, buildErr("HookCredentialsUnavailable", "spec.hooks.%s: %v", x.name, err)
		}
		security.Apply(&ep)
		if svc, ok := tenantOwnService(env, spec); ok {
			// The tenant may change its Service after this check (to an
			// ExternalName that sends the call to any host): every call checks it.
			ep.Precheck = func(ctx context.Context) error { return m.ownService(ctx, env, svc) }
		}
		*x.dst = &ep
	}
	return h, nil
}

// pruneHookSeries drops the hook series of URLs the controller no longer calls.
func (m *Manager) pruneHookSeries(c *controller) {
	live := map[string]string{}
	for name, ep := range map[string]*hook.Endpoint{hook.HookSync: c.hooks.sync, hook.HookFinalize: c.hooks.finalize, hook.HookCustomize: c.hooks.customize} {
		if ep != nil {
			live[name] = ep.URL
		}
	}
	m.env.hooks.Metrics.Prune(c.kind, c.name, live)
}

// securitySettings is the webhook itself when it sets any TLS or auth field;
// otherwise the first endpointConfigs entry whose host is the URL's, as a webhook
// (per-hook settings replace an entry whole, as in Metacontroller: no merging).
func securitySettings(w *v1alpha1.Webhook, rawURL string, endpoints []v1alpha1.EndpointConfig) *v1alpha1.Webhook {
	if w == nil || w.CABundle != nil || w.ClientTLS != nil || w.Authorization != nil || w.BasicAuth != nil {
		return w
	}
	u, err := url.Parse(rawURL)
	if err != nil {
		return w
	}
	for _, e := range endpoints {
		if sameHost(e.Host, u) {
			return &v1alpha1.Webhook{CABundle: e.CABundle, ClientTLS: e.ClientTLS, Authorization: e.Authorization, BasicAuth: e.BasicAuth}
		}
	}
	return w
}

// sameHost compares an endpointConfigs host ("name" or "name:port") with a URL's,
// ignoring case and treating a scheme's default port as the same as none.
func sameHost(host string, u *url.URL) bool {
	withDefault := func(h, scheme string) string {
		h = strings.ToLower(h)
		if _, _, err := net.SplitHostPort(h); err == nil {
			return h
		}
		if scheme == "https" {
			return net.JoinHostPort(h, "443")
		}
		return net.JoinHostPort(h, "80")
	}
	return host != "" && withDefault(host, u.Scheme) == withDefault(u.Host, u.Scheme)
}

// compositeUnsupported lists the fields a CompositeController sets that this engine
// accepts but does not act on (or acts on differently), for the Supported condition.
func compositeUnsupported(spec *v1alpha1.CompositeControllerSpec, parentNamespaced bool) []string {
	var out []string
	if !parentNamespaced {
		for i, ch := range spec.ChildResources {
			if ch.UpdateStrategy != nil && (ch.UpdateStrategy.Method == v1alpha1.ChildUpdateRollingRecreate || ch.UpdateStrategy.Method == v1alpha1.ChildUpdateRollingInPlace) {
				out = append(out, fmt.Sprintf("spec.childResources[%d].updateStrategy.method %s acts as its non-rolling form: the parent is cluster-scoped and ControllerRevisions are namespaced", i, ch.UpdateStrategy.Method))
			}
		}
	}
	if h := spec.Hooks; h != nil {
		if h.PreUpdateChild != nil || h.PostUpdateChild != nil {
			out = append(out, "spec.hooks.preUpdateChild and postUpdateChild are ignored (upstream never calls them either)")
		}
	}
	return out
}

func decoratorUnsupported(spec *v1alpha1.DecoratorControllerSpec) []string {
	var out []string
	for i, a := range spec.Attachments {
		if a.UpdateStrategy != nil && (a.UpdateStrategy.Method == v1alpha1.ChildUpdateRollingRecreate || a.UpdateStrategy.Method == v1alpha1.ChildUpdateRollingInPlace) {
			out = append(out, fmt.Sprintf("spec.attachments[%d].updateStrategy.method %s acts as its non-rolling form, as upstream's DecoratorController does", i, a.UpdateStrategy.Method))
		}
	}
	return out
}
