package pythonlambda

import (
	"fmt"
	"math"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/metalambda/metalambda/internal/hookapi"
)

// Annotations of scale to zero. The values are those of the local ingress
// (internal/local/ingress): an ingress that knows them wakes a lambda at zero pods.
const (
	// WakeTargetAnnotation on the Ingress names the object the ingress signals demand
	// to, as "<resource>.<version>.<group>/<name>" in the Ingress's namespace. The hook
	// sets it only when spec.scaleToZero is set.
	WakeTargetAnnotation = "metalambda.dev/wake-target"
	// LastDemandAnnotation on the PythonLambda is when the ingress last saw a request
	// for it (RFC 3339), written by the ingress at most once per its demand interval.
	LastDemandAnnotation = "metalambda.dev/last-demand"
)

// MinIdleSeconds is the smallest spec.scaleToZero.idleSeconds: the ingress refreshes
// the demand of a busy lambda once a second, and a lambda must not look idle between
// two refreshes.
const MinIdleSeconds = 5

// scaleToZero is spec.scaleToZero.
type scaleToZero struct {
	// IdleSeconds is how long without a request before the lambda drops to zero pods.
	IdleSeconds int32 `json:"idleSeconds"`
}

// wakeTarget is the WakeTargetAnnotation value naming the PythonLambda l.
func wakeTarget(l *lambda) string {
	return "pythonlambdas.v1.example.com/" + l.Name
}

// ingressAnnotations are the Ingress child's annotations: the wake target when the
// lambda scales to zero, none otherwise.
func ingressAnnotations(l *lambda) map[string]string {
	if l.Spec.ScaleToZero == nil {
		return nil
	}
	return map[string]string{WakeTargetAnnotation: wakeTarget(l)}
}

// validateScale checks spec.scaleToZero.
func validateScale(s *scaleToZero) error {
	if s != nil && s.IdleSeconds < MinIdleSeconds {
		return fmt.Errorf("spec.scaleToZero.idleSeconds is %d, less than %d", s.IdleSeconds, MinIdleSeconds)
	}
	return nil
}

// lastDemand is when the lambda last had a request: the LastDemandAnnotation, or its
// creation when it has none (a new lambda starts with its pods).
func lastDemand(meta metav1.ObjectMeta) (time.Time, error) {
	v, ok := meta.Annotations[LastDemandAnnotation]
	if !ok {
		return meta.CreationTimestamp.Time, nil
	}
	t, err := time.Parse(time.RFC3339Nano, v)
	if err != nil {
		return time.Time{}, fmt.Errorf("annotation %s %q is not an RFC 3339 time", LastDemandAnnotation, v)
	}
	return t, nil
}

// idleness decides whether l is idle at now: no request for idleSeconds. When it is
// not, resyncAfter is the seconds until it will be, rounded up to a tenth so the next
// sync finds it idle.
func idleness(s *scaleToZero, demand, now time.Time) (idle bool, resyncAfter float64) {
	if s == nil {
		return false, 0
	}
	left := demand.Add(time.Duration(s.IdleSeconds) * time.Second).Sub(now)
	if left <= 0 {
		return true, 0
	}
	return false, math.Ceil(left.Seconds()*10) / 10
}

// scaleAt marks l idle when it scales to zero and had no request for idleSeconds at
// now, and returns the resync delay that rechecks it.
func scaleAt(l *lambda, parent hookapi.Object, now time.Time) (float64, error) {
	if l.Spec.ScaleToZero == nil {
		return 0, nil
	}
	var obj struct {
		Metadata metav1.ObjectMeta `json:"metadata"`
	}
	if err := roundTrip(parent, &obj); err != nil {
		return 0, fmt.Errorf("%w: %v", ErrInvalidParent, err)
	}
	demand, err := lastDemand(obj.Metadata)
	if err != nil {
		return 0, fmt.Errorf("%w %s/%s: %v", ErrInvalidParent, l.Namespace, l.Name, err)
	}
	var after float64
	l.Idle, after = idleness(l.Spec.ScaleToZero, demand, now)
	return after, nil
}

// zeroMessage is the Ready condition's message when no pod runs.
func zeroMessage(l *lambda) string {
	if l.Idle {
		return fmt.Sprintf("no request for %ds (spec.scaleToZero.idleSeconds): no pod runs until the ingress holds one", l.Spec.ScaleToZero.IdleSeconds)
	}
	return "spec.replicas is 0: no pod runs"
}
