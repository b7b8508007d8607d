// Package discovery keeps a map of the API server's resources, refreshed periodically
// and on demand, so that controllers can name resources by apiVersion and plural name
// and still work for CRDs installed after the engine started.
package discovery

import (
	"context"
	"fmt"
	"strings"
	"sync"
	"time"

	"k8s.io/apimachinery/pkg/util/wait"

	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/discovery"
	"k8s.io/klog/v2"
)

// Resource is one API resource as discovery reports it.
type Resource struct {
	schema.GroupVersionResource
	Kind       string
	Namespaced bool
	// HasStatus is true when the resource has a status subresource.
	HasStatus bool
	Verbs     []string
}

// APIVersion is "group/version", or "version" for the core group.
func (r *Resource) APIVersion() string { return r.GroupVersion().String() }

// GroupVersionKind of the resource's objects.
func (r *Resource) GroupVersionKind() schema.GroupVersionKind {
	return r.GroupVersion().WithKind(r.Kind)
}

// Map resolves resources from discovery. It is safe for concurrent use.
type Map struct {
	client discovery.DiscoveryInterface

	mu        sync.RWMutex
	resources map[string]*Resource // key "apiVersion/resource"
	byKind    map[string]*Resource // key "apiVersion/Kind"
	refreshed time.Time
	refreshMu sync.Mutex // serializes refreshes
}

// NewMap returns an empty map; call Refresh or Run before use.
func NewMap(client discovery.DiscoveryInterface) *Map {
	return &Map{client: client, resources: map[string]*Resource{}, byKind: map[string]*Resource{}}
}

// Run refreshes the map now and every interval until ctx ends.
func (m *Map) Run(ctx context.Context, interval time.Duration) {
	wait.UntilWithContext(ctx, func(ctx context.Context) {
		if err := m.Refresh(); err != nil {
			klog.FromContext(ctx).Error(err, "Discovery refresh failed; keeping the previous resource map")
		}
	}, interval)
}

// Refresh reloads every group. A partial failure keeps what was discovered, and
// resources of the failed groups keep their previous entries.
func (m *Map) Refresh() error {
	m.refreshMu.Lock()
	defer m.refreshMu.Unlock()
	_, lists, err := m.client.ServerGroupsAndResources()
	if lists == nil && err != nil {
		return fmt.Errorf("discovery: %w", err)
	}
	resources := map[string]*Resource{}
	byKind := map[string]*Resource{}
	statusOf := map[string]bool{}
	for _, list := range lists {
		for _, r := range list.APIResources {
			name, sub, isSub := strings.Cut(r.Name, "/")
			if isSub {
				if sub == "status" {
					statusOf[list.GroupVersion+"/"+name] = true
				}
				continue
			}
			gv, perr := schema.ParseGroupVersion(list.GroupVersion)
			if perr != nil {
				continue
			}
			res := &Resource{GroupVersionResource: gv.WithResource(name), Kind: r.Kind, Namespaced: r.Namespaced, Verbs: r.Verbs}
			resources[list.GroupVersion+"/"+name] = res
			byKind[list.GroupVersion+"/"+r.Kind] = res
		}
	}
	for key, res := range resources {
		res.HasStatus = statusOf[key]
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	if err != nil {
		// Keep entries of groups that failed this time.
		for k, v := range m.resources {
			if _, ok := resources[k]; !ok {
				resources[k] = v
				byKind[v.APIVersion()+"/"+v.Kind] = v
			}
		}
	}
	m.resources, m.byKind, m.refreshed = resources, byKind, time.Now()
	return nil
}

// minOnDemandRefresh limits how often a lookup miss may trigger a refresh.
const minOnDemandRefresh = 2 * time.Second

// Get resolves apiVersion and plural resource name. On a miss it refreshes once
// (at most every two seconds), so a CRD created a moment ago is found.
func (m *Map) Get(apiVersion, resource string) (*Resource, error) {
	return m.lookup(func() *Resource { return m.get(false, apiVersion+"/"+resource) },
		fmt.Sprintf("resource %q in apiVersion %q", resource, apiVersion))
}

// GetKind resolves apiVersion and Kind.
func (m *Map) GetKind(apiVersion, kind string) (*Resource, error) {
	return m.lookup(func() *Resource { return m.get(true, apiVersion+"/"+kind) },
		fmt.Sprintf("kind %q in apiVersion %q", kind, apiVersion))
}

func (m *Map) lookup(find func() *Resource, what string) (*Resource, error) {
	if r := find(); r != nil {
		return r, nil
	}
	m.mu.RLock()
	stale := time.Since(m.refreshed) > minOnDemandRefresh
	m.mu.RUnlock()
	if stale {
		if err := m.Refresh(); err != nil {
			return nil, err
		}
		if r := find(); r != nil {
			return r, nil
		}
	}
	return nil, &NotFoundError{What: what}
}

func (m *Map) get(byKind bool, key string) *Resource {
	m.mu.RLock()
	defer m.mu.RUnlock()
	if byKind {
		return m.byKind[key]
	}
	return m.resources[key]
}

// NotFoundError says discovery does not know a resource.
type NotFoundError struct{ What string }

func (e *NotFoundError) Error() string {
	return "discovery: the API server does not serve " + e.What
}
