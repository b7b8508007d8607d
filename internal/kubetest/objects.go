package kubetest

import (
	"context"
	"fmt"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/dynamic"
)

// ObjectTimeout is how long WaitFor waits for an object to exist and pass its
// check.
const ObjectTimeout = 30 * time.Second

// GoneTimeout is how long WaitGone waits for an object to be deleted: finalizers
// and the garbage collector may come first.
const GoneTimeout = 60 * time.Second

// Resource is the dynamic client of gvr in namespace ns, or of the cluster-scoped
// gvr when ns is "". The object helpers below take (gvr, ns, name) in this sense.
func (e *Env) Resource(gvr schema.GroupVersionResource, ns string) dynamic.ResourceInterface {
	return ResourceIn(e.Dynamic, gvr, ns)
}

// ResourceIn is Env.Resource for any cluster's dynamic client, such as a local
// platform's.
func ResourceIn(client dynamic.Interface, gvr schema.GroupVersionResource, ns string) dynamic.ResourceInterface {
	if ns == "" {
		return client.Resource(gvr)
	}
	return client.Resource(gvr).Namespace(ns)
}

// Get reads an object.
func (e *Env) Get(ctx context.Context, gvr schema.GroupVersionResource, ns, name string) (*unstructured.Unstructured, error) {
	return e.Resource(gvr, ns).Get(ctx, name, metav1.GetOptions{})
}

// MustGet reads an object and fails the test when it cannot.
func (e *Env) MustGet(t testing.TB, gvr schema.GroupVersionResource, ns, name string) *unstructured.Unstructured {
	t.Helper()
	obj, err := e.Get(Context(t), gvr, ns, name)
	if err != nil {
		t.Fatal(err)
	}
	return obj
}

// Create creates obj and fails the test when it cannot. A cluster-scoped object
// (ns "") is deleted when the test ends; a namespaced one goes with the test's
// namespace (Namespace).
func (e *Env) Create(t testing.TB, gvr schema.GroupVersionResource, ns string, obj *unstructured.Unstructured) *unstructured.Unstructured {
	t.Helper()
	client := e.Resource(gvr, ns)
	created, err := client.Create(Context(t), obj, metav1.CreateOptions{})
	if err != nil {
		t.Fatalf("create %s %s: %v", gvr.Resource, obj.GetName(), err)
	}
	if ns == "" {
		name := obj.GetName()
		t.Cleanup(func() {
			err := client.Delete(context.Background(), name, metav1.DeleteOptions{})
			if err != nil && !apierrors.IsNotFound(err) {
				t.Errorf("delete %s %s: %v", gvr.Resource, name, err)
			}
		})
	}
	return created
}

// WaitFor waits up to ObjectTimeout until the object exists and check (nil: any
// object) passes on it, and returns it; the test fails naming what it waited for.
func (e *Env) WaitFor(t testing.TB, what string, gvr schema.GroupVersionResource, ns, name string, check func(*unstructured.Unstructured) error) *unstructured.Unstructured {
	t.Helper()
	return WaitObject(t, ObjectTimeout, what, e.Resource(gvr, ns), name, check)
}

// WaitGone waits up to GoneTimeout until the object no longer exists.
func (e *Env) WaitGone(t testing.TB, what string, gvr schema.GroupVersionResource, ns, name string) {
	t.Helper()
	WaitObjectGone(t, GoneTimeout, what, e.Resource(gvr, ns), name)
}

// WaitObject waits up to timeout until client's object name exists and check
// (nil: any object) passes on it, and returns it: Env.WaitFor for any client
// (ResourceIn) and timeout.
func WaitObject(t testing.TB, timeout time.Duration, what string, client dynamic.ResourceInterface, name string, check func(*unstructured.Unstructured) error) *unstructured.Unstructured {
	t.Helper()
	var obj *unstructured.Unstructured
	Eventually(t, timeout, what, func(ctx context.Context) (bool, error) {
		var err error
		if obj, err = client.Get(ctx, name, metav1.GetOptions{}); err != nil {
			return false, err
		}
		if check == nil {
			return true, nil
		}
		err = check(obj)
		return err == nil, err
	})
	return obj
}

// WaitObjectGone waits up to timeout until client's object name no longer exists.
func WaitObjectGone(t testing.TB, timeout time.Duration, what string, client dynamic.ResourceInterface, name string) {
	t.Helper()
	Eventually(t, timeout, what, func(ctx context.Context) (bool, error) {
		_, err := client.Get(ctx, name, metav1.GetOptions{})
		if err == nil {
			return false, fmt.Errorf("%s still exists", name)
		}
		return apierrors.IsNotFound(err), err
	})
}

// Events lists the events recorded in namespace ns about the object named name,
// of kind kind ("": of any kind).
func (e *Env) Events(t testing.TB, ns, kind, name string) []corev1.Event {
	t.Helper()
	selector := "involvedObject.name=" + name
	if kind != "" {
		selector = "involvedObject.kind=" + kind + "," + selector
	}
	list, err := e.Kube.CoreV1().Events(ns).List(Context(t), metav1.ListOptions{FieldSelector: selector})
	if err != nil {
		t.Fatal(err)
	}
	return list.Items
}
