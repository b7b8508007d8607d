//go:build integration

package engine

import (
	"bytes"
	"io"
	"net/http"
	"strings"
	"sync"
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/rest"

	"github.com/metalambda/metalambda/internal/kubetest"
)

// answerRecorder keeps the bodies of the API server's answers.
type answerRecorder struct {
	next   http.RoundTripper
	mu     sync.Mutex
	bodies []string
}

func (r *answerRecorder) RoundTrip(req *http.Request) (*http.Response, error) {
	resp, err := r.next.RoundTrip(req)
	if err != nil {
		return resp, err
	}
	body, err := io.ReadAll(resp.Body)
	resp.Body.Close()
	resp.Body = io.NopCloser(bytes.NewReader(body))
	r.mu.Lock()
	r.bodies = append(r.bodies, string(body))
	r.mu.Unlock()
	return resp, err
}

// TestMetaWriterGetsMetadataOnly: the pinned API server answers a create and a status
// write of a metaWriter with the object's metadata alone, for a built-in type and a
// custom resource, and the objects are written whole.
func TestMetaWriterGetsMetadataOnly(t *testing.T) {
	setup(t)
	ns := env.Namespace(t)
	ctx := kubetest.Context(t)
	cfg := rest.CopyConfig(env.Config)
	rec := &answerRecorder{}
	cfg.Wrap(func(rt http.RoundTripper) http.RoundTripper { rec.next = rt; return rec })
	client, err := rest.HTTPClientFor(cfg)
	if err != nil {
		t.Fatal(err)
	}
	w, err := newMetaWriter(cfg, client)
	if err != nil {
		t.Fatal(err)
	}
	cm := &unstructured.Unstructured{Object: map[string]any{"apiVersion": "v1", "kind": "ConfigMap", "metadata": map[string]any{"name": "a", "namespace": ns}, "data": map[string]any{"secret-ish": "value-not-in-the-answer"}}}
	created, err := w.create(ctx, schema.GroupVersionResource{Version: "v1", Resource: "configmaps"}, cm, "metalambda")
	if err != nil {
		t.Fatal(err)
	}
	parent := &unstructured.Unstructured{Object: map[string]any{"apiVersion": testGroup + "/v1", "kind": "Parent", "metadata": map[string]any{"name": "p", "namespace": ns}, "spec": map[string]any{"x": "y"}}}
	parentCreated, err := w.create(ctx, parentsGVR, parent, "metalambda")
	if err != nil {
		t.Fatal(err)
	}
	parent.SetResourceVersion(parentCreated.GetResourceVersion())
	parent.Object["status"] = map[string]any{"answer": "status-not-in-the-answer"}
	written, err := w.updateStatus(ctx, parentsGVR, parent, "metalambda")
	if err != nil {
		t.Fatal(err)
	}
	if created.GetUID() == "" || created.GetResourceVersion() == "" || written.GetResourceVersion() == parentCreated.GetResourceVersion() {
		t.Errorf("read back uid %q rv %q, status write rv %q after %q", created.GetUID(), created.GetResourceVersion(), written.GetResourceVersion(), parentCreated.GetResourceVersion())
	}
	for i, body := range rec.bodies {
		if !strings.Contains(body, `"kind":"PartialObjectMetadata"`) || strings.Contains(body, "not-in-the-answer") {
			t.Errorf("answer %d is not metadata alone: %s", i, body)
		}
	}
	if len(rec.bodies) != 3 {
		t.Errorf("%d answers recorded, want 3", len(rec.bodies))
	}
	stored := env.MustGet(t, schema.GroupVersionResource{Version: "v1", Resource: "configmaps"}, ns, "a")
	if v, _, _ := unstructured.NestedString(stored.Object, "data", "secret-ish"); v != "value-not-in-the-answer" {
		t.Errorf("the ConfigMap was stored as %v", stored.Object)
	}
	got, err := env.Dynamic.Resource(parentsGVR).Namespace(ns).Get(ctx, "p", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if v, _, _ := unstructured.NestedString(got.Object, "status", "answer"); v != "status-not-in-the-answer" {
		t.Errorf("the parent's status was stored as %v", got.Object["status"])
	}
}
