package engine

import (
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/tools/cache"
)

// parentHandler queues the parent of every change the controller must see: not the
// engine's own writes while others are still to show, nor, under
// ignoreStatusChanges, a change of the status alone.
func (c *controller) parentHandler(i int) cache.ResourceEventHandler {
	p := c.parents[i]
	enqueue := func(obj any) {
		if u := asObject(obj); u != nil {
			c.queue.Add(parentKey{parent: i, namespace: u.GetNamespace(), name: u.GetName()})
		}
	}
	return cache.ResourceEventHandlerFuncs{
		AddFunc: enqueue,
		UpdateFunc: func(oldObj, newObj any) {
			o, n := asObject(oldObj), asObject(newObj)
			if o == nil || n == nil || o.GetResourceVersion() == n.GetResourceVersion() {
				enqueue(newObj) // a cache replay: a resync
				return
			}
			// Every change is shown to the own-write tracking first, even one that
			// ignoreStatusChanges drops: a sync waits until the caches show the last
			// sync's writes.
			own := c.env.own.tracking(n.GetUID())
			if !c.env.own.observed(n.GetUID(), p.res.GroupVersionResource, n, false) {
				return // the engine's own write, with others still to show
			}
			if !own && p.ignoreStatusChanges && onlyStatusChanged(o, n) {
				return
			}
			enqueue(newObj)
		},
		DeleteFunc: func(obj any) {
			u := asObject(obj)
			if u == nil {
				return
			}
			key := parentKey{parent: i, namespace: u.GetNamespace(), name: u.GetName()}
			c.states.forget(key)
			if c.resync != nil {
				c.resync.forget(key)
			}
			c.env.own.forget(u.GetUID())
			if c.related != nil {
				c.related.forget(key)
			}
		},
	}
}

// onlyStatusChanged is true for an update that ignoreStatusChanges drops, as upstream
// decides it: generation, labels and annotations unchanged, and the parent not being
// deleted (every update of a parent being deleted goes through, so that a finalize
// hook sees its own status). A cache replay (same resourceVersion) is not a status
// change: it is a resync and goes through.
func onlyStatusChanged(oldObj, newObj *unstructured.Unstructured) bool {
	if oldObj == nil || newObj == nil || oldObj.GetResourceVersion() == newObj.GetResourceVersion() {
		return false
	}
	return oldObj.GetGeneration() == newObj.GetGeneration() &&
		equalStrings(oldObj.GetLabels(), newObj.GetLabels()) &&
		equalStrings(oldObj.GetAnnotations(), newObj.GetAnnotations()) &&
		newObj.GetDeletionTimestamp() == nil
}

// childHandler queues the parent a child event concerns (its old and new
// controller, or the parents that might adopt an orphan).
func (c *controller) childHandler(ct *childType) cache.ResourceEventHandler {
	gvr := ct.res.GroupVersionResource
	return cache.ResourceEventHandlerFuncs{
		AddFunc: func(obj any) {
			if n := asObject(obj); c.newsOfChild(gvr, n, false) {
				c.enqueueOwner(n)
			}
		},
		UpdateFunc: func(oldObj, newObj any) {
			o, n := asObject(oldObj), asObject(newObj)
			if o == nil || n == nil || o.GetResourceVersion() == n.GetResourceVersion() {
				return // a cache replay; children never cause resyncs
			}
			oldRef, newRef := metav1.GetControllerOfNoCopy(o), metav1.GetControllerOfNoCopy(n)
			if oldRef != nil && (newRef == nil || oldRef.UID != newRef.UID) {
				c.enqueueOwner(o)
			}
			if c.newsOfChild(gvr, n, false) {
				c.enqueueOwner(n)
			}
		},
		DeleteFunc: func(obj any) {
			u := asObject(obj)
			c.newsOfChild(gvr, u, true)
			c.enqueueOwner(u)
		},
	}
}

// newsOfChild reports whether an event about child needs a sync of its controller:
// not when it shows one of the engine's own writes (see ownWrites).
func (c *controller) newsOfChild(gvr schema.GroupVersionResource, child *unstructured.Unstructured, deleted bool) bool {
	if child == nil {
		return true
	}
	ref := metav1.GetControllerOfNoCopy(child)
	if ref == nil {
		return true
	}
	return c.env.own.observed(ref.UID, gvr, child, deleted)
}

// enqueueOwner queues the parent that controls child, or, for an orphan, every parent
// that might adopt it.
func (c *controller) enqueueOwner(child *unstructured.Unstructured) {
	if child == nil {
		return
	}
	ref := metav1.GetControllerOfNoCopy(child)
	if ref == nil {
		c.enqueueAdopters(child)
		return
	}
	for i, p := range c.parents {
		if ref.Kind != p.res.Kind || groupOf(ref.APIVersion) != p.res.Group {
			continue
		}
		ns := child.GetNamespace()
		if !p.res.Namespaced {
			ns = ""
		}
		c.queue.Add(parentKey{parent: i, namespace: ns, name: ref.Name})
	}
}

// enqueueAdopters queues the composite parents whose selector matches an orphan.
func (c *controller) enqueueAdopters(child *unstructured.Unstructured) {
	comp, ok := c.flavor.(*composite)
	if !ok {
		return
	}
	p := c.parents[0]
	ns := child.GetNamespace()
	if !p.res.Namespaced {
		ns = ""
	}
	for _, parent := range p.sub.List(ns) {
		if sel, err := comp.selector(parent); err == nil && sel.Matches(labelsOf(child)) {
			c.queue.Add(parentKey{namespace: parent.GetNamespace(), name: parent.GetName()})
		}
	}
}

func asObject(obj any) *unstructured.Unstructured {
	if tomb, ok := obj.(cache.DeletedFinalStateUnknown); ok {
		obj = tomb.Obj
	}
	u, _ := obj.(*unstructured.Unstructured)
	return u
}
