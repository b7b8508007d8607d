//go:build integration

package gateway

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	authorizationv1 "k8s.io/api/authorization/v1"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"

	"github.com/metalambda/metalambda/internal/apis/metacontroller/v1alpha1"
	"github.com/metalambda/metalambda/internal/engine"
	"github.com/metalambda/metalambda/internal/hookapi"
	"github.com/metalambda/metalambda/internal/kubetest"
)

var (
	ndcGVR        = schema.GroupVersionResource{Group: "metalambda.dev", Version: "v1alpha1", Resource: "namespaceddecoratorcontrollers"}
	configMapsGVR = corev1.SchemeGroupVersion.WithResource("configmaps")
)

// hookCall is one request a tenant's hook server received.
type hookCall struct {
	path, namespace, name string
	finalizing            bool
}

// hookServer is a tenant's hook, served in the test and reached by the engine as
// the Service hooks of namespace, which the engine resolves to it. It records every
// call; answer gives the response to one.
type hookServer struct {
	url   string
	mu    sync.Mutex
	calls []hookCall
}

func startHookServer(t *testing.T, answer func(path string, object map[string]any, finalizing bool) any) *hookServer {
	t.Helper()
	h := &hookServer{}
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		var req struct {
			Parent     map[string]any `json:"parent"`
			Object     map[string]any `json:"object"`
			Finalizing bool           `json:"finalizing"`
		}
		if err := json.NewDecoder(r.Body).Decode(&req); err != nil {
			http.Error(w, err.Error(), http.StatusBadRequest)
			return
		}
		obj := req.Object
		if obj == nil {
			obj = req.Parent
		}
		meta := &unstructured.Unstructured{Object: obj}
		h.mu.Lock()
		h.calls = append(h.calls, hookCall{path: r.URL.Path, namespace: meta.GetNamespace(), name: meta.GetName(), finalizing: req.Finalizing})
		h.mu.Unlock()
		w.Header().Set("Content-Type", "application/json")
		_ = json.NewEncoder(w).Encode(answer(r.URL.Path, obj, req.Finalizing))
	}))
	t.Cleanup(srv.Close)
	h.url = srv.URL
	return h
}

// called lists the calls that match.
func (h *hookServer) called(match func(hookCall) bool) []hookCall {
	h.mu.Lock()
	defer h.mu.Unlock()
	var out []hookCall
	for _, c := range h.calls {
		if match(c) {
			out = append(out, c)
		}
	}
	return out
}

// resolveHooks is the engine's ResolveService for a tenant whose Service "hooks"
// in namespace is h; other Services fall back to cluster DNS, which does not resolve.
func (h *hookServer) resolveHooks(namespace string) func(*engine.Options) {
	return func(o *engine.Options) {
		o.ResolveService = func(ref v1alpha1.ServiceReference) (string, bool) {
			return h.url, ref.Name == "hooks" && ref.Namespace == namespace
		}
	}
}

// hooksService creates the Service "hooks" of ns the tenant's controllers name.
func hooksService(t *testing.T, ns string) {
	t.Helper()
	svc := &corev1.Service{ObjectMeta: metav1.ObjectMeta{Name: "hooks"}, Spec: corev1.ServiceSpec{Ports: []corev1.ServicePort{{Port: 80}}}}
	if _, err := env.Kube.CoreV1().Services(ns).Create(kubetest.Context(t), svc, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
}

func hooksWebhook(path string) map[string]any {
	return map[string]any{"webhook": map[string]any{"service": map[string]any{"name": "hooks"}, "path": path}}
}

// createNDC creates a namespaced decorator of the ConfigMaps labelled decorate=yes,
// with attachments of the given resource, as ServiceAccount ctl.
func createNDC(t *testing.T, ns, name, label, attachments string, hooks map[string]any) {
	t.Helper()
	obj := &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": "metalambda.dev/v1alpha1", "kind": "NamespacedDecoratorController",
		"metadata": map[string]any{"name": name, "labels": map[string]any{"test": label}},
		"spec": map[string]any{
			"serviceAccountName": "ctl",
			"resources": []any{map[string]any{
				"apiVersion": "v1", "resource": "configmaps",
				"labelSelector": map[string]any{"matchLabels": map[string]any{"decorate": "yes"}},
			}},
			"attachments": []any{map[string]any{"apiVersion": "v1", "resource": attachments, "updateStrategy": map[string]any{"method": "InPlace"}}},
			"hooks":       hooks,
		},
	}}
	env.Create(t, ndcGVR, ns, obj)
}

func createConfigMap(t *testing.T, ns, name string, labels, data map[string]string) {
	t.Helper()
	cm := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: name, Labels: labels}, Data: data}
	if _, err := env.Kube.CoreV1().ConfigMaps(ns).Create(kubetest.Context(t), cm, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
}

// patchConfigMap merge-patches ConfigMap ns/name.
func patchConfigMap(t *testing.T, ns, name, patch string) {
	t.Helper()
	_, err := env.Kube.CoreV1().ConfigMaps(ns).Patch(kubetest.Context(t), name, "application/merge-patch+json", []byte(patch), metav1.PatchOptions{})
	if err != nil {
		t.Fatal(err)
	}
}

// noteHook is a decorator's hook: a ConfigMap NAME-note with the target's data.who,
// and the label decorated=yes on the target; finalizing, neither, and finalized.
func noteHook(obj map[string]any, finalizing bool) any {
	if finalizing {
		return hookapi.DecoratorResponse{Labels: map[string]*string{"decorated": nil}, Attachments: []hookapi.Object{}, Finalized: true}
	}
	who, _, _ := unstructured.NestedString(obj, "data", "who")
	name, _, _ := unstructured.NestedString(obj, "metadata", "name")
	yes := "yes"
	return hookapi.DecoratorResponse{
		Labels: map[string]*string{"decorated": &yes},
		Attachments: []hookapi.Object{{
			"apiVersion": "v1", "kind": "ConfigMap",
			"metadata": map[string]any{"name": name + "-note"},
			"data":     map[string]any{"who": who},
		}},
	}
}

// TestTenantDecorator: a NamespacedDecoratorController of tenant A, running as A's
// ServiceAccount, attaches a ConfigMap to each labelled ConfigMap of A, keeps it
// converged, and on a target that stops matching calls the finalize hook, which
// removes the attachment, the label and the finalizer, as upstream's decorators do.
// A decorator with attachments its ServiceAccount may read but not write is
// Ready=False MissingRights naming the grant, and touches nothing. A labelled
// ConfigMap of tenant B is never shown to A's hook nor touched.
func TestTenantDecorator(t *testing.T) {
	env.InstallCRDs(t)
	a, b := env.Namespace(t), env.Namespace(t)
	for _, ns := range []string{a, b} {
		env.ServiceAccount(t, ns, "ctl")
		createConfigMap(t, ns, "p", map[string]string{"decorate": "yes"}, map[string]string{"who": ns})
	}
	hooks := startHookServer(t, func(path string, obj map[string]any, finalizing bool) any {
		if path == "/secrets" {
			t.Errorf("the hook of a controller that lacks rights was called for %v", obj["metadata"])
		}
		return noteHook(obj, finalizing)
	})
	hooksService(t, a)
	accountRole(t, a, "ctl",
		rbacv1.PolicyRule{APIGroups: []string{""}, Resources: []string{"configmaps"}, Verbs: []string{"get", "list", "watch", "create", "patch", "update", "delete"}},
		rbacv1.PolicyRule{APIGroups: []string{""}, Resources: []string{"secrets"}, Verbs: []string{"get", "list", "watch"}},
		rbacv1.PolicyRule{APIGroups: []string{""}, Resources: []string{"services"}, Verbs: []string{"get"}},
	)
	startTenantEngine(t, a, "http://gateway.invalid", hooks.resolveHooks(a))
	createNDC(t, a, "note", a, "configmaps", map[string]any{"sync": hooksWebhook("/sync"), "finalize": hooksWebhook("/finalize")})
	createNDC(t, a, "secrets", a, "secrets", map[string]any{"sync": hooksWebhook("/secrets")})

	obj := env.WaitFor(t, "the secrets decorator is Ready=False MissingRights", ndcGVR, a, "secrets", func(o *unstructured.Unstructured) error {
		return readyIs(o, "False", "MissingRights")
	})
	want := fmt.Sprintf(`ServiceAccount %s/ctl may not create, patch, delete secrets in %s: grant create, patch, delete on secrets ("") in namespace %s`, a, a, a)
	if got := readyMessage(obj); got != want {
		t.Errorf("message = %q\nwant      %q", got, want)
	}
	env.WaitFor(t, "the note decorator is Running", ndcGVR, a, "note", func(o *unstructured.Unstructured) error {
		return readyIs(o, "True", "Running")
	})
	noteFinalizer := "metalambda.dev/namespaceddecoratorcontroller-note"
	env.WaitFor(t, "the target is decorated", configMapsGVR, a, "p", func(o *unstructured.Unstructured) error {
		if o.GetLabels()["decorated"] != "yes" || !slices.Equal(o.GetFinalizers(), []string{noteFinalizer}) {
			return fmt.Errorf("labels %v, finalizers %v", o.GetLabels(), o.GetFinalizers())
		}
		return nil
	})
	p := env.MustGet(t, configMapsGVR, a, "p")
	note := env.WaitFor(t, "the attachment", configMapsGVR, a, "p-note", func(o *unstructured.Unstructured) error {
		if who, _, _ := unstructured.NestedString(o.Object, "data", "who"); who != a {
			return fmt.Errorf("data = %v", o.Object["data"])
		}
		return nil
	})
	if ref := metav1.GetControllerOf(note); ref == nil || ref.UID != p.GetUID() {
		t.Errorf("the attachment's controller = %v, want the target %s", ref, p.GetUID())
	}
	if got := note.GetAnnotations()[engine.DecoratorAnnotation]; got != a+"/note" {
		t.Errorf("the attachment's %s = %q, want %q", engine.DecoratorAnnotation, got, a+"/note")
	}

	// Converged: a change of the target reaches its attachment.
	patchConfigMap(t, a, "p", `{"data": {"who": "changed"}}`)
	waitConfigMap(t, a, "p-note", "changed")

	// A target that stops matching is finalized: the hook is called with
	// finalizing, its answer applied, and the finalizer released.
	patchConfigMap(t, a, "p", `{"metadata": {"labels": {"decorate": null}}}`)
	env.WaitGone(t, "the attachment, removed by the finalize hook's answer", configMapsGVR, a, "p-note")
	env.WaitFor(t, "the target, released", configMapsGVR, a, "p", func(o *unstructured.Unstructured) error {
		if len(o.GetFinalizers()) > 0 || o.GetLabels()["decorated"] != "" {
			return fmt.Errorf("labels %v, finalizers %v", o.GetLabels(), o.GetFinalizers())
		}
		return nil
	})
	if calls := hooks.called(func(c hookCall) bool { return c.path == "/finalize" && c.finalizing && c.name == "p" }); len(calls) == 0 {
		t.Error("the finalize hook was not called for the target that stopped matching")
	}

	// Nothing of B, and nothing of the controller that may not run.
	if calls := hooks.called(func(c hookCall) bool { return c.namespace != a }); len(calls) > 0 {
		t.Errorf("A's hook was shown objects of other namespaces: %v", calls)
	}
	other := env.MustGet(t, configMapsGVR, b, "p")
	if len(other.GetFinalizers()) > 0 || len(other.GetLabels()) != 1 || len(other.GetAnnotations()) > 0 {
		t.Errorf("B's ConfigMap was touched: labels %v, annotations %v, finalizers %v", other.GetLabels(), other.GetAnnotations(), other.GetFinalizers())
	}
	ctx := kubetest.Context(t)
	if _, err := env.Kube.CoreV1().ConfigMaps(b).Get(ctx, "p-note", metav1.GetOptions{}); !apierrors.IsNotFound(err) {
		t.Errorf("an attachment in B: err = %v, want NotFound", err)
	}
	if secrets, err := env.Kube.CoreV1().Secrets(a).List(ctx, metav1.ListOptions{}); err != nil || len(secrets.Items) > 0 {
		t.Errorf("Secrets of A: %v, %v; want none", secrets, err)
	}
}

// greetingFinalizer is the finalizer of the namespaced composite controller "fin".
const greetingFinalizer = "metalambda.dev/namespacedcompositecontroller-fin"

// TestTenantFinalizer: a namespaced controller with a finalize hook. Deleting a parent
// calls the hook until it answers finalized; then the engine, as the ServiceAccount,
// removes the finalizer and the parent goes. When the ServiceAccount has lost the
// right to patch its parents, the finalizer stays, the parent's event names the
// refusal of the ServiceAccount's request, and the controller is Ready=False
// MissingRights naming the grant; granted again, it releases the parent. A controller
// deleted while so stopped releases its parents once the ServiceAccount may again.
func TestTenantFinalizer(t *testing.T) {
	env.InstallCRDs(t)
	env.InstallCRDs(t, kubetest.SchemalessCRD(tenantParents.Group, "Greeting", "greetings", "greeting"))
	ns := env.Namespace(t)
	env.ServiceAccount(t, ns, "ctl")
	tenantRole(t, ns)
	var finalized atomic.Bool
	hooks := startHookServer(t, func(path string, obj map[string]any, finalizing bool) any {
		if finalizing {
			// Until finalized is set: not yet, and ask again in a second.
			return hookapi.CompositeResponse{Children: []hookapi.Object{}, Finalized: finalized.Load(), ResyncAfterSeconds: 1}
		}
		name, _, _ := unstructured.NestedString(obj, "metadata", "name")
		who, _, _ := unstructured.NestedString(obj, "spec", "who")
		return hookapi.CompositeResponse{Status: map[string]any{"done": true}, Children: []hookapi.Object{{
			"apiVersion": "v1", "kind": "ConfigMap", "metadata": map[string]any{"name": name}, "data": map[string]any{"who": who},
		}}}
	})
	hooksService(t, ns)
	startTenantEngine(t, ns, "http://gateway.invalid", hooks.resolveHooks(ns))
	createNCC(t, ns, "fin", ns, hooksWebhook("/sync")["webhook"].(map[string]any), func(spec map[string]any) {
		spec["hooks"].(map[string]any)["finalize"] = hooksWebhook("/finalize")
	})
	waitReady(t, ns, "fin", "True", "Running")
	ctx := kubetest.Context(t)
	for _, name := range []string{"first", "second"} {
		if err := createGreeting(ctx, ns, name, map[string]any{"who": name}); err != nil {
			t.Fatal(err)
		}
		waitConfigMap(t, ns, name, name)
		env.WaitFor(t, "the parent carries the finalizer", tenantParents, ns, name, func(o *unstructured.Unstructured) error {
			if !slices.Contains(o.GetFinalizers(), greetingFinalizer) {
				return fmt.Errorf("finalizers %v", o.GetFinalizers())
			}
			return nil
		})
	}

	// The finalizer holds the parent while the hook answers finalized: false.
	deleteGreeting(t, ns, "first")
	waitFinalizeCalls(t, hooks, ns, "first", 2)
	env.WaitFor(t, "the parent, held by its finalizer", tenantParents, ns, "first", func(o *unstructured.Unstructured) error {
		if o.GetDeletionTimestamp() == nil || !slices.Contains(o.GetFinalizers(), greetingFinalizer) {
			return fmt.Errorf("deletionTimestamp %v, finalizers %v", o.GetDeletionTimestamp(), o.GetFinalizers())
		}
		return nil
	})
	finalized.Store(true)
	env.WaitGone(t, "the finalized parent", tenantParents, ns, "first")

	// The ServiceAccount loses patch on greetings: the finalizer cannot go.
	revokePatch := func() {
		accountRole(t, ns, "ctl",
			rbacv1.PolicyRule{APIGroups: []string{tenantParents.Group}, Resources: []string{"greetings"}, Verbs: []string{"get", "list", "watch"}},
			rbacv1.PolicyRule{APIGroups: []string{tenantParents.Group}, Resources: []string{"greetings/status"}, Verbs: []string{"update"}},
			rbacv1.PolicyRule{APIGroups: []string{""}, Resources: []string{"configmaps"}, Verbs: []string{"get", "list", "watch", "create", "patch", "delete"}},
			rbacv1.PolicyRule{APIGroups: []string{""}, Resources: []string{"services"}, Verbs: []string{"get"}},
		)
		waitDenied(t, ns, "ctl", "patch", tenantParents)
	}
	revokePatch()
	deleteGreeting(t, ns, "second")
	obj := waitReady(t, ns, "fin", "False", "MissingRights")
	want := fmt.Sprintf(`ServiceAccount %s/ctl may not patch greetings in %s: grant patch on greetings (%q) in namespace %s`, ns, ns, tenantParents.Group, ns)
	if got := nccReadyMessage(obj); got != want {
		t.Errorf("message = %q\nwant      %q", got, want)
	}
	kubetest.Eventually(t, 30*time.Second, "a SyncError on the parent names the ServiceAccount's refused patch", func(context.Context) (bool, error) {
		for _, e := range env.Events(t, ns, "Greeting", "second") {
			if e.Reason == "SyncError" && strings.Contains(e.Message, "system:serviceaccount:"+ns+":ctl") && strings.Contains(e.Message, "patch") {
				return true, nil
			}
		}
		return false, nil
	})
	if p := env.MustGet(t, tenantParents, ns, "second"); !slices.Contains(p.GetFinalizers(), greetingFinalizer) {
		t.Errorf("the finalizer went without the right to patch the parent: %v", p.GetFinalizers())
	}
	tenantRole(t, ns) // the grant, again
	waitReady(t, ns, "fin", "True", "Running")
	env.WaitGone(t, "the parent, released once the grant is back", tenantParents, ns, "second")

	// The controller deleted while it is stopped by MissingRights: its finalizer is
	// released as the ServiceAccount as soon as the ServiceAccount may patch again.
	if err := createGreeting(ctx, ns, "third", map[string]any{"who": "third"}); err != nil {
		t.Fatal(err)
	}
	env.WaitFor(t, "the parent carries the finalizer", tenantParents, ns, "third", func(o *unstructured.Unstructured) error {
		if !slices.Contains(o.GetFinalizers(), greetingFinalizer) {
			return fmt.Errorf("finalizers %v", o.GetFinalizers())
		}
		return nil
	})
	revokePatch()
	deleteGreeting(t, ns, "third")
	waitReady(t, ns, "fin", "False", "MissingRights")
	if err := env.Dynamic.Resource(nccGVR).Namespace(ns).Delete(ctx, "fin", metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	env.WaitGone(t, "the controller", nccGVR, ns, "fin")
	if p := env.MustGet(t, tenantParents, ns, "third"); !slices.Contains(p.GetFinalizers(), greetingFinalizer) {
		t.Errorf("the finalizer went without the right to patch the parent: %v", p.GetFinalizers())
	}
	tenantRole(t, ns)
	env.WaitGone(t, "the parent of the deleted controller, released once the grant is back", tenantParents, ns, "third")
}

func deleteGreeting(t *testing.T, ns, name string) {
	t.Helper()
	if err := env.Dynamic.Resource(tenantParents).Namespace(ns).Delete(kubetest.Context(t), name, metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
}

// waitFinalizeCalls waits until the finalize hook was called n times for ns/name.
func waitFinalizeCalls(t *testing.T, hooks *hookServer, ns, name string, n int) {
	t.Helper()
	kubetest.Eventually(t, 30*time.Second, fmt.Sprintf("%d finalize calls for %s/%s", n, ns, name), func(context.Context) (bool, error) {
		calls := hooks.called(func(c hookCall) bool {
			return c.path == "/finalize" && c.finalizing && c.namespace == ns && c.name == name
		})
		return len(calls) >= n, fmt.Errorf("%d calls", len(calls))
	})
}

// waitDenied waits until the API server's authorizer refuses verb on gvr to
// ServiceAccount ns/account (a Role's change takes a moment to reach it).
func waitDenied(t *testing.T, ns, account, verb string, gvr schema.GroupVersionResource) {
	t.Helper()
	kubetest.Eventually(t, 30*time.Second, fmt.Sprintf("%s/%s may not %s %s", ns, account, verb, gvr.Resource), func(ctx context.Context) (bool, error) {
		review, err := env.Kube.AuthorizationV1().SubjectAccessReviews().Create(ctx, &authorizationv1.SubjectAccessReview{Spec: authorizationv1.SubjectAccessReviewSpec{
			User:               "system:serviceaccount:" + ns + ":" + account,
			Groups:             []string{"system:serviceaccounts", "system:serviceaccounts:" + ns, "system:authenticated"},
			ResourceAttributes: &authorizationv1.ResourceAttributes{Namespace: ns, Verb: verb, Group: gvr.Group, Resource: gvr.Resource},
		}}, metav1.CreateOptions{})
		if err != nil {
			return false, err
		}
		return !review.Status.Allowed, nil
	})
}
