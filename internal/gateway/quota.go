package gateway

import (
	"errors"
	"fmt"
	"net/http"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/client-go/tools/cache"

	"github.com/metalambda/metalambda/internal/httpapi"
)

// ErrTooManyFunctions is the error of a Function past its namespace's limit
// (--max-functions-per-namespace).
var ErrTooManyFunctions = errors.New("too many functions in the namespace")

// functionLimitError names the namespace, the limit and the flag that sets it.
func functionLimitError(namespace string, limit int) error {
	return fmt.Errorf("%w: namespace %q has %d functions, the most this gateway serves per namespace (--max-functions-per-namespace); delete one, or raise the limit", ErrTooManyFunctions, namespace, limit)
}

// pastLimit reports whether u is past its namespace's limit of functions: the
// oldest functions of a namespace (by creation time, then name) are served, the
// same ones on every replica, and the others are refused.
func (s *store) pastLimit(u *unstructured.Unstructured) bool {
	if s.maxPerNamespace <= 0 {
		return false
	}
	objs, _ := s.informer.GetIndexer().ByIndex(cache.NamespaceIndex, u.GetNamespace())
	if len(objs) <= s.maxPerNamespace {
		return false
	}
	older := 0
	created := u.GetCreationTimestamp()
	for _, o := range objs {
		other := o.(*unstructured.Unstructured)
		t := other.GetCreationTimestamp()
		if t.Before(&created) || t.Equal(&created) && other.GetName() < u.GetName() {
			older++
		}
	}
	return older >= s.maxPerNamespace
}

// checkRoom refuses a new function name in namespace when the namespace already
// has as many functions as the limit: a 403 naming the namespace, the limit and
// the flag.
func (s *store) checkRoom(namespace, name string) error {
	if s.maxPerNamespace <= 0 {
		return nil
	}
	if _, exists, _ := s.informer.GetIndexer().GetByKey(namespace + "/" + name); exists {
		return nil
	}
	if objs, _ := s.informer.GetIndexer().ByIndex(cache.NamespaceIndex, namespace); len(objs) < s.maxPerNamespace {
		return nil
	}
	return httpapi.NewError(http.StatusForbidden, "too_many_functions", functionLimitError(namespace, s.maxPerNamespace).Error())
}

// makeRoom queues the functions of a deleted function's namespace that are not
// loaded: one past the limit may have room now.
func (s *store) makeRoom(deleted string) {
	if s.maxPerNamespace <= 0 {
		return
	}
	namespace, _, _ := cache.SplitMetaNamespaceKey(deleted)
	objs, _ := s.informer.GetIndexer().ByIndex(cache.NamespaceIndex, namespace)
	s.mu.RLock()
	defer s.mu.RUnlock()
	for _, o := range objs {
		u := o.(*unstructured.Unstructured)
		if key := namespace + "/" + u.GetName(); s.entries[key] == nil {
			s.queue.Add(key)
		}
	}
}
