//go:build integration

package dashboard_test

import (
	"context"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"slices"
	"testing"
	"time"

	"github.com/chromedp/chromedp"
	rbacv1 "k8s.io/api/rbac/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"

	"github.com/metalambda/metalambda/internal/kubetest"
)

// TestSyncButtons: "Sync now" on a parent's page and "Sync all" on its controller's
// page have the engine call the hook at once, as the logged-in user; a user who may
// read the controller and its parents but not update them is refused, with the
// reason.
func TestSyncButtons(t *testing.T) {
	e := platformEnv(t)
	ns := e.Namespace(t)
	e.InstallCRDs(t, kubetest.SchemalessCRD("dashboard.metalambda.dev", "Widget", "widgets", "widget"))
	calls := make(chan hookCall, 100)
	hook := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		var req struct {
			Parent struct {
				Metadata struct{ Name string } `json:"metadata"`
			} `json:"parent"`
		}
		_ = json.NewDecoder(r.Body).Decode(&req)
		calls <- hookCall{name: req.Parent.Metadata.Name, at: time.Now()}
		_, _ = w.Write([]byte(`{"status": {"synced": true}, "children": []}`))
	}))
	t.Cleanup(hook.Close)
	ccGVR := schema.GroupVersionResource{Group: "metacontroller.k8s.io", Version: "v1alpha1", Resource: "compositecontrollers"}
	e.Create(t, ccGVR, "", &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": "metacontroller.k8s.io/v1alpha1", "kind": "CompositeController", "metadata": map[string]any{"name": ns},
		"spec": map[string]any{
			"generateSelector": true,
			"parentResource":   map[string]any{"apiVersion": "dashboard.metalambda.dev/v1", "resource": "widgets", "labelSelector": map[string]any{"matchLabels": map[string]any{"sync-test": ns}}},
			"hooks":            map[string]any{"sync": map[string]any{"webhook": map[string]any{"url": hook.URL + "/sync"}}},
		},
	}})
	t.Cleanup(func() { _ = e.Dynamic.Resource(ccGVR).Delete(context.Background(), ns, metav1.DeleteOptions{}) })
	widgets := schema.GroupVersionResource{Group: "dashboard.metalambda.dev", Version: "v1", Resource: "widgets"}
	for _, name := range []string{"w1", "w2"} {
		e.Create(t, widgets, ns, &unstructured.Unstructured{Object: map[string]any{
			"apiVersion": "dashboard.metalambda.dev/v1", "kind": "Widget", "metadata": map[string]any{"name": name, "labels": map[string]any{"sync-test": ns}},
		}})
	}
	waitCalls(t, calls, time.Time{}, time.Minute, "w1", "w2")

	ctx := newBrowser(t)
	login(t, ctx, e, e.adminToken(t))
	parentPage := e.URL + "controllers/CompositeController/" + ns + "/parents/" + ns + "/w1?resource=widgets"
	run(t, ctx, "open the parent", chromedp.Navigate(parentPage), chromedp.WaitVisible(chromedp.CSS(`[data-testid=sync-now]`)))
	start := time.Now()
	run(t, ctx, "sync now", chromedp.Click(chromedp.CSS(`[data-testid=sync-now]`)))
	waitCalls(t, calls, start, 5*time.Second, "w1")
	t.Logf("the hook was called %s after the click", time.Since(start))
	waitText(t, ctx, `[data-testid=sync-result]`, "Queued 1 parent", 5*time.Second)
	screenshot(t, ctx, "sync-now")

	run(t, ctx, "open the controller", chromedp.Navigate(e.URL+"controllers/CompositeController/"+ns), chromedp.WaitVisible(chromedp.CSS(`[data-testid=sync-all]`)))
	start = time.Now()
	run(t, ctx, "sync all", chromedp.Click(chromedp.CSS(`[data-testid=sync-all]`)))
	waitCalls(t, calls, start, 5*time.Second, "w1", "w2")
	waitText(t, ctx, `[data-testid=sync-result]`, "Queued 2 parents", 5*time.Second)

	// A reader: get and list on the controller, its parents and their events, no update.
	reader := e.ServiceAccount(t, ns, "reader")
	bindReader(t, e, ns, "reader")
	other := newBrowser(t)
	login(t, other, e, reader)
	run(t, other, "open the parent as a reader", chromedp.Navigate(parentPage), chromedp.WaitVisible(chromedp.CSS(`[data-testid=sync-now]`)))
	run(t, other, "sync now as a reader", chromedp.Click(chromedp.CSS(`[data-testid=sync-now]`)))
	waitText(t, other, `[data-testid=sync-result]`, "may not update widgets.dashboard.metalambda.dev w1", 10*time.Second)
	screenshot(t, other, "sync-refused")
}

// bindReader lets the ServiceAccount ns/name read the test's controller, widgets and
// events, and update nothing.
func bindReader(t *testing.T, e *env, ns, name string) {
	t.Helper()
	ctx, rbac := kubetest.Context(t), e.Kube.RbacV1()
	read := []string{"get", "list", "watch"}
	role := &rbacv1.ClusterRole{ObjectMeta: metav1.ObjectMeta{Name: ns + "-" + name}, Rules: []rbacv1.PolicyRule{
		{Verbs: read, APIGroups: []string{"metacontroller.k8s.io"}, Resources: []string{"compositecontrollers"}},
		{Verbs: read, APIGroups: []string{"dashboard.metalambda.dev"}, Resources: []string{"widgets"}},
		{Verbs: read, APIGroups: []string{""}, Resources: []string{"events"}},
	}}
	if _, err := rbac.ClusterRoles().Create(ctx, role, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = rbac.ClusterRoles().Delete(context.Background(), role.Name, metav1.DeleteOptions{}) })
	binding := &rbacv1.ClusterRoleBinding{ObjectMeta: metav1.ObjectMeta{Name: role.Name},
		RoleRef:  rbacv1.RoleRef{APIGroup: "rbac.authorization.k8s.io", Kind: "ClusterRole", Name: role.Name},
		Subjects: []rbacv1.Subject{{Kind: "ServiceAccount", Name: name, Namespace: ns}}}
	if _, err := rbac.ClusterRoleBindings().Create(ctx, binding, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = rbac.ClusterRoleBindings().Delete(context.Background(), role.Name, metav1.DeleteOptions{}) })
}

// hookCall is a call of the test's hook: the parent's name, and when it came.
type hookCall struct {
	name string
	at   time.Time
}

// waitCalls waits up to timeout for the hook to be called, after since, for every one
// of names.
func waitCalls(t *testing.T, calls <-chan hookCall, since time.Time, timeout time.Duration, names ...string) {
	t.Helper()
	deadline := time.After(timeout)
	for len(names) > 0 {
		select {
		case got := <-calls:
			if got.at.After(since) {
				names = slices.DeleteFunc(names, func(n string) bool { return n == got.name })
			}
		case <-deadline:
			t.Fatalf("the hook was not called for %v within %s", names, timeout)
		}
	}
}
