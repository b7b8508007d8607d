package engine

import (
	"errors"
	"time"

	"go.opentelemetry.io/otel/trace"
	"golang.org/x/time/rate"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/record"

	"github.com/metalambda/metalambda/internal/apis/metacontroller/v1alpha1"
	"github.com/metalambda/metalambda/internal/engine/api"
	"github.com/metalambda/metalambda/internal/engine/discovery"
	"github.com/metalambda/metalambda/internal/engine/hook"
	"github.com/metalambda/metalambda/internal/engine/informer"
)

// environment is what every hosted controller shares.
type environment struct {
	opts      Options
	dynamic   dynamic.Interface
	meta      metaWrites // creates and status writes whose answers only metadata is read of
	discovery *discovery.Map
	informers *informer.Factory
	hooks     *hook.Client
	recorder  record.EventRecorder
	metrics   *metrics
	calls     *api.History // nil when no calls are recorded
	own       *ownWrites
	tracer    trace.Tracer // nil when tracing is off
	// rollouts, when Functions are served, is told of the end of parent syncs
	// (nil-safe).
	rollouts *rollouts
	// tenant is who a namespaced controller acts as; nil for the engine itself.
	tenant *tenant
	// reviews, for namespaced controllers, asks what their ServiceAccount may do.
	reviews kubernetes.Interface
	// syncLimiter, for namespaced controllers, is their namespace's bucket of
	// parent syncs (shared by all its controllers); nil means none.
	syncLimiter *rate.Limiter
}

// customizeCacheTTL is upstream's lifetime of a cached customize answer: the hook is
// asked again at the first sync after it, though the generation is unchanged, so an
// answer that depends on more than the parent's spec is taken up within it.
const customizeCacheTTL = 20 * time.Minute

func (e *environment) resource(gvr schema.GroupVersionResource, namespace string) dynamic.ResourceInterface {
	return dynamicWrites{e.dynamic}.resource(gvr, namespace)
}

// hookVersion is the request format of a hook.
type hookVersion = v1alpha1.HookVersion

func asThrottled(err error) (time.Duration, bool) {
	var t *hook.ThrottledError
	if errors.As(err, &t) {
		return t.RetryAfter, true
	}
	return 0, false
}
