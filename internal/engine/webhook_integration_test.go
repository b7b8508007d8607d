//go:build integration

package engine

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	"github.com/metalambda/metalambda/internal/kubetest"
)

// TestBadHookResponsesTouchNothing converges, then makes the hook answer 200 with
// bodies that are not JSON objects. Each is refused with a SyncError event naming
// what came back; no child is deleted and no status is written (null used to decode
// as an empty response, which deleted every child).
func TestBadHookResponsesTouchNothing(t *testing.T) {
	setup(t)
	ns := env.Namespace(t)
	eng := startEngine(t, ns)
	hook := newHookServer(t, echoChildren("kept"))
	create(t, ccGVR, "", compositeManifest, ns, hook.URL, 1, "Recreate")
	create(t, parentsGVR, ns, parentManifest, "p", 2)
	children := []*unstructured.Unstructured{
		env.WaitFor(t, "child p-0 exists", configMapsGVR, ns, "p-0", nil),
		env.WaitFor(t, "child p-1 exists", configMapsGVR, ns, "p-1", nil),
	}
	parent := env.WaitFor(t, "status is written", parentsGVR, ns, "p", func(o *unstructured.Unstructured) error {
		if n, _, _ := unstructured.NestedInt64(o.Object, "status", "configMaps"); n != 2 {
			return fmt.Errorf("status = %v", o.Object["status"])
		}
		return nil
	})
	time.Sleep(time.Second) // let the sync that wrote the status finish
	writes := eng.writes(t)

	for _, bad := range []struct{ body, says string }{
		{`null`, `answered "null"; want a JSON object`},
		{`[]`, `answered "[]"; want a JSON object`},
		{`""`, `answered "\"\""; want a JSON object`},
		{`7`, `answered "7"; want a JSON object`},
		{``, `answered an empty body; want a JSON object`},
	} {
		t.Run(fmt.Sprintf("%q", bad.body), func(t *testing.T) {
			calls := hook.calls.Load()
			hook.set(func(map[string]any) (int, any) { return 200, bad.body })
			want := "sync hook " + hook.URL + "/sync " + bad.says
			kubetest.Eventually(t, 30*time.Second, "a SyncError event saying "+want, func(context.Context) (bool, error) {
				for _, e := range env.Events(t, ns, "", "p") {
					if e.Reason == "SyncError" && strings.Contains(e.Message, want) && hook.calls.Load() > calls {
						return true, nil
					}
				}
				return false, nil
			})
		})
	}
	hook.set(echoChildren("kept"))
	if w := eng.writes(t) - writes; w != 0 {
		t.Errorf("bad responses caused %v writes", w)
	}
	for _, before := range children {
		after := env.MustGet(t, configMapsGVR, ns, before.GetName())
		if after.GetUID() != before.GetUID() || after.GetResourceVersion() != before.GetResourceVersion() {
			t.Errorf("child %s changed while the hook answered badly", before.GetName())
		}
	}
	if after := env.MustGet(t, parentsGVR, ns, "p"); after.GetResourceVersion() != parent.GetResourceVersion() {
		t.Errorf("the parent changed while the hook answered badly: status %v", after.Object["status"])
	}
}

// etagHook is a sync hook that supports ETags the way webhook.etag expects: its
// answer depends only on the parent's spec.size, so it tags each answer with the size
// and answers 304 Not Modified when sent the tag of the current size.
type etagHook struct {
	*httptest.Server
	mu          sync.Mutex
	notModified int      // 304 answers given
	sent        []string // If-None-Match of each call
}

func newETagHook(t *testing.T) *etagHook {
	h := &etagHook{}
	h.Server = httptest.NewServer(http.HandlerFunc(h.serve))
	t.Cleanup(h.Close)
	return h
}

func (h *etagHook) serve(w http.ResponseWriter, r *http.Request) {
	var req map[string]any
	body, _ := io.ReadAll(r.Body)
	if err := json.Unmarshal(body, &req); err != nil {
		http.Error(w, err.Error(), http.StatusBadRequest)
		return
	}
	parent := req["parent"].(map[string]any)
	size := int(field(parent, "spec", "size").(float64))
	etag := fmt.Sprintf(`"size-%d"`, size)
	h.mu.Lock()
	h.sent = append(h.sent, r.Header.Get("If-None-Match"))
	if r.Header.Get("If-None-Match") == etag {
		h.notModified++
		h.mu.Unlock()
		w.WriteHeader(http.StatusNotModified)
		return
	}
	h.mu.Unlock()
	name := field(parent, "metadata", "name").(string)
	var children []any
	for i := range size {
		children = append(children, configMap(fmt.Sprintf("%s-%d", name, i), map[string]any{"size": fmt.Sprint(size)}, nil))
	}
	w.Header().Set("ETag", etag)
	_ = json.NewEncoder(w).Encode(map[string]any{"status": map[string]any{"size": size}, "children": children})
}

func (h *etagHook) counts() (notModified int, sent []string) {
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.notModified, append([]string(nil), h.sent...)
}

// TestETagNotModifiedKeepsChildren runs a sync hook with webhook.etag enabled that
// answers 304 Not Modified while the parent's size stays the same: the engine reuses
// the cached response, so the children and status stay as it says, with no error and
// no write. A new size gets a 200 with a new ETag, which the engine applies.
func TestETagNotModifiedKeepsChildren(t *testing.T) {
	setup(t)
	ns := env.Namespace(t)
	eng := startEngine(t, ns)
	hook := newETagHook(t)
	create(t, ccGVR, "", `
apiVersion: metacontroller.k8s.io/v1alpha1
kind: CompositeController
metadata: {name: %[1]s, labels: {metalambda.dev/test-engine: %[1]s}}
spec:
  generateSelector: true
  resyncPeriodSeconds: 1
  parentResource: {apiVersion: test.metalambda.dev/v1, resource: parents, labelSelector: {matchLabels: {metalambda.dev/test-engine: %[1]s}}}
  childResources: [{apiVersion: v1, resource: configmaps}]
  hooks: {sync: {webhook: {url: "%[2]s/sync", etag: {enabled: true, cacheTimeoutSeconds: 600}}}}
`, ns, hook.URL)
	create(t, parentsGVR, ns, parentManifest, "p", 2)
	children := []*unstructured.Unstructured{
		env.WaitFor(t, "child p-0 exists", configMapsGVR, ns, "p-0", nil),
		env.WaitFor(t, "child p-1 exists", configMapsGVR, ns, "p-1", nil),
	}
	env.WaitFor(t, "status is written", parentsGVR, ns, "p", func(o *unstructured.Unstructured) error {
		if n, _, _ := unstructured.NestedInt64(o.Object, "status", "size"); n != 2 {
			return fmt.Errorf("status = %v", o.Object["status"])
		}
		return nil
	})
	time.Sleep(time.Second) // let the sync that wrote the status finish
	writes := eng.writes(t)
	before, _ := hook.counts()
	kubetest.Eventually(t, 30*time.Second, "three resyncs answered 304 Not Modified", func(context.Context) (bool, error) {
		n, _ := hook.counts()
		return n >= before+3, nil
	})
	if w := eng.writes(t) - writes; w != 0 {
		t.Errorf("resyncs answered 304 caused %v writes", w)
	}
	for _, c := range children {
		after := env.MustGet(t, configMapsGVR, ns, c.GetName())
		if after.GetUID() != c.GetUID() || after.GetResourceVersion() != c.GetResourceVersion() {
			t.Errorf("child %s changed although the hook said nothing changed", c.GetName())
		}
	}
	for _, e := range env.Events(t, ns, "", "p") {
		if e.Reason == "SyncError" {
			t.Errorf("SyncError event: %s", e.Message)
		}
	}
	_, sent := hook.counts()
	if sent[0] != "" || sent[len(sent)-1] != `"size-2"` {
		t.Errorf("If-None-Match sent = %q, want none at first, then the ETag of the last 200", sent)
	}

	patchSpec(t, ns, "p", map[string]any{"size": 1})
	env.WaitGone(t, "child p-1 is deleted once the hook answers anew", configMapsGVR, ns, "p-1")
	env.WaitFor(t, "status follows the new answer", parentsGVR, ns, "p", func(o *unstructured.Unstructured) error {
		if n, _, _ := unstructured.NestedInt64(o.Object, "status", "size"); n != 1 {
			return fmt.Errorf("status = %v", o.Object["status"])
		}
		return nil
	})
	kubetest.Eventually(t, 30*time.Second, "the new ETag is sent and answered 304", func(context.Context) (bool, error) {
		_, sent := hook.counts()
		return sent[len(sent)-1] == `"size-1"`, nil
	})
}
