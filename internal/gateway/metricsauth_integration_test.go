//go:build integration

package gateway

import (
	"net/http"
	"testing"
)

// TestMetricsReaderRole: the shipped ClusterRole metalambda-metrics-reader lets an
// account read /metrics; an account that may use every Function of its namespace
// but has no such grant may not, nor may a caller without a token.
func TestMetricsReaderRole(t *testing.T) {
	applyShippedRBAC(t)
	g := startGateway(t)
	ns := env.Namespace(t)
	reader := serviceAccount(t, ns, "scraper", true, clusterRole("metalambda-metrics-reader"))
	developer := serviceAccount(t, ns, "dev", false, clusterRole("metalambda-function-developer"))
	g.waitStatus(t, "GET", "/metrics", reader, nil, http.StatusOK)
	if r := g.do(t, "GET", "/metrics", developer, nil); r.status != http.StatusForbidden {
		t.Errorf("a developer without the grant: %d %.200s, want 403", r.status, r.raw)
	}
	if r := g.do(t, "GET", "/metrics", "", nil); r.status != http.StatusUnauthorized {
		t.Errorf("no token: %d %.200s, want 401", r.status, r.raw)
	}
}
