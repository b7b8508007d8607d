package engine

import (
	"context"
	"fmt"
	"strings"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/klog/v2"

	"github.com/metalambda/metalambda/internal/hookapi"
)

// ReasonInvalidHookEvents is the reason of the Warning event the engine records on a
// parent when its hook answered events that were not recorded (invalid, or past the
// limit of one answer).
const ReasonInvalidHookEvents = "InvalidHookEvents"

// hookEvents holds the events of a sync's hook answer until the sync ends. Under
// rolling updates only the latest revision's answer fills it, as only its status is
// written.
type hookEvents struct {
	hook   string // "sync" or "finalize"
	events []hookapi.Event
}

// keep takes the events of an answer that was decoded.
func (h *hookEvents) keep(hook string, events []hookapi.Event) {
	if h != nil {
		h.hook, h.events = hook, events
	}
}

// recordHookEvents records on parent the events its hook answered, from the
// controller's own source (HookEventSource), through the engine's rate-limited
// recorder. It runs when the sync ends, whether its writes succeeded or not, and
// records nothing when no answer was decoded. Events that cannot be recorded are
// reported once, in a Warning event of the engine's own.
func (c *controller) recordHookEvents(ctx context.Context, parent *unstructured.Unstructured, h *hookEvents) {
	if len(h.events) == 0 {
		return
	}
	valid, problems := hookapi.CheckEvents(h.events)
	for _, e := range valid {
		c.hookRecorder.Event(parent, e.Type, e.Reason, e.Message)
	}
	if len(problems) == 0 {
		return
	}
	msg := fmt.Sprintf("the %s hook answered events that were not recorded: %s", h.hook, strings.Join(problems, "; "))
	klog.FromContext(ctx).V(1).Info("Hook events not recorded", "hook", h.hook, "problems", problems)
	c.env.recorder.Event(parent, corev1.EventTypeWarning, ReasonInvalidHookEvents, hookapi.CutMessage(msg, hookapi.MaxEventMessageBytes))
}
