//go:build integration

package engine

import (
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	dto "github.com/prometheus/client_model/go"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/klog/v2"
	"sigs.k8s.io/yaml"

	"github.com/metalambda/metalambda/internal/kubetest"
	"github.com/metalambda/metalambda/internal/local/cluster"
)

var env *kubetest.Env

// TestMain runs the package on one control plane. ENGINE_TEST_V=<n> raises the engine's
// log verbosity (klog -v) when debugging a test.
func TestMain(m *testing.M) {
	if v := os.Getenv("ENGINE_TEST_V"); v != "" {
		fs := flag.NewFlagSet("klog", flag.ExitOnError)
		klog.InitFlags(fs)
		_ = fs.Set("v", v)
	}
	kubetest.Main(m, &env, cluster.Defaults())
}

const testGroup = "test.metalambda.dev"

var (
	parentsGVR  = schema.GroupVersionResource{Group: testGroup, Version: "v1", Resource: "parents"}
	nostatusGVR = schema.GroupVersionResource{Group: testGroup, Version: "v1", Resource: "nostatuses"}
	podsGVR     = schema.GroupVersionResource{Version: "v1", Resource: "pods"}
	ccGVR       = compositeGVR
	dcGVR       = decoratorGVR
)

// setup installs the project's CRDs and the test parents' CRDs (the kit installs
// each once per package).
func setup(t *testing.T) {
	t.Helper()
	env.InstallCRDs(t)
	nostatus := kubetest.SchemalessCRD(testGroup, "Nostatus", "nostatuses", "nostatus")
	nostatus.Spec.Versions[0].Subresources = nil // its status is an ordinary field
	env.InstallCRDs(t, kubetest.SchemalessCRD(testGroup, "Parent", "parents", "parent"), nostatus)
}

// engineUnderTest is a Manager serving only the controller objects labelled for one
// test, so tests can run their own engines side by side.
type engineUnderTest struct {
	mgr      *Manager
	registry *prometheus.Registry
	label    string
}

const engineLabel = "metalambda.dev/test-engine"

func startEngine(t *testing.T, ns string, tweak ...func(*Options)) *engineUnderTest {
	t.Helper()
	opts := Defaults()
	opts.Workers = 2
	opts.DiscoveryInterval = time.Second
	opts.TargetSelector = labels.SelectorFromSet(labels.Set{engineLabel: ns})
	for _, f := range tweak {
		f(&opts)
	}
	reg := prometheus.NewRegistry()
	mgr, err := New(env.Config, opts, reg)
	if err != nil {
		t.Fatal(err)
	}
	logger := klog.Background().WithValues("test", t.Name())
	kubetest.Run(t, "the engine", func(ctx context.Context) error { return mgr.Run(klog.NewContext(ctx, logger)) },
		func(context.Context) (bool, error) { return mgr.Ready(), nil })
	return &engineUnderTest{mgr: mgr, registry: reg, label: ns}
}

// writes sums the engine's API requests that change something.
func (e *engineUnderTest) writes(t *testing.T) float64 {
	t.Helper()
	return e.requests(t, func(verb string) bool {
		switch verb {
		case "get", "list", "watch":
			return false
		}
		return true
	})
}

// gets sums the engine's uncached reads of single objects (discovery excluded).
func (e *engineUnderTest) gets(t *testing.T) float64 {
	return e.requests(t, func(verb string) bool { return verb == "get" })
}

// syncs is the engine's count of the parent syncs of controller with result
// (metalambda_engine_syncs_total).
func (e *engineUnderTest) syncs(t *testing.T, controller, result string) float64 {
	t.Helper()
	return e.counterSum(t, "metalambda_engine_syncs_total", func(m *dto.Metric) bool {
		return labelValue(m, "controller") == controller && labelValue(m, "result") == result
	})
}

func (e *engineUnderTest) requests(t *testing.T, count func(verb string) bool) float64 {
	t.Helper()
	return e.counterSum(t, "metalambda_engine_api_requests_total", func(m *dto.Metric) bool {
		return count(labelValue(m, "verb")) && !notStored[labelValue(m, "resource")]
	})
}

// counterSum sums the series of the counter name that match.
func (e *engineUnderTest) counterSum(t *testing.T, name string, match func(*dto.Metric) bool) float64 {
	t.Helper()
	families, err := e.registry.Gather()
	if err != nil {
		t.Fatal(err)
	}
	var sum float64
	for _, f := range families {
		if f.GetName() != name {
			continue
		}
		for _, m := range f.GetMetric() {
			if match(m) {
				sum += m.GetCounter().GetValue()
			}
		}
	}
	return sum
}

// notStored are the resources whose requests the counts leave out: events, discovery,
// and the access reviews (a create that stores nothing: the engine asks, at start,
// whether it may watch the namespaced controllers' kinds).
var notStored = map[string]bool{"events": true, "discovery": true, "selfsubjectaccessreviews": true, "subjectaccessreviews": true}

func labelValue(m *dto.Metric, name string) string {
	for _, l := range m.GetLabel() {
		if l.GetName() == name {
			return l.GetValue()
		}
	}
	return ""
}

// hookServer is an in-process webhook whose behaviour each test sets.
type hookServer struct {
	*httptest.Server
	mu       sync.Mutex
	respond  func(req map[string]any) (int, any)
	requests []map[string]any
	calls    atomic.Int64
}

func newHookServer(t *testing.T, respond func(req map[string]any) (int, any)) *hookServer {
	h := &hookServer{respond: respond}
	h.Server = httptest.NewServer(http.HandlerFunc(h.serve))
	t.Cleanup(h.Close)
	return h
}

func (h *hookServer) serve(w http.ResponseWriter, r *http.Request) {
	body, _ := io.ReadAll(r.Body)
	var req map[string]any
	if err := json.Unmarshal(body, &req); err != nil {
		http.Error(w, err.Error(), http.StatusBadRequest)
		return
	}
	h.mu.Lock()
	h.requests = append(h.requests, req)
	respond := h.respond
	h.mu.Unlock()
	h.calls.Add(1)
	code, resp := respond(req)
	if after, ok := resp.(retryAfterHeader); ok {
		w.Header().Set("Retry-After", string(after))
		w.WriteHeader(code)
		return
	}
	if raw, ok := resp.(string); ok {
		w.WriteHeader(code)
		_, _ = io.WriteString(w, raw)
		return
	}
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(code)
	_ = json.NewEncoder(w).Encode(resp)
}

// retryAfterHeader, returned by a test hook, answers with this Retry-After header.
type retryAfterHeader string

func (h *hookServer) set(respond func(req map[string]any) (int, any)) {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.respond = respond
}

func (h *hookServer) last() map[string]any {
	h.mu.Lock()
	defer h.mu.Unlock()
	if len(h.requests) == 0 {
		return nil
	}
	return h.requests[len(h.requests)-1]
}

// create creates an object from YAML (with %s placeholders filled by args).
func create(t *testing.T, gvr schema.GroupVersionResource, ns, manifest string, args ...any) *unstructured.Unstructured {
	t.Helper()
	obj := &unstructured.Unstructured{}
	if err := yaml.Unmarshal([]byte(fmt.Sprintf(manifest, args...)), &obj.Object); err != nil {
		t.Fatalf("bad test manifest: %v", err)
	}
	if gvr.Group == testGroup {
		// Test parents carry their test's label: every test's controller selects
		// only its own parents, though parents of all tests share one CRD.
		l := obj.GetLabels()
		if l == nil {
			l = map[string]string{}
		}
		l[engineLabel] = ns
		obj.SetLabels(l)
	}
	return env.Create(t, gvr, ns, obj)
}

func configMap(name string, data map[string]any, labels map[string]any) map[string]any {
	meta := map[string]any{"name": name}
	if labels != nil {
		meta["labels"] = labels
	}
	return map[string]any{"apiVersion": "v1", "kind": "ConfigMap", "metadata": meta, "data": data}
}

func field(obj map[string]any, path ...string) any {
	v, _, _ := unstructured.NestedFieldNoCopy(obj, path...)
	return v
}
