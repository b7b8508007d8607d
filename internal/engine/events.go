package engine

import (
	"context"
	"fmt"
	"strings"
	"sync/atomic"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/kubernetes/scheme"
	typedcorev1 "k8s.io/client-go/kubernetes/typed/core/v1"
	"k8s.io/client-go/tools/record"
)

// EventSource is the component named in every event the engine records. It is
// upstream Metacontroller's, so event queries and alerts written for it keep working.
const EventSource = "metacontroller"

// HookEventSource is the component named in the events a controller's hooks answer
// (see hookevents.go): "compositecontroller/NAME" or "decoratorcontroller/NAME", the
// controller object as kubectl names it. It sets the events apart from the engine's
// own (EventSource), and each controller's from the others'.
func HookEventSource(kind, name string) string {
	return strings.ToLower(kind) + "/" + name
}

// Reasons of the events recorded on CompositeController and DecoratorController
// objects, as upstream Metacontroller records them. Being cluster-scoped, these
// objects get their events in namespace "default".
const (
	ReasonStarting    = "Starting"
	ReasonStarted     = "Started"
	ReasonStopping    = "Stopping"
	ReasonStopped     = "Stopped"
	ReasonCreateError = "CreateError"
)

// eventRecorder records Kubernetes events through client-go's broadcaster, which
// rate-limits them per object (Options.EventsQPS, Options.EventsBurst) and
// aggregates repeats.
type eventRecorder struct {
	broadcaster record.EventBroadcaster
	recorder    record.EventRecorder
	// recorded and written count the events handed to the broadcaster and those it
	// wrote to the API server, so that shutdown can wait for the last ones.
	recorded, written atomic.Int64
}

func newEventRecorder(kube kubernetes.Interface, opts Options) *eventRecorder {
	e := &eventRecorder{broadcaster: record.NewBroadcasterWithCorrelatorOptions(record.CorrelatorOptions{
		QPS:       float32(opts.EventsQPS),
		BurstSize: opts.EventsBurst,
	})}
	e.broadcaster.StartRecordingToSink(&countingSink{EventSink: &typedcorev1.EventSinkImpl{Interface: kube.CoreV1().Events("")}, written: &e.written})
	e.recorder = &countingRecorder{EventRecorder: e.broadcaster.NewRecorder(scheme.Scheme, corev1.EventSource{Component: EventSource}), recorded: &e.recorded}
	return e
}

// withSource is a recorder of the same broadcaster, so under the same rate limits and
// correlation, whose events come from component. The rate limit applies per source,
// object and event type, so events of one source never use up another's.
func (e *eventRecorder) withSource(component string) record.EventRecorder {
	return &countingRecorder{EventRecorder: e.broadcaster.NewRecorder(scheme.Scheme, corev1.EventSource{Component: component}), recorded: &e.recorded}
}

// shutdown waits up to timeout for the events recorded so far to be written, then
// stops the broadcaster. Events dropped by the rate limit are never written; the
// timeout bounds the wait for them.
func (e *eventRecorder) shutdown(ctx context.Context, timeout time.Duration) {
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	for e.written.Load() < e.recorded.Load() && ctx.Err() == nil {
		select {
		case <-ctx.Done():
		case <-time.After(20 * time.Millisecond):
		}
	}
	e.broadcaster.Shutdown()
}

// lifecycle records a Normal event of the controller object obj, with upstream's
// message ("Started controller: name").
func (e *eventRecorder) lifecycle(obj runtime.Object, name, reason string) {
	e.recorder.Event(obj, corev1.EventTypeNormal, reason, fmt.Sprintf("%s controller: %s", reason, name))
}

type countingRecorder struct {
	record.EventRecorder
	recorded *atomic.Int64
}

func (r *countingRecorder) Event(obj runtime.Object, eventtype, reason, message string) {
	r.recorded.Add(1)
	r.EventRecorder.Event(obj, eventtype, reason, message)
}

func (r *countingRecorder) Eventf(obj runtime.Object, eventtype, reason, messageFmt string, args ...any) {
	r.recorded.Add(1)
	r.EventRecorder.Eventf(obj, eventtype, reason, messageFmt, args...)
}

func (r *countingRecorder) AnnotatedEventf(obj runtime.Object, annotations map[string]string, eventtype, reason, messageFmt string, args ...any) {
	r.recorded.Add(1)
	r.EventRecorder.AnnotatedEventf(obj, annotations, eventtype, reason, messageFmt, args...)
}

type countingSink struct {
	record.EventSink
	written *atomic.Int64
}

func (s *countingSink) Create(event *corev1.Event) (*corev1.Event, error) {
	out, err := s.EventSink.Create(event)
	s.count(err)
	return out, err
}

func (s *countingSink) Update(event *corev1.Event) (*corev1.Event, error) {
	out, err := s.EventSink.Update(event)
	s.count(err)
	return out, err
}

func (s *countingSink) Patch(event *corev1.Event, data []byte) (*corev1.Event, error) {
	out, err := s.EventSink.Patch(event, data)
	s.count(err)
	return out, err
}

func (s *countingSink) count(err error) {
	if err == nil {
		s.written.Add(1)
	}
}
