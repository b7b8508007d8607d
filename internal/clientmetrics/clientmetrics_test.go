package clientmetrics

import (
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
	dto "github.com/prometheus/client_model/go"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
)

// apiServer answers /version like a Kubernetes API server.
func apiServer(t *testing.T) *httptest.Server {
	t.Helper()
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path != "/version" {
			http.NotFound(w, r)
			return
		}
		w.Header().Set("Content-Type", "application/json")
		_, _ = io.WriteString(w, `{"major":"1","minor":"34","gitVersion":"v1.34.0"}`)
	}))
	t.Cleanup(srv.Close)
	return srv
}

func askVersion(t *testing.T, host string) {
	t.Helper()
	kube, err := kubernetes.NewForConfig(&rest.Config{Host: host})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := kube.Discovery().ServerVersion(); err != nil {
		t.Fatal(err)
	}
}

func TestRegisterServesRESTClientMetrics(t *testing.T) {
	srv := apiServer(t)
	host := strings.TrimPrefix(srv.URL, "http://")
	a, b := prometheus.NewPedanticRegistry(), prometheus.NewPedanticRegistry()
	unregisterA, err := Register(a)
	if err != nil {
		t.Fatal(err)
	}
	unregisterB, err := Register(b)
	if err != nil {
		t.Fatal(err)
	}
	defer unregisterB()
	if _, err := Register(a); err == nil {
		t.Error("registering twice with one registry did not fail")
	}
	askVersion(t, srv.URL)

	want := fmt.Sprintf(`
# HELP rest_client_requests_total Number of HTTP requests, partitioned by status code, method, and host.
# TYPE rest_client_requests_total counter
rest_client_requests_total{code="200",host=%q,method="GET"} 1
`, host)
	for name, reg := range map[string]*prometheus.Registry{"a": a, "b": b} {
		if err := testutil.GatherAndCompare(reg, strings.NewReader(want), "rest_client_requests_total"); err != nil {
			t.Errorf("registry %s: %v", name, err)
		}
		if n := sampleCount(t, reg, "rest_client_request_duration_seconds", host); n != 1 {
			t.Errorf("registry %s: request duration samples for %s = %d, want 1", name, host, n)
		}
	}

	unregisterA()
	askVersion(t, srv.URL)
	if n, err := testutil.GatherAndCount(a); err != nil || n != 0 {
		t.Errorf("registry a after unregistering: %d series, %v; want none", n, err)
	}
	if got := requestsTo(t, b, host); got != 2 {
		t.Errorf("registry b counted %v requests, want 2", got)
	}
}

// requestsTo is the value of rest_client_requests_total for host.
func requestsTo(t *testing.T, reg prometheus.Gatherer, host string) float64 {
	t.Helper()
	if m := series(t, reg, "rest_client_requests_total", host); m != nil {
		return m.GetCounter().GetValue()
	}
	return 0
}

// sampleCount is the number of samples of histogram name for host.
func sampleCount(t *testing.T, reg prometheus.Gatherer, name, host string) uint64 {
	t.Helper()
	if m := series(t, reg, name, host); m != nil {
		return m.GetHistogram().GetSampleCount()
	}
	return 0
}

// series is the series of family name whose host label is host, or nil.
func series(t *testing.T, reg prometheus.Gatherer, name, host string) *dto.Metric {
	t.Helper()
	families, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	for _, f := range families {
		if f.GetName() != name {
			continue
		}
		for _, m := range f.GetMetric() {
			for _, l := range m.GetLabel() {
				if l.GetName() == "host" && l.GetValue() == host {
					return m
				}
			}
		}
	}
	return nil
}
