//go:build integration

package gateway

import (
	"context"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime/schema"

	"github.com/metalambda/metalambda/internal/apis/metacontroller/v1alpha1"
	"github.com/metalambda/metalambda/internal/engine"
	"github.com/metalambda/metalambda/internal/kubetest"
)

var (
	tenantParents = schema.GroupVersionResource{Group: "tenancy.test.metalambda.dev", Version: "v1", Resource: "greetings"}
	nccGVR        = schema.GroupVersionResource{Group: "metalambda.dev", Version: "v1alpha1", Resource: "namespacedcompositecontrollers"}
)

// tenantSync answers one ConfigMap per parent, or, for a parent with spec.secret,
// a Secret the controller does not declare.
const tenantSync = `function sync(request) {
  var p = request.parent;
  if (p.spec.secret) {
    return {children: [{apiVersion: "v1", kind: "Secret", metadata: {name: p.metadata.name}, stringData: {stolen: "yes"}}]};
  }
  return {status: {done: true}, children: [{apiVersion: "v1", kind: "ConfigMap", metadata: {name: p.metadata.name}, data: {who: p.spec.who}}]};
}`

// startTenantEngine runs an engine that serves the namespaced controllers labelled
// test=<label>, whose tenants may call Functions of the gateway at gatewayURL.
func startTenantEngine(t *testing.T, label, gatewayURL string, tweak ...func(*engine.Options)) {
	t.Helper()
	o := engine.Defaults()
	o.TargetSelector = labels.SelectorFromSet(labels.Set{"test": label})
	o.TenantGateways = []string{gatewayURL}
	o.RightsRecheckInterval = time.Second
	for _, f := range tweak {
		f(&o)
	}
	mgr, err := engine.New(env.Config, o, prometheus.NewRegistry())
	if err != nil {
		t.Fatal(err)
	}
	kubetest.Run(t, "the engine", mgr.Run, func(context.Context) (bool, error) { return mgr.Ready(), nil })
}

// tenantRole lets ServiceAccount ns/ctl run a controller of greetings with
// ConfigMap children, but for the verbs of configmaps left out.
func tenantRole(t *testing.T, ns string, without ...string) {
	t.Helper()
	cmVerbs := []string{}
	for _, v := range []string{"get", "list", "watch", "create", "patch", "delete"} {
		if !contains(without, v) {
			cmVerbs = append(cmVerbs, v)
		}
	}
	accountRole(t, ns, "ctl",
		rbacv1.PolicyRule{APIGroups: []string{tenantParents.Group}, Resources: []string{"greetings"}, Verbs: []string{"get", "list", "watch", "patch"}},
		rbacv1.PolicyRule{APIGroups: []string{tenantParents.Group}, Resources: []string{"greetings/status"}, Verbs: []string{"update"}},
		rbacv1.PolicyRule{APIGroups: []string{""}, Resources: []string{"configmaps"}, Verbs: cmVerbs},
		// A hook's Service is read as the tenant, to refuse ExternalName ones.
		rbacv1.PolicyRule{APIGroups: []string{""}, Resources: []string{"services"}, Verbs: []string{"get"}},
	)
}

// accountRole gives ServiceAccount ns/account exactly rules, in a Role of its name
// bound to it; called again, it replaces the Role's rules (a grant, a revocation).
func accountRole(t *testing.T, ns, account string, rules ...rbacv1.PolicyRule) {
	t.Helper()
	ctx := kubetest.Context(t)
	role := &rbacv1.Role{ObjectMeta: metav1.ObjectMeta{Name: account}, Rules: rules}
	if _, err := env.Kube.RbacV1().Roles(ns).Create(ctx, role, metav1.CreateOptions{}); apierrors.IsAlreadyExists(err) {
		if _, err = env.Kube.RbacV1().Roles(ns).Update(ctx, role, metav1.UpdateOptions{}); err != nil {
			t.Fatal(err)
		}
		return
	} else if err != nil {
		t.Fatal(err)
	}
	binding := &rbacv1.RoleBinding{
		ObjectMeta: metav1.ObjectMeta{Name: account},
		RoleRef:    rbacv1.RoleRef{APIGroup: "rbac.authorization.k8s.io", Kind: "Role", Name: account},
		Subjects:   []rbacv1.Subject{{Kind: "ServiceAccount", Name: account, Namespace: ns}},
	}
	if _, err := env.Kube.RbacV1().RoleBindings(ns).Create(ctx, binding, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
}

func contains(list []string, s string) bool {
	for _, x := range list {
		if x == s {
			return true
		}
	}
	return false
}

// tenant is a namespace with a ServiceAccount ctl and the greeter Function.
func tenant(t *testing.T, g *testGateway) string {
	t.Helper()
	ns := env.Namespace(t)
	env.ServiceAccount(t, ns, "ctl")
	createFunction(t, ns, "greeter", "javascript", tenantSync, 0)
	waitFunction(t, ns, "greeter", func(o *unstructured.Unstructured) error { return readyIs(o, "True", "Compiled") })
	return ns
}

// createNCC creates a namespaced controller of greetings with ConfigMap children,
// whose sync hook is webhook, as ServiceAccount ctl; tweak changes its spec.
func createNCC(t *testing.T, ns, name, label string, webhook map[string]any, tweak ...func(spec map[string]any)) {
	t.Helper()
	obj := &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": "metalambda.dev/v1alpha1", "kind": "NamespacedCompositeController",
		"metadata": map[string]any{"name": name, "labels": map[string]any{"test": label}},
		"spec": map[string]any{
			"serviceAccountName": "ctl",
			"generateSelector":   true,
			"parentResource":     map[string]any{"apiVersion": tenantParents.GroupVersion().String(), "resource": "greetings"},
			"childResources":     []any{map[string]any{"apiVersion": "v1", "resource": "configmaps", "updateStrategy": map[string]any{"method": "InPlace"}}},
			"hooks":              map[string]any{"sync": map[string]any{"webhook": webhook}},
		},
	}}
	for _, f := range tweak {
		f(obj.Object["spec"].(map[string]any))
	}
	env.Create(t, nccGVR, ns, obj)
}

func createGreeting(ctx context.Context, ns, name string, spec map[string]any) error {
	parent := &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": tenantParents.GroupVersion().String(), "kind": "Greeting",
		"metadata": map[string]any{"name": name}, "spec": spec,
	}}
	_, err := env.Dynamic.Resource(tenantParents).Namespace(ns).Create(ctx, parent, metav1.CreateOptions{})
	return err
}

func waitReady(t *testing.T, ns, name, status, reason string) *unstructured.Unstructured {
	t.Helper()
	return env.WaitFor(t, fmt.Sprintf("%s/%s is Ready=%s %s", ns, name, status, reason), nccGVR, ns, name, func(o *unstructured.Unstructured) error {
		return readyIs(o, status, reason)
	})
}

func nccReadyMessage(o *unstructured.Unstructured) string {
	conds, _, _ := unstructured.NestedSlice(o.Object, "status", "conditions")
	for _, c := range conds {
		if m := c.(map[string]any); m["type"] == "Ready" {
			msg, _ := m["message"].(string)
			return msg
		}
	}
	return ""
}

func waitConfigMap(t *testing.T, ns, name, who string) {
	t.Helper()
	kubetest.Eventually(t, 30*time.Second, "ConfigMap "+ns+"/"+name+" is converged", func(ctx context.Context) (bool, error) {
		cm, err := env.Kube.CoreV1().ConfigMaps(ns).Get(ctx, name, metav1.GetOptions{})
		if err != nil {
			return false, err
		}
		return cm.Data["who"] == who, fmt.Errorf("data = %v", cm.Data)
	})
}

// TestTenantControllersConvergeAsTheirServiceAccounts: two tenants, each with a
// namespaced controller whose sync hook is a JavaScript Function of its namespace,
// each converge their own parents; a hook that answers a child of a type the
// controller does not declare gets nothing written.
func TestTenantControllersConvergeAsTheirServiceAccounts(t *testing.T) {
	g := startGateway(t)
	env.InstallCRDs(t, kubetest.SchemalessCRD(tenantParents.Group, "Greeting", "greetings", "greeting"))
	a, b := tenant(t, g), tenant(t, g)
	startTenantEngine(t, a, g.url)
	ctx := kubetest.Context(t)
	for _, ns := range []string{a, b} {
		tenantRole(t, ns)
		createNCC(t, ns, "greeter", a, map[string]any{"url": g.url + "/hooks/" + ns + "/greeter"})
		if err := createGreeting(ctx, ns, "g", map[string]any{"who": ns}); err != nil {
			t.Fatal(err)
		}
	}
	for _, ns := range []string{a, b} {
		waitReady(t, ns, "greeter", "True", "Running")
		waitConfigMap(t, ns, "g", ns)
		env.WaitFor(t, "the parent's status is written", tenantParents, ns, "g", func(o *unstructured.Unstructured) error {
			if done, _, _ := unstructured.NestedBool(o.Object, "status", "done"); !done {
				return fmt.Errorf("status = %v", o.Object["status"])
			}
			return nil
		})
	}
	// A Secret answered by the hook is refused: the controller declares ConfigMaps.
	if err := createGreeting(ctx, a, "thief", map[string]any{"secret": true}); err != nil {
		t.Fatal(err)
	}
	kubetest.Eventually(t, 30*time.Second, "the parent gets a SyncError event", func(context.Context) (bool, error) {
		for _, e := range env.Events(t, a, "Greeting", "thief") {
			if e.Reason == "SyncError" {
				return true, nil
			}
		}
		return false, nil
	})
	if _, err := env.Kube.CoreV1().Secrets(a).Get(ctx, "thief", metav1.GetOptions{}); !apierrors.IsNotFound(err) {
		t.Errorf("the Secret the hook answered: err = %v, want NotFound", err)
	}
}

// TestTenantControllerMissingRights: a ServiceAccount without create on configmaps
// gets Ready=False MissingRights whose message is the grant, an event, and no
// child; once its admin grants it, the controller runs.
func TestTenantControllerMissingRights(t *testing.T) {
	g := startGateway(t)
	env.InstallCRDs(t, kubetest.SchemalessCRD(tenantParents.Group, "Greeting", "greetings", "greeting"))
	ns := tenant(t, g)
	startTenantEngine(t, ns, g.url)
	ctx := kubetest.Context(t)
	tenantRole(t, ns, "create")
	if err := createGreeting(ctx, ns, "g", map[string]any{"who": "me"}); err != nil {
		t.Fatal(err)
	}
	createNCC(t, ns, "greeter", ns, map[string]any{"url": g.url + "/hooks/" + ns + "/greeter"})
	obj := waitReady(t, ns, "greeter", "False", "MissingRights")
	want := fmt.Sprintf(`ServiceAccount %s/ctl may not create configmaps in %s: grant create on configmaps ("") in namespace %s`, ns, ns, ns)
	if got := nccReadyMessage(obj); got != want {
		t.Errorf("message = %q\nwant      %q", got, want)
	}
	kubetest.Eventually(t, 30*time.Second, "a MissingRights event on the controller", func(context.Context) (bool, error) {
		for _, e := range env.Events(t, ns, "NamespacedCompositeController", "greeter") {
			if e.Reason == "MissingRights" && strings.Contains(e.Message, want) {
				return true, nil
			}
		}
		return false, nil
	})
	p := env.MustGet(t, tenantParents, ns, "g")
	if len(p.GetFinalizers()) > 0 || p.Object["status"] != nil {
		t.Errorf("the controller touched its parent before it could run: %v", p.Object)
	}
	tenantRole(t, ns) // the grant
	waitReady(t, ns, "greeter", "True", "Running")
	waitConfigMap(t, ns, "g", "me")
}

// TestTenantHooksStayInTheirNamespace: the attacks of a tenant that would make the
// engine send requests from its own network position (SSRF), and the controllers
// that would reach beyond their namespace, are refused with a condition.
func TestTenantHooksStayInTheirNamespace(t *testing.T) {
	g := startGateway(t)
	env.InstallCRDs(t, kubetest.SchemalessCRD(tenantParents.Group, "Greeting", "greetings", "greeting"))
	a, b := tenant(t, g), tenant(t, g)
	startTenantEngine(t, a, g.url)
	tenantRole(t, a)
	ctx := kubetest.Context(t)
	metrics := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		t.Errorf("the engine called %s for a tenant", r.URL)
	}))
	t.Cleanup(metrics.Close)
	external := &corev1.Service{ObjectMeta: metav1.ObjectMeta{Name: "apiserver"}, Spec: corev1.ServiceSpec{Type: corev1.ServiceTypeExternalName, ExternalName: "kubernetes.default.svc"}}
	if _, err := env.Kube.CoreV1().Services(a).Create(ctx, external, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	for name, webhook := range map[string]map[string]any{
		"apiserver":       {"url": env.Config.Host + "/api/v1/secrets"},
		"metrics":         {"url": metrics.URL + "/metrics"},
		"other-function":  {"url": g.url + "/hooks/" + b + "/greeter"},
		"gateway-api":     {"url": g.url + "/v1/namespaces/" + b + "/functions"},
		"other-service":   {"service": map[string]any{"name": "greeter", "namespace": b}},
		"externalname":    {"service": map[string]any{"name": "apiserver"}},
		"dot-segments":    {"url": g.url + "/hooks/" + a + "/../" + b + "/greeter"},
		"escaped-segment": {"url": g.url + "/hooks/" + a + "/%2e%2e%2f" + b},
	} {
		createNCC(t, a, name, a, webhook)
	}
	for _, name := range []string{"apiserver", "metrics", "other-function", "gateway-api", "other-service", "externalname", "dot-segments", "escaped-segment"} {
		obj := waitReady(t, a, name, "False", "HookNotAllowed")
		t.Logf("%s: %s", name, nccReadyMessage(obj))
	}
	// Cluster-scoped children are refused too.
	obj := &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": "metalambda.dev/v1alpha1", "kind": "NamespacedCompositeController",
		"metadata": map[string]any{"name": "namespaces", "labels": map[string]any{"test": a}},
		"spec": map[string]any{
			"serviceAccountName": "ctl", "generateSelector": true,
			"parentResource": map[string]any{"apiVersion": tenantParents.GroupVersion().String(), "resource": "greetings"},
			"childResources": []any{map[string]any{"apiVersion": "v1", "resource": "namespaces"}},
			"hooks":          map[string]any{"sync": map[string]any{"webhook": map[string]any{"url": g.url + "/hooks/" + a + "/greeter"}}},
		},
	}}
	env.Create(t, nccGVR, a, obj)
	waitReady(t, a, "namespaces", "False", "ClusterScopedResource")
}

// TestTenantQuota: the namespace's controllers past --max-namespaced-controllers-
// per-namespace do not run until an older one goes.
func TestTenantQuota(t *testing.T) {
	g := startGateway(t)
	env.InstallCRDs(t, kubetest.SchemalessCRD(tenantParents.Group, "Greeting", "greetings", "greeting"))
	ns := tenant(t, g)
	startTenantEngine(t, ns, g.url, func(o *engine.Options) { o.MaxNamespacedControllersPerNamespace = 1 })
	tenantRole(t, ns)
	webhook := map[string]any{"url": g.url + "/hooks/" + ns + "/greeter"}
	createNCC(t, ns, "first", ns, webhook)
	waitReady(t, ns, "first", "True", "Running")
	createNCC(t, ns, "second", ns, webhook)
	waitReady(t, ns, "second", "False", "TooManyControllers")
	if err := env.Dynamic.Resource(nccGVR).Namespace(ns).Delete(kubetest.Context(t), "first", metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	waitReady(t, ns, "second", "True", "Running")
}

// TestTenantFairness: a tenant with 2,000 parents and a slow hook does not hold
// back another tenant's convergence. Each controller has its own queue and workers;
// each namespace its own bucket of syncs.
func TestTenantFairness(t *testing.T) {
	g := startGateway(t)
	env.InstallCRDs(t, kubetest.SchemalessCRD(tenantParents.Group, "Greeting", "greetings", "greeting"))
	busy, other := tenant(t, g), tenant(t, g)
	ctx := kubetest.Context(t)
	var calls sync.Map
	slow := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		time.Sleep(200 * time.Millisecond)
		calls.Store(r.URL.Path, true)
		w.Header().Set("Content-Type", "application/json")
		_, _ = w.Write([]byte(`{"status": {"done": true}}`))
	}))
	t.Cleanup(slow.Close)
	svc := &corev1.Service{ObjectMeta: metav1.ObjectMeta{Name: "slow"}, Spec: corev1.ServiceSpec{Ports: []corev1.ServicePort{{Port: 80}}}}
	if _, err := env.Kube.CoreV1().Services(busy).Create(ctx, svc, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	const parents = 2000
	var wg sync.WaitGroup
	errs := make(chan error, parents)
	for w := 0; w < 8; w++ {
		wg.Add(1)
		go func(w int) {
			defer wg.Done()
			for i := w; i < parents; i += 8 {
				if err := createGreeting(ctx, busy, fmt.Sprintf("p-%d", i), map[string]any{"who": "busy"}); err != nil {
					errs <- err
					return
				}
			}
		}(w)
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Fatal(err)
	}
	startTenantEngine(t, busy, g.url, func(o *engine.Options) {
		o.ResolveService = func(ref v1alpha1.ServiceReference) (string, bool) {
			return slow.URL, ref.Name == "slow" && ref.Namespace == busy
		}
	})
	tenantRole(t, busy)
	tenantRole(t, other)
	createNCC(t, busy, "slow", busy, map[string]any{"service": map[string]any{"name": "slow"}})
	waitReady(t, busy, "slow", "True", "Running")
	synced := func(ctx context.Context) (int, error) {
		list, err := env.Dynamic.Resource(tenantParents).Namespace(busy).List(ctx, metav1.ListOptions{})
		if err != nil {
			return 0, err
		}
		done := 0
		for _, p := range list.Items {
			if ok, _, _ := unstructured.NestedBool(p.Object, "status", "done"); ok {
				done++
			}
		}
		return done, nil
	}
	kubetest.Eventually(t, 60*time.Second, "the busy tenant works through its backlog", func(ctx context.Context) (bool, error) {
		n, err := synced(ctx)
		if err != nil {
			return false, err
		}
		return n >= 20, fmt.Errorf("%d parents synced", n)
	})
	// The other tenant's controller and parent arrive while the busy one works
	// through its backlog.
	createNCC(t, other, "greeter", busy, map[string]any{"url": g.url + "/hooks/" + other + "/greeter"})
	start := time.Now()
	if err := createGreeting(ctx, other, "g", map[string]any{"who": "other"}); err != nil {
		t.Fatal(err)
	}
	waitConfigMap(t, other, "g", "other")
	took := time.Since(start)
	done, err := synced(ctx)
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("the other tenant converged in %s while the busy one had synced %d of its %d parents", took, done, parents)
	if done > parents/2 {
		t.Fatalf("the busy tenant synced %d of %d parents first: the test shows nothing about fairness", done, parents)
	}
	// A generous bound: the other tenant's parent waits for no share of the
	// busy tenant's backlog, whose end is minutes away.
	if took > 10*time.Second {
		t.Errorf("the other tenant converged in %s behind the busy one's backlog", took)
	}
}
