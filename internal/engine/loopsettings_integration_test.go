//go:build integration

package engine

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/metalambda/metalambda/internal/apis/metacontroller/v1alpha1"
	"github.com/metalambda/metalambda/internal/jsonvalue"
	"github.com/metalambda/metalambda/internal/kubetest"
)

// loopManifest is a CompositeController with annotations, of the children
// echoChildren answers.
const loopManifest = `
apiVersion: metacontroller.k8s.io/v1alpha1
kind: CompositeController
metadata:
  name: %[1]s
  labels: {metalambda.dev/test-engine: %[1]s}
  annotations: %[3]s
spec:
  generateSelector: true
  parentResource: {apiVersion: test.metalambda.dev/v1, resource: parents, labelSelector: {matchLabels: {metalambda.dev/test-engine: %[1]s}}}
  childResources:
  - {apiVersion: v1, resource: configmaps, updateStrategy: {method: InPlace}}
  - {apiVersion: v1, resource: services, updateStrategy: {method: InPlace}}
  hooks:
    sync:
      webhook: {url: "%[2]s/sync", timeout: 5s}
`

// annotateController merges annotations into the CompositeController name (a nil
// value removes the key).
func annotateController(t *testing.T, name string, annotations map[string]any) {
	t.Helper()
	patch, _ := json.Marshal(map[string]any{"metadata": map[string]any{"annotations": annotations}})
	if _, err := env.Resource(ccGVR, "").Patch(kubetest.Context(t), name, types.MergePatchType, patch, metav1.PatchOptions{}); err != nil {
		t.Fatal(err)
	}
}

// inFlight counts the hook calls running at once, apart for the calls of a
// controller object that carries the max-concurrent-syncs annotation ("capped").
type inFlight struct {
	mu               sync.Mutex
	now, most, calls [2]int
	parentsSeen      [2]map[string]bool
}

func (f *inFlight) enter(capped int, parent string) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.now[capped]++
	f.most[capped] = max(f.most[capped], f.now[capped])
	f.calls[capped]++
	if f.parentsSeen[capped] == nil {
		f.parentsSeen[capped] = map[string]bool{}
	}
	f.parentsSeen[capped][parent] = true
}

func (f *inFlight) leave(capped int) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.now[capped]--
}

func (f *inFlight) seen(capped int) (parents, most int) {
	f.mu.Lock()
	defer f.mu.Unlock()
	return len(f.parentsSeen[capped]), f.most[capped]
}

// TestMaxConcurrentSyncs syncs 20 parents with 4 workers, first as many at once as
// the workers allow, then, once the annotation caps the controller at 1, one at a
// time: the change takes effect on the running controller.
func TestMaxConcurrentSyncs(t *testing.T) {
	setup(t)
	ns := env.Namespace(t)
	startEngine(t, ns, func(o *Options) { o.Workers = 4 })
	var f inFlight
	hook := newHookServer(t, func(req map[string]any) (int, any) {
		capped := 0
		if field(req["controller"].(map[string]any), "metadata", "annotations", AnnotationMaxConcurrentSyncs) == "1" {
			capped = 1
		}
		f.enter(capped, field(req["parent"].(map[string]any), "metadata", "name").(string))
		defer f.leave(capped)
		time.Sleep(100 * time.Millisecond)
		return 200, map[string]any{"status": map[string]any{"synced": true}}
	})
	const parents = 20
	for i := range parents {
		create(t, parentsGVR, ns, parentManifest, fmt.Sprintf("p%d", i), 0)
	}
	// The controller starts with every parent in its cache, so all are queued at once.
	create(t, ccGVR, "", loopManifest, ns, hook.URL, "{}")
	kubetest.Eventually(t, 60*time.Second, "every parent is synced", func(context.Context) (bool, error) {
		n, _ := f.seen(0)
		return n == parents, nil
	})
	if _, most := f.seen(0); most < 2 {
		t.Errorf("without the annotation, at most %d sync ran at once with 4 workers; want more than 1", most)
	}

	annotateController(t, ns, map[string]any{AnnotationMaxConcurrentSyncs: "1"})
	kubetest.Eventually(t, 60*time.Second, "the capped controller syncs every parent", func(context.Context) (bool, error) {
		n, _ := f.seen(1)
		return n == parents, nil
	})
	if _, most := f.seen(1); most != 1 {
		t.Errorf("with %s: 1, %d syncs ran at once", AnnotationMaxConcurrentSyncs, most)
	}
}

// TestSyncBackoffAnnotation fails every call: the parent is retried on the
// controller's own schedule, 2 s, then 4 s.
func TestSyncBackoffAnnotation(t *testing.T) {
	setup(t)
	ns := env.Namespace(t)
	startEngine(t, ns)
	var mu sync.Mutex
	var calls []time.Time
	hook := newHookServer(t, func(map[string]any) (int, any) {
		mu.Lock()
		calls = append(calls, time.Now())
		mu.Unlock()
		return 500, "failing on purpose"
	})
	create(t, ccGVR, "", loopManifest, ns, hook.URL, fmt.Sprintf("{%s: 2s, %s: 1m}", AnnotationSyncBackoffBase, AnnotationSyncBackoffMax))
	create(t, parentsGVR, ns, parentManifest, "p", 0)
	kubetest.Eventually(t, 60*time.Second, "three calls", func(context.Context) (bool, error) {
		return hook.calls.Load() >= 3, nil
	})
	mu.Lock()
	defer mu.Unlock()
	for i, want := range []time.Duration{2 * time.Second, 4 * time.Second} {
		if gap := calls[i+1].Sub(calls[i]); gap < want {
			t.Errorf("retry %d came after %s, want at least %s", i+1, gap, want)
		}
	}
	if c := supportedCondition(t, ns); c.Status != metav1.ConditionTrue {
		t.Errorf("valid annotations: Supported = %+v", c)
	}
}

// TestInvalidLoopAnnotationsAreReported: the controller runs with the engine's
// defaults, and says why on its object; fixing the annotations clears it.
func TestInvalidLoopAnnotationsAreReported(t *testing.T) {
	setup(t)
	ns := env.Namespace(t)
	startEngine(t, ns)
	hook := newHookServer(t, echoChildren("v"))
	create(t, ccGVR, "", loopManifest, ns, hook.URL, fmt.Sprintf("{%s: all, %s: fast}", AnnotationMaxConcurrentSyncs, AnnotationSyncBackoffBase))
	create(t, parentsGVR, ns, parentManifest, "p", 1)
	env.WaitFor(t, "the controller runs with the defaults", configMapsGVR, ns, "p-0", nil)

	var c metav1.Condition
	kubetest.Eventually(t, 30*time.Second, "Supported reports the annotations", func(context.Context) (bool, error) {
		c = supportedCondition(t, ns)
		return c.Reason == "InvalidAnnotations", fmt.Errorf("Supported = %+v", c)
	})
	for _, part := range []string{AnnotationMaxConcurrentSyncs + `: "all" is not a positive integer`, AnnotationSyncBackoffBase + `: "fast" is not a positive duration`} {
		if c.Status != metav1.ConditionFalse || !strings.Contains(c.Message, part) {
			t.Errorf("Supported = %s %q, want False naming %q", c.Status, c.Message, part)
		}
	}
	kubetest.Eventually(t, 30*time.Second, "an InvalidAnnotation event on the controller", func(context.Context) (bool, error) {
		for _, e := range env.Events(t, "default", CompositeKind, ns) {
			if e.Reason == ReasonInvalidAnnotation && e.Type == "Warning" && strings.Contains(e.Message, `"all"`) {
				return true, nil
			}
		}
		return false, nil
	})

	annotateController(t, ns, map[string]any{AnnotationMaxConcurrentSyncs: "2", AnnotationSyncBackoffBase: "1s"})
	kubetest.Eventually(t, 30*time.Second, "Supported is True again", func(context.Context) (bool, error) {
		c = supportedCondition(t, ns)
		return c.Status == metav1.ConditionTrue, fmt.Errorf("Supported = %+v", c)
	})
}

func supportedCondition(t *testing.T, name string) metav1.Condition {
	t.Helper()
	obj := env.MustGet(t, ccGVR, "", name)
	var status v1alpha1.ControllerStatus
	if raw, ok := obj.Object["status"]; ok {
		if err := jsonvalue.Convert(raw, &status); err != nil {
			t.Fatal(err)
		}
	}
	if c := meta.FindStatusCondition(status.Conditions, ConditionSupported); c != nil {
		return *c
	}
	return metav1.Condition{}
}
