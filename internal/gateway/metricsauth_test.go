package gateway

import (
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
)

// TestMetricsNeedAuthorization: /metrics, whose series name every tenant's
// functions, answers only a token whose user may get the path /metrics.
func TestMetricsNeedAuthorization(t *testing.T) {
	api := newReviewAPI(t)
	api.Refused["get /metrics"] = true
	g := &Gateway{auth: newAuthorizer(t, api)}
	metrics := g.metricsAuth(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		_, _ = w.Write([]byte(`gateway_function_invocation_total{function_name="f.team",code="200"} 1`))
	}))
	for _, tt := range []struct {
		name, token string
		want        int
		says        string
	}{
		{"no token", "", 401, "bearer token is required"},
		{"a token the API refuses", "nonsense", 401, "does not accept"},
		{"a user without the grant", viewerToken, 403, "metalambda-metrics-reader"},
		{"a user allowed", goodToken, 200, "function_name"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			req := httptest.NewRequest(http.MethodGet, "/metrics", nil)
			if tt.token != "" {
				req.Header.Set("Authorization", "Bearer "+tt.token)
			}
			w := httptest.NewRecorder()
			metrics.ServeHTTP(w, req)
			if w.Code != tt.want || !strings.Contains(w.Body.String(), tt.says) {
				t.Errorf("%d %s, want %d saying %q", w.Code, w.Body, tt.want, tt.says)
			}
		})
	}
}
