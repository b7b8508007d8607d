//go:build integration

package gateway

import (
	"context"
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promhttp"
	rbacv1 "k8s.io/api/rbac/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/rest"

	"github.com/metalambda/metalambda/internal/kubetest"
	"github.com/metalambda/metalambda/internal/manifest"
)

// applyShippedRBAC applies deploy/gateway/rbac.yaml as it is shipped.
func applyShippedRBAC(t *testing.T) {
	t.Helper()
	data, err := os.ReadFile(filepath.Join("..", "..", "deploy", "gateway", "rbac.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	applier, err := manifest.NewApplier(env.Config, "gateway-test")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := applier.Apply(kubetest.Context(t), data); err != nil {
		t.Fatalf("deploy/gateway/rbac.yaml: %v", err)
	}
}

// serviceAccount creates a ServiceAccount in ns, binds it to each role (a ClusterRole of
// deploy/gateway/rbac.yaml or a Role of ns; clusterWide binds a ClusterRole across the
// cluster), and returns a token for it.
func serviceAccount(t *testing.T, ns, name string, clusterWide bool, roleRefs ...rbacv1.RoleRef) string {
	t.Helper()
	ctx := kubetest.Context(t)
	token := env.ServiceAccount(t, ns, name)
	subjects := []rbacv1.Subject{{Kind: "ServiceAccount", Name: name, Namespace: ns}}
	for _, ref := range roleRefs {
		meta := metav1.ObjectMeta{Name: name + "-" + ref.Name}
		var err error
		if clusterWide {
			meta.Name = ns + "-" + meta.Name
			_, err = env.Kube.RbacV1().ClusterRoleBindings().Create(ctx, &rbacv1.ClusterRoleBinding{ObjectMeta: meta, RoleRef: ref, Subjects: subjects}, metav1.CreateOptions{})
			t.Cleanup(func() {
				_ = env.Kube.RbacV1().ClusterRoleBindings().Delete(context.Background(), meta.Name, metav1.DeleteOptions{})
			})
		} else {
			_, err = env.Kube.RbacV1().RoleBindings(ns).Create(ctx, &rbacv1.RoleBinding{ObjectMeta: meta, RoleRef: ref, Subjects: subjects}, metav1.CreateOptions{})
		}
		if err != nil {
			t.Fatal(err)
		}
	}
	return token
}

func clusterRole(name string) rbacv1.RoleRef {
	return rbacv1.RoleRef{APIGroup: "rbac.authorization.k8s.io", Kind: "ClusterRole", Name: name}
}

// waitStatus repeats a request until it answers want: new RBAC bindings take a moment
// to reach the authorizer.
func (g *testGateway) waitStatus(t *testing.T, method, path, token string, body any, want int) reply {
	t.Helper()
	var r reply
	kubetest.Eventually(t, 30*time.Second, fmt.Sprintf("%s %s answers %d", method, path, want), func(context.Context) (bool, error) {
		r = g.do(t, method, path, token, body)
		return r.status == want, fmt.Errorf("%d %s", r.status, r.raw)
	})
	return r
}

// TestInvokeNeedsItsOwnVerb: a test call and the invocation history need the verb
// invoke on functions.metalambda.dev; get is not enough. The invoker ClusterRole of
// deploy/gateway/rbac.yaml grants it without any write.
func TestInvokeNeedsItsOwnVerb(t *testing.T) {
	applyShippedRBAC(t)
	g := startGateway(t, func(o *Options) { o.AuthCacheTTL = time.Millisecond })
	ns := env.Namespace(t)
	ctx := kubetest.Context(t)
	reader := &rbacv1.Role{ObjectMeta: metav1.ObjectMeta{Name: "reader"}, Rules: []rbacv1.PolicyRule{{APIGroups: []string{"metalambda.dev"}, Resources: []string{"functions"}, Verbs: []string{"get", "list", "watch"}}}}
	if _, err := env.Kube.RbacV1().Roles(ns).Create(ctx, reader, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	readerToken := serviceAccount(t, ns, "reader", false, rbacv1.RoleRef{APIGroup: "rbac.authorization.k8s.io", Kind: "Role", Name: "reader"})
	invokerToken := serviceAccount(t, ns, "invoker", false, clusterRole("metalambda-function-invoker"))
	createFunction(t, ns, "echo", "javascript", fmt.Sprintf(echoJS, "v1"), 0)
	g.waitHook(t, ns, "echo", "p-v1")
	base := "/v1/namespaces/" + ns + "/functions"

	g.waitStatus(t, "GET", base+"/echo", readerToken, nil, http.StatusOK)
	for _, path := range []string{base + "/echo/invoke", base + "/echo/invocations"} {
		method := "GET"
		if path == base+"/echo/invoke" {
			method = "POST"
		}
		if r := g.do(t, method, path, readerToken, hookRequest("q")); r.status != http.StatusForbidden || r.body["error"] != "forbidden" {
			t.Errorf("reader %s %s = %d %s, want 403", method, path, r.status, r.raw)
		}
	}
	g.waitStatus(t, "POST", base+"/echo/invoke", invokerToken, hookRequest("q"), http.StatusOK)
	if r := g.do(t, "GET", base+"/echo/invocations", invokerToken, nil); r.status != http.StatusOK {
		t.Errorf("invoker reading invocations = %d %s", r.status, r.raw)
	}
	body := map[string]any{"name": "other", "runtime": "javascript", "source": "function sync(r) { return {} }"}
	if r := g.do(t, "POST", base, invokerToken, body); r.status != http.StatusForbidden {
		t.Errorf("invoker creating a function = %d %s, want 403", r.status, r.raw)
	}
}

// TestGatewayWritesAsTheCaller runs the gateway under a ServiceAccount bound to the
// metalambda-gateway ClusterRole of deploy/gateway/rbac.yaml, which may not write
// Functions: a developer's create, update and delete through the API succeed because
// the gateway makes them as the developer; the gateway still loads the Function and
// writes its status with its own rights.
func TestGatewayWritesAsTheCaller(t *testing.T) {
	applyShippedRBAC(t)
	ns := env.Namespace(t)
	gatewayToken := serviceAccount(t, ns, "gateway", true, clusterRole("metalambda-gateway"))
	devToken := serviceAccount(t, ns, "dev", false, clusterRole("metalambda-function-developer"))
	cfg := env.ConfigFor(gatewayToken)
	g := startGatewayWith(t, cfg, func(o *Options) { o.AuthCacheTTL = time.Millisecond })
	base := "/v1/namespaces/" + ns + "/functions"
	fn := map[string]any{"name": "echo", "runtime": "javascript", "source": fmt.Sprintf(echoJS, "v1")}

	// The gateway's own account may not create Functions.
	probe := &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": "metalambda.dev/v1alpha1", "kind": "Function", "metadata": map[string]any{"name": "probe"}, "spec": map[string]any{"runtime": "javascript", "source": "x"},
	}}
	if _, err := dynamic.NewForConfigOrDie(cfg).Resource(FunctionsGVR).Namespace(ns).Create(kubetest.Context(t), probe, metav1.CreateOptions{}); !apierrors.IsForbidden(err) {
		t.Fatalf("the gateway's own account creating a Function: %v, want forbidden (else this test proves nothing)", err)
	}

	g.waitStatus(t, "POST", base, devToken, fn, http.StatusCreated)
	g.waitHook(t, ns, "echo", "p-v1")
	waitFunction(t, ns, "echo", func(o *unstructured.Unstructured) error { return readyIs(o, "True", "Compiled") })
	fn["source"] = fmt.Sprintf(echoJS, "v2")
	if r := g.do(t, "PUT", base+"/echo", devToken, fn); r.status != http.StatusOK {
		t.Fatalf("update as the developer = %d %s", r.status, r.raw)
	}
	g.waitHook(t, ns, "echo", "p-v2")
	if r := g.do(t, "POST", base+"/echo/invoke", devToken, hookRequest("q")); r.status != http.StatusOK {
		t.Errorf("invoke as the developer = %d %s", r.status, r.raw)
	}
	if r := g.do(t, "DELETE", base+"/echo", devToken, nil); r.status != http.StatusNoContent {
		t.Fatalf("delete as the developer = %d %s", r.status, r.raw)
	}
	// In another namespace the developer has no rights, and the gateway lends none.
	other := env.Namespace(t)
	if r := g.do(t, "POST", "/v1/namespaces/"+other+"/functions", devToken, fn); r.status != http.StatusForbidden {
		t.Errorf("create in a namespace the developer may not write = %d %s, want 403", r.status, r.raw)
	}
}

// TestFailedAuthenticationsAreHeldBack: past the burst, a client that keeps sending
// tokens the API refuses gets 429 with Retry-After; a working token still works.
func TestFailedAuthenticationsAreHeldBack(t *testing.T) {
	g := startGateway(t, func(o *Options) { o.FailedAuthBurst, o.FailedAuthRate = 3, 0.01 })
	ns := env.Namespace(t)
	base := "/v1/namespaces/" + ns + "/functions"
	if r := g.do(t, "GET", base, g.token, nil); r.status != http.StatusOK {
		t.Fatalf("admin list = %d %s", r.status, r.raw)
	}
	for i := range 3 {
		if r := g.do(t, "GET", base, fmt.Sprintf("random-%d", i), nil); r.status != http.StatusUnauthorized {
			t.Fatalf("random token %d = %d %s, want 401", i, r.status, r.raw)
		}
	}
	req, _ := http.NewRequest("GET", g.url+base, nil)
	req.Header.Set("Authorization", "Bearer random-again")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusTooManyRequests || resp.Header.Get("Retry-After") == "" {
		t.Errorf("random token past the burst = %d, Retry-After %q; want 429 with Retry-After", resp.StatusCode, resp.Header.Get("Retry-After"))
	}
	if r := g.do(t, "GET", base, g.token, nil); r.status != http.StatusOK {
		t.Errorf("admin list from the held-back address = %d %s", r.status, r.raw)
	}
}

// startGatewayWith runs a gateway for one test as the account cfg names.
func startGatewayWith(t *testing.T, cfg *rest.Config, tweak ...func(*Options)) *testGateway {
	t.Helper()
	env.InstallCRDs(t)
	srv := httptest.NewUnstartedServer(nil)
	url := "http://" + srv.Listener.Addr().String()
	reg := prometheus.NewRegistry()
	opts := Defaults()
	opts.PublicURL, opts.MaxBodyBytes = url, 1<<20
	// METALAMBDA_TEST_PYTHON_ZYGOTE=auto|off runs the package's gateways with
	// Python workers forked by a zygote where the sandbox starts one, or not.
	if z := os.Getenv("METALAMBDA_TEST_PYTHON_ZYGOTE"); z != "" {
		opts.Runtime.PythonZygote = z
	}
	for _, f := range tweak {
		f(&opts)
	}
	gw, err := New(cfg, opts, reg)
	if err != nil {
		t.Fatal(err)
	}
	kubetest.Run(t, "the gateway", func(ctx context.Context) error { gw.Run(ctx); return nil },
		func(context.Context) (bool, error) { return gw.Ready(), nil })
	srv.Config.Handler = gw.Handler(promhttp.HandlerFor(reg, promhttp.HandlerOpts{}))
	srv.Start()
	t.Cleanup(srv.Close) // before the gateway stops
	return &testGateway{gw: gw, url: url, token: env.Config.BearerToken, reg: reg}
}
