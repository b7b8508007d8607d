package engine

import (
	"fmt"
	"net/url"
	"time"

	"go.opentelemetry.io/otel/trace"
	"k8s.io/apimachinery/pkg/labels"

	"github.com/metalambda/metalambda/internal/engine/hook"
)

// ApplyStrategy selects how children are written.
type ApplyStrategy string

// Apply strategies.
const (
	// ServerSideApply patches children with server-side apply under FieldManager.
	ServerSideApply ApplyStrategy = "server-side-apply"
	// ThreeWay merges observed, last-applied and desired like `kubectl apply` and
	// stores the last-applied annotation (Metacontroller's "dynamic-apply").
	ThreeWay ApplyStrategy = "three-way"
)

// ParseApplyStrategy accepts the strategy names, and upstream's "dynamic-apply" as an
// alias of ThreeWay.
func ParseApplyStrategy(s string) (ApplyStrategy, error) {
	switch s {
	case string(ServerSideApply):
		return ServerSideApply, nil
	case string(ThreeWay), "dynamic-apply":
		return ThreeWay, nil
	}
	return "", fmt.Errorf("unknown apply strategy %q (want %s or %s)", s, ServerSideApply, ThreeWay)
}

// Options configure the engine; see cmd/engine for the flags that set them.
type Options struct {
	// Workers is the number of reconcile goroutines per hosted controller.
	Workers int
	// ApplyStrategy writes children; FieldManager names the engine in managedFields.
	ApplyStrategy ApplyStrategy
	FieldManager  string
	// DiscoveryInterval is how often the resource map is refreshed.
	DiscoveryInterval time.Duration
	// CacheFlushInterval is the informers' resync period: the cache is replayed and every
	// parent reconciled, without a relist.
	CacheFlushInterval time.Duration
	// TargetSelector limits which CompositeController and DecoratorController objects
	// this engine serves.
	TargetSelector labels.Selector
	// ResolveService maps a hook's service reference to a base URL; the local platform
	// uses it to reach services from outside the cluster. Nil means cluster DNS.
	ResolveService hook.ServiceResolver
	// HookHTTP sends hook calls that need no TLS settings of their own; nil means a
	// shared client. The local platform uses it to present its gateway's hook token.
	HookHTTP hook.Doer
	// Standby, under leader election, tells whether this engine is a standby replica
	// and which replica leads ("" while none is known), so that its API can name the
	// leader; nil without leader election.
	Standby func() (leader string, standby bool)
	// EventsQPS and EventsBurst limit the events recorded on each object: a burst of
	// EventsBurst, then EventsQPS per second (client-go's event spam filter).
	EventsQPS   float64
	EventsBurst int
	// HookCallHistory is how many recent hook calls the engine keeps for its API
	// (see api.go); 0 records none.
	HookCallHistory int
	// CodeChangeSyncRate is how many parents per second are queued for a sync when
	// the code of a gateway Function that serves their controller changes.
	CodeChangeSyncRate float64
	// TracerProvider traces every sync and hook call (see docs/tracing.md); nil
	// traces nothing and costs nothing.
	TracerProvider trace.TracerProvider
	// MaxNamespacedControllersPerNamespace is how many namespaced controllers run
	// in one namespace (the oldest); 0 means no limit.
	MaxNamespacedControllersPerNamespace int
	// NamespaceSyncRate and NamespaceSyncBurst are each namespace's token bucket of
	// parent syncs, shared by all its namespaced controllers, so that one tenant's
	// parents do not take the engine's API requests from the others; a rate of 0
	// means no limit.
	NamespaceSyncRate  float64
	NamespaceSyncBurst int
	// TenantGateways are base URLs of the gateway (scheme, host, port and any path
	// prefix) under which a namespaced controller may call its namespace's Functions,
	// at <base>/hooks/<namespace>/<function>.
	TenantGateways []string
	// RightsRecheckInterval is how often a namespaced controller whose
	// ServiceAccount lacks a right is checked again.
	RightsRecheckInterval time.Duration
	// customizeTTL is how long a customize answer serves a parent whose generation
	// stays the same; upstream's 20 minutes unless a test shortens it.
	customizeTTL time.Duration
}

// Defaults are the option values the engine uses unless told otherwise.
func Defaults() Options {
	return Options{
		Workers:            16,
		ApplyStrategy:      ServerSideApply,
		FieldManager:       "metalambda",
		DiscoveryInterval:  30 * time.Second,
		CacheFlushInterval: 30 * time.Minute,
		TargetSelector:     labels.Everything(),
		EventsQPS:          1. / 300.,
		EventsBurst:        25,
		HookCallHistory:    DefaultHookCallHistory,
		CodeChangeSyncRate: 50,
		customizeTTL:       customizeCacheTTL,

		MaxNamespacedControllersPerNamespace: 10,
		NamespaceSyncRate:                    20,
		NamespaceSyncBurst:                   100,
		RightsRecheckInterval:                30 * time.Second,
	}
}

// Validate reports the first invalid option.
func (o *Options) Validate() error {
	switch {
	case o.Workers < 1:
		return fmt.Errorf("workers must be at least 1, got %d", o.Workers)
	case o.ApplyStrategy != ServerSideApply && o.ApplyStrategy != ThreeWay:
		return fmt.Errorf("unknown apply strategy %q", o.ApplyStrategy)
	case o.FieldManager == "":
		return fmt.Errorf("field manager must not be empty")
	case o.DiscoveryInterval <= 0:
		return fmt.Errorf("discovery interval must be positive, got %s", o.DiscoveryInterval)
	case o.CacheFlushInterval < 0:
		return fmt.Errorf("cache flush interval must not be negative, got %s", o.CacheFlushInterval)
	case o.TargetSelector == nil:
		return fmt.Errorf("target selector must not be nil (use labels.Everything())")
	case !(o.EventsQPS > 0):
		return fmt.Errorf("events QPS must be positive, got %g", o.EventsQPS)
	case o.EventsBurst < 1:
		return fmt.Errorf("events burst must be at least 1, got %d", o.EventsBurst)
	case !(o.CodeChangeSyncRate > 0):
		return fmt.Errorf("code change sync rate must be positive, got %g parents/s", o.CodeChangeSyncRate)
	case o.HookCallHistory < 0:
		return fmt.Errorf("hook call history must not be negative, got %d", o.HookCallHistory)
	case o.MaxNamespacedControllersPerNamespace < 0:
		return fmt.Errorf("max namespaced controllers per namespace must not be negative, got %d", o.MaxNamespacedControllersPerNamespace)
	case o.NamespaceSyncRate < 0 || (o.NamespaceSyncRate > 0 && o.NamespaceSyncBurst < 1):
		return fmt.Errorf("namespace sync rate must not be negative, and its burst at least 1 with it, got %g parents/s and %d", o.NamespaceSyncRate, o.NamespaceSyncBurst)
	case o.RightsRecheckInterval <= 0:
		return fmt.Errorf("rights recheck interval must be positive, got %s", o.RightsRecheckInterval)
	}
	for _, g := range o.TenantGateways {
		if u, err := url.Parse(g); err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" || u.RawQuery != "" {
			return fmt.Errorf("tenant gateway %q: want http(s)://host[:port][/prefix]", g)
		}
	}
	return nil
}
