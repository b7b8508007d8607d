package engine

import (
	"context"
	"crypto/sha256"
	"encoding/json"
	"fmt"
	"strings"

	"github.com/metalambda/metalambda/internal/jsonvalue"

	"github.com/prometheus/client_golang/prometheus"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"

	"github.com/metalambda/metalambda/internal/apis/metacontroller/v1alpha1"
)

// specHash names a controller object's spec and loop annotations: a hosted
// controller is rebuilt when they change, and only then.
func specHash(obj *unstructured.Unstructured) string {
	data, _ := json.Marshal([]any{obj.Object["spec"], loopAnnotationValues(obj.GetAnnotations())})
	sum := sha256.Sum256(data)
	return fmt.Sprintf("%x", sum[:8])
}

// Condition types written on controller objects.
const (
	ConditionReady     = "Ready"
	ConditionSupported = "Supported"
)

// writeControllerStatus records on the controller object whether it runs, which of
// its fields this engine does not support, and which of its loop annotations are
// invalid (both in the Supported condition).
func (m *Manager) writeControllerStatus(ctx context.Context, obj *unstructured.Unstructured, buildErr error, unsupported, invalid []string) error {
	var status v1alpha1.ControllerStatus
	if raw, ok := obj.Object["status"]; ok {
		_ = jsonvalue.Convert(raw, &status)
	}
	gen := obj.GetGeneration()
	ready := metav1.Condition{Type: ConditionReady, Status: metav1.ConditionTrue, Reason: "Running", Message: "the controller is running", ObservedGeneration: gen}
	if buildErr != nil {
		ready = metav1.Condition{Type: ConditionReady, Status: metav1.ConditionFalse, Reason: reasonOf(buildErr), Message: buildErr.Error(), ObservedGeneration: gen}
	}
	supported := metav1.Condition{Type: ConditionSupported, Status: metav1.ConditionTrue, Reason: "AllFieldsSupported", Message: "every field set is supported", ObservedGeneration: gen}
	switch {
	case len(unsupported) > 0:
		supported = metav1.Condition{Type: ConditionSupported, Status: metav1.ConditionFalse, Reason: "UnsupportedFields", Message: strings.Join(append(unsupported, invalid...), "; "), ObservedGeneration: gen}
	case len(invalid) > 0:
		supported = metav1.Condition{Type: ConditionSupported, Status: metav1.ConditionFalse, Reason: "InvalidAnnotations", Message: strings.Join(invalid, "; "), ObservedGeneration: gen}
	}
	meta.SetStatusCondition(&status.Conditions, ready)
	meta.SetStatusCondition(&status.Conditions, supported)
	status.ObservedGeneration = gen
	newStatus, err := runtime.DefaultUnstructuredConverter.ToUnstructured(&status)
	if err != nil {
		return err
	}
	gvr := map[string]schema.GroupVersionResource{
		CompositeKind: compositeGVR, DecoratorKind: decoratorGVR,
		NamespacedCompositeKind: namespacedCompositeGVR, NamespacedDecoratorKind: namespacedDecoratorGVR,
	}[obj.GetKind()]
	_, err = writeStatus(ctx, m.env, gvr, obj, newStatus)
	return err
}

// queueCollector reports each hosted controller's queue length at scrape time.
type queueCollector struct {
	m    *Manager
	desc *prometheus.Desc
}

func (q *queueCollector) Describe(ch chan<- *prometheus.Desc) { ch <- q.desc }

func (q *queueCollector) Collect(ch chan<- prometheus.Metric) {
	q.m.mu.Lock()
	defer q.m.mu.Unlock()
	for key, h := range q.m.hosted {
		if h.controller.queue != nil {
			ch <- prometheus.MustNewConstMetric(q.desc, prometheus.GaugeValue, float64(h.controller.queue.Len()), key.kind+"/"+h.controller.name)
		}
	}
}
