package ingress

import (
	"errors"
	"net/http"
	"net/http/httptest"
	"net/url"
	"testing"

	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	networkingv1 "k8s.io/api/networking/v1"
)

func TestNormalizePath(t *testing.T) {
	tests := []struct {
		raw, want string
		refused   bool
	}{
		{raw: "/", want: "/"},
		{raw: "", want: "/"},
		{raw: "/public/x", want: "/public/x"},
		{raw: "/public/x/", want: "/public/x/"},
		{raw: "/public/../admin", want: "/admin"},
		{raw: "/public/./x", want: "/public/x"},
		{raw: "/public/.", want: "/public"},
		{raw: "/public/..", want: "/"},
		{raw: "/../../etc/passwd", want: "/etc/passwd"},
		{raw: "//public///x//", want: "/public/x/"},
		{raw: "/public/%2e%2e/admin", want: "/admin"},
		{raw: "/public/%2E%2e/admin", want: "/admin"},
		{raw: "/public/.%2e/admin", want: "/admin"},
		{raw: "/public/a%20b", want: "/public/a b"},
		{raw: "/public/%41", want: "/public/A"},
		{raw: "/public/..%2fadmin", refused: true},
		{raw: "/public%2F..%2Fadmin", refused: true},
		{raw: "/public/..%5cadmin", refused: true},
		{raw: "/public/..\\admin", refused: true},
		{raw: "/public/%00", refused: true},
	}
	for _, tt := range tests {
		t.Run(tt.raw, func(t *testing.T) {
			u, err := url.ParseRequestURI(tt.raw) // as the HTTP server parses a request target
			if tt.raw == "" {
				u, err = &url.URL{}, nil
			}
			if err != nil {
				t.Fatal(err)
			}
			got, err := normalizePath(u)
			if tt.refused {
				if !errors.Is(err, errPathRefused) {
					t.Errorf("normalizePath(%q) = %q, %v; want refused", tt.raw, got, err)
				}
				return
			}
			if err != nil || got != tt.want {
				t.Errorf("normalizePath(%q) = %q, %v; want %q", tt.raw, got, err, tt.want)
			}
		})
	}
}

// TestServeHTTPNormalizesPaths proves a rule for /public cannot be used to reach what
// only another rule (or none) serves, and that the backend gets the path that matched.
func TestServeHTTPNormalizesPaths(t *testing.T) {
	dial := startBackends(t, map[string]string{"10.0.0.1:8080": "public", "10.0.0.2:8080": "admin"})
	w := world{
		ingresses: []*networkingv1.Ingress{
			newIngress("ing", rule("app.example.com", prefix("/public", "public"), exact("/admin", "admin"))),
		},
		services: []*corev1.Service{newService("public"), newService("admin")},
		slices: []*discoveryv1.EndpointSlice{
			newSlice("public-1", "public", ready("10.0.0.1")),
			newSlice("admin-1", "admin", ready("10.0.0.2")),
		},
	}
	r := newTestRouter(t, nil, func(o *Options) { o.Dial = dial })
	r.table.Store(buildTable(w, "", nil))
	srv := httptest.NewServer(r)
	t.Cleanup(srv.Close)

	tests := []struct {
		path          string
		code          int
		backend, sent string
	}{
		{"/public/../admin", http.StatusOK, "admin", "/admin"},
		{"/public/%2e%2e/admin", http.StatusOK, "admin", "/admin"},
		{"/public//docs/./a", http.StatusOK, "public", "/public/docs/a"},
		{"/public/a%20b/", http.StatusOK, "public", "/public/a b/"},
		{"/public/../secret", http.StatusNotFound, "", ""},
		{"/public/..%2fadmin", http.StatusBadRequest, "", ""},
	}
	for _, tt := range tests {
		t.Run(tt.path, func(t *testing.T) {
			resp, err := get(t.Context(), srv.URL+tt.path, "app.example.com")
			if err != nil {
				t.Fatal(err)
			}
			if resp.code != tt.code || resp.echo.Backend != tt.backend || resp.echo.Path != tt.sent || resp.echo.RawPath != "" {
				t.Errorf("GET %s: %d backend %q path %q raw %q (%q); want %d backend %q path %q",
					tt.path, resp.code, resp.echo.Backend, resp.echo.Path, resp.echo.RawPath, resp.body, tt.code, tt.backend, tt.sent)
			}
		})
	}
}
