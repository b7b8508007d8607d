//go:build integration

package gateway

import (
	"context"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/metalambda/metalambda/internal/apis/metacontroller/v1alpha1"
	"github.com/metalambda/metalambda/internal/engine"
	"github.com/metalambda/metalambda/internal/kubetest"
)

// TestTenantHookRedirectsAreNotFollowed: a tenant's hook, a Service of its own
// namespace (allowed), answers 307 with a Location anywhere it likes (the API
// server, the engine's ports, a cloud metadata address). The engine must not
// follow it: that would send the engine's request, from the engine's network
// position, where the hook policy refuses to, and quote the answer in the parent's
// events, which the tenant reads.
func TestTenantHookRedirectsAreNotFollowed(t *testing.T) {
	g := startGateway(t)
	env.InstallCRDs(t, kubetest.SchemalessCRD(tenantParents.Group, "Greeting", "greetings", "greeting"))
	ns := tenant(t, g)
	ctx := kubetest.Context(t)
	var reached atomic.Int32
	inside := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		reached.Add(1)
		t.Errorf("the engine followed the tenant's redirect to %s %s", r.Method, r.URL)
		w.WriteHeader(http.StatusForbidden)
		_, _ = w.Write([]byte("internal-secret-answer"))
	}))
	t.Cleanup(inside.Close)
	redirect := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		http.Redirect(w, r, inside.URL+"/latest/meta-data/iam/security-credentials/", http.StatusTemporaryRedirect)
	}))
	t.Cleanup(redirect.Close)
	svc := &corev1.Service{ObjectMeta: metav1.ObjectMeta{Name: "redirect"}, Spec: corev1.ServiceSpec{Ports: []corev1.ServicePort{{Port: 80}}}}
	if _, err := env.Kube.CoreV1().Services(ns).Create(ctx, svc, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	startTenantEngine(t, ns, g.url, func(o *engine.Options) {
		o.ResolveService = func(ref v1alpha1.ServiceReference) (string, bool) {
			return redirect.URL, ref.Name == "redirect" && ref.Namespace == ns
		}
	})
	tenantRole(t, ns)
	createNCC(t, ns, "redirect", ns, map[string]any{"service": map[string]any{"name": "redirect"}})
	waitReady(t, ns, "redirect", "True", "Running")
	if err := createGreeting(ctx, ns, "g", map[string]any{"who": "me"}); err != nil {
		t.Fatal(err)
	}
	var message string
	kubetest.Eventually(t, 30*time.Second, "the parent gets a SyncError event", func(context.Context) (bool, error) {
		for _, e := range env.Events(t, ns, "Greeting", "g") {
			if e.Reason == "SyncError" {
				message = e.Message
				return true, nil
			}
		}
		return false, nil
	})
	t.Logf("SyncError: %s", message)
	if reached.Load() > 0 || strings.Contains(message, "internal-secret-answer") {
		t.Errorf("the redirect was followed: %d requests reached the inside server; event: %s", reached.Load(), message)
	}
	if !strings.Contains(message, "307") {
		t.Errorf("the event does not say the hook answered a redirect: %s", message)
	}
}
