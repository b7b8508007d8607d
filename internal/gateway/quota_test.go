package gateway

import (
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/go-chi/chi/v5"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	dynamicfake "k8s.io/client-go/dynamic/fake"

	"github.com/metalambda/metalambda/internal/httpapi"
)

func functionObject(ns, name string, created time.Time) *unstructured.Unstructured {
	u := &unstructured.Unstructured{}
	u.SetAPIVersion(FunctionsGVR.GroupVersion().String())
	u.SetKind("Function")
	u.SetNamespace(ns)
	u.SetName(name)
	u.SetCreationTimestamp(metav1.NewTime(created))
	return u
}

// TestFunctionsPerNamespace: past the limit, the API refuses a new name in the
// namespace with a 403 naming the namespace, the limit and the flag (an existing
// name, and other namespaces, still pass); and of a namespace's Functions the oldest
// are served, ties broken by name, the rest refused.
func TestFunctionsPerNamespace(t *testing.T) {
	s := newStore(dynamicfake.NewSimpleDynamicClient(runtime.NewScheme()), nil, nil, "http://gw", 1, newMetrics(nil, nil, nil))
	s.maxPerNamespace = 2
	t0 := time.Unix(1000, 0)
	objs := map[string]*unstructured.Unstructured{
		"a": functionObject("team", "a", t0),
		"c": functionObject("team", "c", t0.Add(time.Second)),
		"b": functionObject("team", "b", t0.Add(time.Second)),
		"d": functionObject("team", "d", t0.Add(2*time.Second)),
		"x": functionObject("other", "x", t0.Add(3*time.Second)),
	}
	for _, o := range objs {
		if err := s.informer.GetIndexer().Add(o); err != nil {
			t.Fatal(err)
		}
	}
	for name, want := range map[string]bool{"a": false, "b": false, "c": true, "d": true, "x": false} {
		if got := s.pastLimit(objs[name]); got != want {
			t.Errorf("pastLimit(%s) = %v, want %v", name, got, want)
		}
	}
	err := s.checkRoom("team", "e")
	ae, _ := err.(*httpapi.Error)
	if ae == nil || ae.Status != http.StatusForbidden || ae.Code != "too_many_functions" {
		t.Fatalf("a new function in a full namespace: %v, want 403 too_many_functions", err)
	}
	for _, want := range []string{`namespace "team"`, "has 2 functions", "--max-functions-per-namespace"} {
		if !strings.Contains(ae.Message, want) {
			t.Errorf("message %q does not contain %q", ae.Message, want)
		}
	}
	if err := s.checkRoom("team", "a"); err != nil {
		t.Errorf("replacing an existing function: %v", err)
	}
	if err := s.checkRoom("other", "y"); err != nil {
		t.Errorf("another namespace: %v", err)
	}
}

// TestCallsPerNamespaceAreCapped: with a namespace's calls at its limit, its
// functions' next call answers 429 naming the namespace and the flag, while another
// namespace's functions still run.
func TestCallsPerNamespaceAreCapped(t *testing.T) {
	g := &Gateway{calls: newCallLimiter(10), nsCalls: newCallLimiter(2)}
	entered, release := make(chan struct{}), make(chan struct{})
	r := chi.NewRouter()
	r.Post("/hooks/{namespace}/{name}", g.limitCalls(func(w http.ResponseWriter, r *http.Request) {
		if chi.URLParam(r, "namespace") == "busy" {
			entered <- struct{}{}
			<-release
		}
		w.WriteHeader(http.StatusOK)
	}))
	call := func(path string) *httptest.ResponseRecorder {
		w := httptest.NewRecorder()
		r.ServeHTTP(w, httptest.NewRequest(http.MethodPost, path, nil))
		return w
	}
	var wg sync.WaitGroup
	for _, fn := range []string{"f", "g"} {
		wg.Add(1)
		go func() { defer wg.Done(); call("/hooks/busy/" + fn) }()
		<-entered
	}
	w := call("/hooks/busy/h")
	if w.Code != http.StatusTooManyRequests || !strings.Contains(w.Body.String(), "--max-calls-per-namespace") || !strings.Contains(w.Body.String(), `namespace \"busy\"`) {
		t.Errorf("a third call in the namespace: %d %s, want 429 naming the namespace and the flag", w.Code, w.Body)
	}
	if w := call("/hooks/quiet/f"); w.Code != http.StatusOK {
		t.Errorf("another namespace: %d, want 200", w.Code)
	}
	close(release)
	wg.Wait()
	if len(g.nsCalls.busy) != 0 || len(g.calls.busy) != 0 {
		t.Errorf("the limiters still count %v and %v", g.nsCalls.busy, g.calls.busy)
	}
}
