package ingress

import (
	"net/http"
	"net/http/httptest"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	networkingv1 "k8s.io/api/networking/v1"
)

// TestServeHTTP drives the router over HTTP with a hand-built table: no cluster.
func TestServeHTTP(t *testing.T) {
	dial := startBackends(t, map[string]string{"10.0.0.1:8080": "a", "10.0.0.2:8080": "b"})
	w := world{
		ingresses: []*networkingv1.Ingress{newIngress("ing", rule("app.example.com",
			prefix("/", "web"), prefix("/down", "down"), prefix("/gone", "gone"), prefix("/broken", "broken"), prefix("/port", "web:grpc"),
		))},
		services: []*corev1.Service{newService("web"), newService("down"), newService("broken")},
		slices: []*discoveryv1.EndpointSlice{
			newSlice("web-1", "web", ready("10.0.0.1"), ready("10.0.0.2")),
			newSlice("down-1", "down", notReady("10.0.0.1")),
			newSlice("broken-1", "broken", ready("10.0.0.9")),
		},
	}
	reg := prometheus.NewRegistry()
	r := newTestRouter(t, nil, func(o *Options) { o.Dial, o.Registerer = dial, reg })
	srv := httptest.NewServer(r)
	t.Cleanup(srv.Close)
	ctx := t.Context()

	t.Run("before the caches synced", func(t *testing.T) {
		checkAnswer(t, srv.URL+"/", "app.example.com", response{code: http.StatusServiceUnavailable, body: "the ingress router has not synced with the cluster yet"})
	})
	r.table.Store(buildTable(w, "", nil))

	tests := []struct {
		name, host, path string
		want             response
	}{
		{"unknown host", "nobody.example.com", "/x", response{code: 404, body: `no Ingress serves host "nobody.example.com" path "/x"`}},
		{"no ready endpoints", "app.example.com", "/down", response{code: 503, body: "backend ns/down:80 of Ingress ns/ing is unavailable: no ready endpoints"}},
		{"no such Service", "app.example.com", "/gone/x", response{code: 503, body: "backend ns/gone:80 of Ingress ns/ing is unavailable: no such Service"}},
		{"no such port", "app.example.com", "/port", response{code: 503, body: "backend ns/web:grpc of Ingress ns/ing is unavailable: port not found (the Service has ports http/80)"}},
		{"endpoint down", "app.example.com", "/broken", response{code: 502, body: "backend ns/broken:80: endpoint 10.0.0.9:8080 failed: dial tcp 10.0.0.9:8080: connection refused (no test server)"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) { checkAnswer(t, srv.URL+tt.path, tt.host, tt.want) })
	}

	t.Run("proxied round-robin with the Host header kept", func(t *testing.T) {
		var got []echo
		for range 4 {
			resp, err := get(ctx, srv.URL+"/api/v1", "App.Example.com:8443")
			if err != nil || resp.code != http.StatusOK {
				t.Fatalf("GET: %d %q %v", resp.code, resp.body, err)
			}
			got = append(got, resp.echo)
		}
		answer := func(backend string) echo {
			return echo{Backend: backend, Host: "App.Example.com:8443", Path: "/api/v1", ForwardedFor: "127.0.0.1", ForwardedHost: "App.Example.com:8443", ForwardedProto: "http"}
		}
		if diff := cmp.Diff([]echo{answer("a"), answer("b"), answer("a"), answer("b")}, got); diff != "" {
			t.Errorf("answers (-want +got):\n%s", diff)
		}
	})

	counts := map[string]float64{}
	for _, l := range [][2]string{{"", "503"}, {"", "404"}, {"app.example.com", "503"}, {"app.example.com", "502"}, {"app.example.com", "200"}} {
		counts[l[0]+" "+l[1]] = testutil.ToFloat64(r.metrics.requests.WithLabelValues(l[0], l[1]))
	}
	want := map[string]float64{" 503": 1, " 404": 1, "app.example.com 503": 3, "app.example.com 502": 1, "app.example.com 200": 4}
	if diff := cmp.Diff(want, counts); diff != "" {
		t.Errorf("metalambda_ingress_requests_total (-want +got):\n%s", diff)
	}
}

func checkAnswer(t *testing.T, url, host string, want response) {
	t.Helper()
	got, err := get(t.Context(), url, host)
	if err != nil {
		t.Fatal(err)
	}
	if got.code != want.code || got.body != want.body {
		t.Errorf("GET %s (Host %s): %d %q, want %d %q", url, host, got.code, got.body, want.code, want.body)
	}
}

func TestRequestHost(t *testing.T) {
	for in, want := range map[string]string{
		"example.com": "example.com", "Example.COM:8080": "example.com", "example.com.": "example.com",
		"10.0.0.1:80": "10.0.0.1", "[::1]:80": "::1", "[::1]": "::1", "": "",
	} {
		if got := requestHost(in); got != want {
			t.Errorf("requestHost(%q) = %q, want %q", in, got, want)
		}
	}
}
