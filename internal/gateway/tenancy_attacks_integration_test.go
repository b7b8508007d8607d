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

// TestTenantServiceTurnedExternalNameIsNotCalled: a tenant's hook is a Service of its
// own namespace, checked when the controller starts; the tenant then turns it into
// an ExternalName Service, whose DNS name sends the engine's call to any host it
// names. The controller's spec is unchanged, so nothing rebuilds it: the check must
// run before every call, and the call must not be sent.
func TestTenantServiceTurnedExternalNameIsNotCalled(t *testing.T) {
	g := startGateway(t)
	env.InstallCRDs(t, kubetest.SchemalessCRD(tenantParents.Group, "Greeting", "greetings", "greeting"))
	ns := tenant(t, g)
	ctx := kubetest.Context(t)
	var reached atomic.Int32
	hookServer := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		reached.Add(1)
		_, _ = w.Write([]byte(`{"status":{"ok":true},"children":[]}`))
	}))
	t.Cleanup(hookServer.Close)
	svc := &corev1.Service{ObjectMeta: metav1.ObjectMeta{Name: "hook"}, Spec: corev1.ServiceSpec{Ports: []corev1.ServicePort{{Port: 80}}}}
	if _, err := env.Kube.CoreV1().Services(ns).Create(ctx, svc, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	// Cluster DNS stands in: the name resolves to the server whatever the type,
	// as an ExternalName's CNAME would resolve to the host it names.
	startTenantEngine(t, ns, g.url, func(o *engine.Options) {
		o.ResolveService = func(ref v1alpha1.ServiceReference) (string, bool) {
			return hookServer.URL, ref.Name == "hook" && ref.Namespace == ns
		}
	})
	tenantRole(t, ns)
	createNCC(t, ns, "svc", ns, map[string]any{"service": map[string]any{"name": "hook"}})
	waitReady(t, ns, "svc", "True", "Running")
	if err := createGreeting(ctx, ns, "before", map[string]any{"who": "me"}); err != nil {
		t.Fatal(err)
	}
	kubetest.Eventually(t, 30*time.Second, "the hook is called while the Service is a ClusterIP one", func(context.Context) (bool, error) {
		return reached.Load() > 0, nil
	})

	current, err := env.Kube.CoreV1().Services(ns).Get(ctx, "hook", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	current.Spec = corev1.ServiceSpec{Type: corev1.ServiceTypeExternalName, ExternalName: "metadata.inside.example"}
	if _, err := env.Kube.CoreV1().Services(ns).Update(ctx, current, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	calls := reached.Load()
	if err := createGreeting(ctx, ns, "after", map[string]any{"who": "me"}); err != nil {
		t.Fatal(err)
	}
	var message string
	kubetest.Eventually(t, 30*time.Second, "the new parent gets a SyncError event", func(context.Context) (bool, error) {
		for _, e := range env.Events(t, ns, "Greeting", "after") {
			if e.Reason == "SyncError" {
				message = e.Message
				return true, nil
			}
		}
		return false, nil
	})
	t.Logf("SyncError: %s", message)
	if !strings.Contains(message, "ExternalName") {
		t.Errorf("the event does not name the ExternalName Service: %s", message)
	}
	// Syncs of either parent after the switch (the new one, resyncs of the old)
	// must not reach the server.
	if n := reached.Load(); n != calls {
		t.Errorf("the engine called the ExternalName Service's target %d times", n-calls)
	}
}
