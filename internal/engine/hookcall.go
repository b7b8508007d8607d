package engine

import (
	"context"
	"time"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	"github.com/metalambda/metalambda/internal/engine/hook"
	"github.com/metalambda/metalambda/internal/hookapi"
	"github.com/metalambda/metalambda/internal/workloop"
)

// objectsFor builds a hook object map of one child type.
func (c *controller) objectsFor(version hookVersion, parentNamespaced bool, objs []*unstructured.Unstructured) hookapi.ObjectMap {
	m := make(hookapi.ObjectMap, len(objs))
	for _, o := range objs {
		m[hookapi.Key(version, parentNamespaced, o)] = o.Object
	}
	return m
}

// childObjects groups observed children by type for a hook request; every declared
// type appears, empty or not.
func (c *controller) childObjects(version hookVersion, parentNamespaced bool, children [][]*unstructured.Unstructured) hookapi.Objects {
	out := make(hookapi.Objects, len(c.children))
	for i, ct := range c.children {
		out[hookapi.TypeKey(ct.res.Kind, ct.rule.APIVersion)] = c.objectsFor(version, parentNamespaced, children[i])
	}
	return out
}

// decodeDesired turns the hook's children into objects, checking each against the
// declared child types.
func (c *controller) decodeDesired(parent *unstructured.Unstructured, raw []hookapi.Object) ([]*unstructured.Unstructured, error) {
	out := make([]*unstructured.Unstructured, 0, len(raw))
	seen := map[string]bool{}
	for i, obj := range raw {
		if obj == nil {
			return nil, invalidResponse("children[%d] is null", i)
		}
		u := &unstructured.Unstructured{Object: obj}
		ct := c.childTypeOf(u)
		switch {
		case u.GetAPIVersion() == "" || u.GetKind() == "":
			return nil, invalidResponse("children[%d] has no apiVersion or kind", i)
		case u.GetName() == "":
			return nil, invalidResponse("children[%d] (%s) has no metadata.name", i, u.GetKind())
		case ct == nil:
			return nil, invalidResponse("children[%d] is a %s %s, which is not a declared child resource", i, u.GetAPIVersion(), u.GetKind())
		}
		if ct.res.Namespaced && u.GetNamespace() == "" {
			if parent.GetNamespace() == "" {
				return nil, invalidResponse("children[%d] (%s %s) needs metadata.namespace: the parent is cluster-scoped", i, u.GetKind(), u.GetName())
			}
			u.SetNamespace(parent.GetNamespace())
		}
		if parent.GetNamespace() != "" && ct.res.Namespaced && u.GetNamespace() != parent.GetNamespace() {
			return nil, invalidResponse("children[%d] (%s %s) is in namespace %q; children of a namespaced parent must be in its namespace %q", i, u.GetKind(), u.GetName(), u.GetNamespace(), parent.GetNamespace())
		}
		if !ct.res.Namespaced {
			u.SetNamespace("")
		}
		id := ct.res.Resource + "/" + u.GetNamespace() + "/" + u.GetName()
		if seen[id] {
			return nil, invalidResponse("children[%d] (%s %s) is listed twice", i, u.GetKind(), u.GetName())
		}
		seen[id] = true
		out = append(out, u)
	}
	return out, nil
}

func (c *controller) childTypeOf(obj *unstructured.Unstructured) *childType {
	for _, ct := range c.children {
		if ct.rule.APIVersion == obj.GetAPIVersion() && ct.res.Kind == obj.GetKind() {
			return ct
		}
	}
	return nil
}

// call sends the sync or finalize hook request and validates the answer.
func (c *controller) call(ctx context.Context, in *hookInput) (*outcome, error) {
	req := c.flavor.request(c.object, in, c.childObjects(in.endpoint.Version, in.parentType.res.Namespaced, in.children))
	resp := c.flavor.answer()
	name := hookName(in.finalizing, c.hooks.finalize != nil)
	if err := c.caller.Call(ctx, *in.endpoint, c.callInfo(name, in.parent), req, resp); err != nil {
		return nil, throttled(err)
	}
	out, raw := resp.outcome()
	in.events.keep(name, out.events)
	desired, err := c.decodeDesired(in.parent, raw)
	if err != nil {
		return nil, err
	}
	if err := c.flavor.check(in.parent, desired); err != nil {
		return nil, err
	}
	out.desired = desired
	return out, nil
}

// callInfo names a hook call about parent.
func (c *controller) callInfo(hookName string, parent *unstructured.Unstructured) hook.CallInfo {
	return hook.CallInfo{
		Controller: c.name, ControllerType: c.kind, Hook: hookName,
		Parent:           hook.ObjectKey{Group: groupOf(parent.GetAPIVersion()), Kind: parent.GetKind(), Namespace: parent.GetNamespace(), Name: parent.GetName()},
		ParentAPIVersion: parent.GetAPIVersion(), ParentUID: string(parent.GetUID()),
	}
}

func hookName(finalizing, hasFinalize bool) string {
	if finalizing && hasFinalize {
		return "finalize"
	}
	return "sync"
}

func seconds(s float64) time.Duration {
	if s <= 0 {
		return 0
	}
	return time.Duration(s * float64(time.Second))
}

// throttled turns a 429 with Retry-After into a hold: the work loop calls the hook
// for that parent no sooner, whatever event comes.
func throttled(err error) error {
	if t, ok := asThrottled(err); ok {
		return workloop.Hold(t, err)
	}
	return err
}
