package engine

import (
	"context"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/rest"
)

// TestMetaWriter checks the requests a metaWriter sends and how it reads answers: the
// metadata the API server sends for as=PartialObjectMetadata, a whole object from a
// server that cannot transform, and a Status error as an API error.
func TestMetaWriter(t *testing.T) {
	type seen struct{ method, path, query, accept, body string }
	var got []seen
	answers := []struct {
		code int
		body string
	}{
		{201, `{"kind":"PartialObjectMetadata","apiVersion":"meta.k8s.io/v1","metadata":{"name":"a","namespace":"ns","uid":"u1","resourceVersion":"11","managedFields":[{"manager":"m","operation":"Update","fieldsType":"FieldsV1","fieldsV1":{"f:data":{".":{}}}}]}}`},
		{200, `{"kind":"Parent","apiVersion":"example.com/v1","metadata":{"name":"p","namespace":"ns","uid":"u2","resourceVersion":"12","generation":3},"spec":{"x":1},"status":{"y":2}}`},
		{201, `{"kind":"Thing","apiVersion":"example.com/v1","metadata":{"name":"t","uid":"u3","resourceVersion":"13"}}`},
		{409, `{"kind":"Status","apiVersion":"v1","status":"Failure","message":"configmaps \"a\" already exists","reason":"AlreadyExists","details":{"name":"a","kind":"configmaps"},"code":409}`},
	}
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(r.Body)
		got = append(got, seen{r.Method, r.URL.Path, r.URL.RawQuery, r.Header.Get("Accept"), string(body)})
		a := answers[len(got)-1]
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(a.code)
		_, _ = io.WriteString(w, a.body)
	}))
	defer srv.Close()
	w, err := newMetaWriter(&rest.Config{Host: srv.URL}, srv.Client())
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	cm := &unstructured.Unstructured{Object: map[string]any{"apiVersion": "v1", "kind": "ConfigMap", "metadata": map[string]any{"name": "a", "namespace": "ns"}, "data": map[string]any{"k": "v"}}}
	parent := &unstructured.Unstructured{Object: map[string]any{"apiVersion": "example.com/v1", "kind": "Parent", "metadata": map[string]any{"name": "p", "namespace": "ns"}, "status": map[string]any{"y": int64(2)}}}
	thing := &unstructured.Unstructured{Object: map[string]any{"apiVersion": "example.com/v1", "kind": "Thing", "metadata": map[string]any{"name": "t"}}}
	configMaps := schema.GroupVersionResource{Version: "v1", Resource: "configmaps"}
	parents := schema.GroupVersionResource{Group: "example.com", Version: "v1", Resource: "parents"}
	things := schema.GroupVersionResource{Group: "example.com", Version: "v1", Resource: "things"}

	created, err := w.create(ctx, configMaps, cm, "metalambda")
	if err != nil {
		t.Fatal(err)
	}
	if created.GetName() != "a" || created.GetNamespace() != "ns" || created.GetUID() != "u1" || created.GetResourceVersion() != "11" {
		t.Errorf("create read %v", created.Object)
	}
	written, err := w.updateStatus(ctx, parents, parent, "metalambda")
	if err != nil {
		t.Fatal(err)
	}
	if written.GetResourceVersion() != "12" || written.GetGeneration() != 3 || written.Object["status"] != nil {
		t.Errorf("a whole object as the answer read as %v, want its metadata alone", written.Object)
	}
	if _, err := w.create(ctx, things, thing, ""); err != nil {
		t.Fatal(err)
	}
	_, err = w.create(ctx, configMaps, cm, "metalambda")
	if !apierrors.IsAlreadyExists(err) {
		t.Errorf("a 409 AlreadyExists answer gave %v, want an API error that says so", err)
	}

	want := []seen{
		{"POST", "/api/v1/namespaces/ns/configmaps", "fieldManager=metalambda", metaAccept, ""},
		{"PUT", "/apis/example.com/v1/namespaces/ns/parents/p/status", "fieldManager=metalambda", metaAccept, ""},
		{"POST", "/apis/example.com/v1/things", "", metaAccept, ""},
	}
	for i, w := range want {
		g := got[i]
		if g.method != w.method || g.path != w.path || g.query != w.query || g.accept != w.accept {
			t.Errorf("request %d: %s %s?%s Accept %q, want %s %s?%s Accept %q", i, g.method, g.path, g.query, g.accept, w.method, w.path, w.query, w.accept)
		}
	}
	if !strings.Contains(got[0].body, `"data":{"k":"v"}`) || !strings.Contains(got[1].body, `"status":{"y":2}`) {
		t.Errorf("bodies sent: %q, %q", got[0].body, got[1].body)
	}
}

// TestReadMetadata reads answers in one pass where it can, by decoding where that
// pass declines (an escaped string), and refuses what is not JSON, as decoding did.
func TestReadMetadata(t *testing.T) {
	for _, tc := range []struct {
		answer                          string
		name, uid, resourceVersion, err string
		generation                      int64
	}{
		{answer: `{"kind":"PartialObjectMetadata","metadata":{"name":"a","namespace":"ns","uid":"u1","resourceVersion":"11","generation":2,"managedFields":[{"manager":"m"}]}}`, name: "a", uid: "u1", resourceVersion: "11", generation: 2},
		{answer: `{"kind":"Thing","metadata":{"name":"\u0074","uid":"u2","resourceVersion":"12"},"spec":{}}`, name: "t", uid: "u2", resourceVersion: "12"},
		{answer: `{"kind":"Thing","metadata":{"name":"t"`, err: "unexpected end of JSON input"},
	} {
		got, err := readMetadata([]byte(tc.answer))
		if tc.err != "" {
			if err == nil || !strings.Contains(err.Error(), tc.err) {
				t.Errorf("readMetadata(%s): %v, want an error saying %q", tc.answer, err, tc.err)
			}
			continue
		}
		if err != nil {
			t.Fatalf("readMetadata(%s): %v", tc.answer, err)
		}
		if got.GetName() != tc.name || string(got.GetUID()) != tc.uid || got.GetResourceVersion() != tc.resourceVersion || got.GetGeneration() != tc.generation {
			t.Errorf("readMetadata(%s) = %v", tc.answer, got.Object)
		}
	}
}

// TestClientsSendAUserAgent: every client of an identity shares one HTTP client,
// which must carry client-go's User-Agent (audit logs and API server dashboards
// name clients by it); built from a config without one, the requests went out
// as Go's "Go-http-client/1.1".
func TestClientsSendAUserAgent(t *testing.T) {
	for _, want := range []string{"", "custom-agent/1.0"} {
		var agents []string
		srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			agents = append(agents, r.UserAgent())
			w.Header().Set("Content-Type", "application/json")
			_, _ = io.WriteString(w, `{"kind":"PartialObjectMetadata","apiVersion":"meta.k8s.io/v1","metadata":{"name":"a","namespace":"ns","uid":"u1","resourceVersion":"1"}}`)
		}))
		c, err := newClients(&rest.Config{Host: srv.URL, UserAgent: want}, Options{})
		if err != nil {
			t.Fatal(err)
		}
		cm := &unstructured.Unstructured{Object: map[string]any{"apiVersion": "v1", "kind": "ConfigMap", "metadata": map[string]any{"name": "a", "namespace": "ns"}}}
		gvr := schema.GroupVersionResource{Version: "v1", Resource: "configmaps"}
		if _, err := c.meta.create(context.Background(), gvr, cm, ""); err != nil {
			t.Fatal(err)
		}
		if _, err := c.meta.updateStatus(context.Background(), gvr, cm, ""); err != nil {
			t.Fatal(err)
		}
		_, _ = c.dynamic.Resource(gvr).Namespace("ns").Get(context.Background(), "a", metav1.GetOptions{})
		srv.Close()
		if want == "" {
			want = rest.DefaultKubernetesUserAgent()
		}
		if len(agents) != 3 {
			t.Fatalf("requests seen: %d, want 3", len(agents))
		}
		for i, a := range agents {
			if a != want {
				t.Errorf("request %d's User-Agent is %q, want %q", i, a, want)
			}
		}
	}
}
