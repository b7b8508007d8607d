//go:build integration

package engine

import (
	"context"
	"errors"
	"fmt"
	"net/http/httptest"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	rbacv1 "k8s.io/api/rbac/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/types"

	"github.com/metalambda/metalambda/internal/engineapi"
	"github.com/metalambda/metalambda/internal/kubetest"
)

// secretHook answers a ConfigMap holding the parent's spec.value and a Secret holding
// a password, and blocks while gate is closed (a receive on it waits).
func secretHook(gate <-chan struct{}) func(req map[string]any) (int, any) {
	return func(req map[string]any) (int, any) {
		<-gate
		parent := req["parent"].(map[string]any)
		name := field(parent, "metadata", "name").(string)
		return 200, map[string]any{"children": []any{
			configMap(name+"-0", map[string]any{"value": field(parent, "spec", "value")}, nil),
			map[string]any{
				"apiVersion": "v1", "kind": "Secret", "metadata": map[string]any{"name": name + "-s"},
				"stringData": map[string]any{"password": "hunter2"},
			},
		}}
	}
}

// The engine's API on a real control plane: a viewer sees the controller, its calls
// with diffs and redacted bodies, and the parent's children in sync, then out of sync
// after a hand edit until the engine puts the child back; a ServiceAccount that may
// get the controller but not its parents sees the controller and nothing else; a bad
// token is refused.
func TestHookCallAPI(t *testing.T) {
	setup(t)
	ns := env.Namespace(t)
	e := startEngine(t, ns)
	handler, err := e.mgr.API(env.Kube)
	if err != nil {
		t.Fatal(err)
	}
	api := httptest.NewServer(handler)
	t.Cleanup(api.Close)
	client := &engineapi.Client{BaseURL: api.URL}

	open := make(chan struct{})
	close(open)
	hook := newHookServer(t, secretHook(open))
	create(t, ccGVR, "", `
apiVersion: metacontroller.k8s.io/v1alpha1
kind: CompositeController
metadata: {name: %[1]s, labels: {metalambda.dev/test-engine: %[1]s}}
spec:
  generateSelector: true
  parentResource: {apiVersion: test.metalambda.dev/v1, resource: parents, labelSelector: {matchLabels: {metalambda.dev/test-engine: %[1]s}}}
  childResources:
  - {apiVersion: v1, resource: configmaps, updateStrategy: {method: InPlace}}
  - {apiVersion: v1, resource: secrets, updateStrategy: {method: InPlace}}
  hooks:
    sync: {webhook: {url: "%[2]s/sync"}}
`, ns, hook.URL)
	create(t, parentsGVR, ns, "{apiVersion: test.metalambda.dev/v1, kind: Parent, metadata: {name: p}, spec: {value: one}}")
	env.WaitFor(t, "the hook's ConfigMap exists", configMapsGVR, ns, "p-0", hasValue("one"))
	updateParentValue(t, ns, "p", "two")
	env.WaitFor(t, "the ConfigMap follows the parent", configMapsGVR, ns, "p-0", hasValue("two"))

	viewer := apiServiceAccount(t, ns, "viewer", true)
	outsider := apiServiceAccount(t, ns, "outsider", false)
	ctx := kubetest.Context(t)

	t.Run("tokens", func(t *testing.T) {
		for _, token := range []string{"", "not-a-token"} {
			if _, err := client.Controllers(ctx, token); !errors.Is(err, engineapi.ErrUnauthorized) {
				t.Errorf("token %q: %v, want 401", token, err)
			}
		}
	})

	t.Run("viewer", func(t *testing.T) {
		summary := waitController(t, client, viewer, ns, func(s engineapi.ControllerSummary) bool { return s.Parents == 1 && len(s.Latency) > 0 })
		if !summary.Running || summary.Hooks["sync"] != hook.URL+"/sync" || summary.SyncErrorsLastHour != 0 {
			t.Errorf("summary of %s: running %t, hooks %v, sync errors in the last hour %d; want running, the sync hook, no error",
				summary.ControllerRef, summary.Running, summary.Hooks, summary.SyncErrorsLastHour)
		}
		calls := hookCalls(t, client, viewer, ns)
		if len(calls.Items) < 2 || !calls.HistoryEnabled || calls.LatestID < calls.Items[0].ID {
			t.Fatalf("calls %+v", calls)
		}
		newest := calls.Items[0]
		if newest.Controller.Name != ns || newest.Hook != "sync" || newest.Parent.Name != "p" || newest.Parent.UID == "" || newest.Status != 200 || newest.URL != hook.URL+"/sync" {
			t.Errorf("newest call %+v", newest)
		}
		changed := callWithDiff(calls.Items)
		if changed == nil {
			t.Fatalf("no call has a diff: %+v", calls.Items)
		}
		if !diffHas(changed.Diff, "-", `"value": "one"`) || !diffHas(changed.Diff, "+", `"value": "two"`) {
			t.Errorf("diff of call %d against %d:\n%s", changed.ID, changed.PreviousID, changed.Diff)
		}
		for _, c := range calls.Items {
			body := string(c.Request) + string(c.Response) + c.Diff
			if strings.Contains(body, "hunter2") || strings.Contains(body, "aHVudGVyMg==") {
				t.Errorf("call %d shows the Secret's password", c.ID)
			}
		}
		if !strings.Contains(string(newest.Response), `"password":"[redacted]"`) {
			t.Errorf("response not redacted as expected: %s", newest.Response)
		}
		later, err := client.HookCalls(ctx, viewer, engineapi.HookCallQuery{Since: calls.LatestID})
		if err != nil || len(later.Items) != 0 {
			t.Errorf("calls since the latest: %+v, %v", later, err)
		}

		detail := waitParent(t, client, viewer, ns, "p", "both children in sync", func(d *engineapi.ParentDetail) bool {
			return len(d.Children) == 2 && d.Children[0].InSync && d.Children[1].InSync
		})
		if detail.LastSyncTime == nil || detail.LastError != "" || detail.Parent.Kind != "Parent" {
			t.Errorf("detail %+v", detail)
		}
		for _, c := range detail.Children {
			if !c.Exists || !c.Desired || c.Ready != engineapi.ReadyTrue {
				t.Errorf("child %+v", c)
			}
		}
	})

	t.Run("hand edit", func(t *testing.T) {
		gate := make(chan struct{})
		release := sync.OnceFunc(func() { close(gate) })
		defer release()
		hook.set(secretHook(gate)) // the next sync waits in the hook until the edit is seen
		cm := env.MustGet(t, configMapsGVR, ns, "p-0")
		_ = unstructured.SetNestedField(cm.Object, "edited", "data", "value")
		if _, err := env.Dynamic.Resource(configMapsGVR).Namespace(ns).Update(ctx, cm, metav1.UpdateOptions{}); err != nil {
			t.Fatal(err)
		}
		d := waitParent(t, client, viewer, ns, "p", "the edited ConfigMap is out of sync", func(d *engineapi.ParentDetail) bool {
			c := child(d, "ConfigMap", "p-0")
			return c != nil && !c.InSync
		})
		release()
		if c := child(d, "ConfigMap", "p-0"); !slices.Contains(c.OutOfSync, "data.value") {
			t.Errorf("out of sync fields %v, want data.value", c.OutOfSync)
		}
		waitParent(t, client, viewer, ns, "p", "the engine puts the ConfigMap back", func(d *engineapi.ParentDetail) bool {
			c := child(d, "ConfigMap", "p-0")
			return c != nil && c.InSync
		})
	})

	t.Run("outsider", func(t *testing.T) {
		waitController(t, client, outsider, ns, func(engineapi.ControllerSummary) bool { return true })
		calls := hookCalls(t, client, outsider, ns)
		if len(calls.Items) != 0 {
			t.Errorf("an outsider sees %d calls of parents it may not get", len(calls.Items))
		}
		if _, err := client.Parent(ctx, outsider, engineapi.KindComposite, ns, ns, "p"); !errors.Is(err, engineapi.ErrForbidden) {
			t.Errorf("outsider's parent detail: %v, want 403", err)
		}
		if _, err := client.Parent(ctx, viewer, engineapi.KindComposite, ns, ns, "nothing"); !errors.Is(err, engineapi.ErrNotFound) {
			t.Errorf("a parent that does not exist: %v, want 404", err)
		}
	})
}

func updateParentValue(t *testing.T, ns, name, value string) {
	t.Helper()
	patch := fmt.Sprintf(`{"spec":{"value":%q}}`, value)
	if _, err := env.Dynamic.Resource(parentsGVR).Namespace(ns).Patch(kubetest.Context(t), name, types.MergePatchType, []byte(patch), metav1.PatchOptions{}); err != nil {
		t.Fatal(err)
	}
}

// apiServiceAccount returns the token of a ServiceAccount of ns that may get the
// test's CompositeController (named ns) and, when parents is set, the parents,
// ConfigMaps and Secrets of ns.
func apiServiceAccount(t *testing.T, ns, name string, parents bool) string {
	t.Helper()
	ctx := kubetest.Context(t)
	rbac := env.Kube.RbacV1()
	token := env.ServiceAccount(t, ns, name)
	subjects := []rbacv1.Subject{{Kind: "ServiceAccount", Name: name, Namespace: ns}}
	cluster := ns + "-" + name
	rule := rbacv1.PolicyRule{Verbs: []string{"get"}, APIGroups: []string{"metacontroller.k8s.io"}, Resources: []string{"compositecontrollers"}, ResourceNames: []string{ns}}
	if _, err := rbac.ClusterRoles().Create(ctx, &rbacv1.ClusterRole{ObjectMeta: metav1.ObjectMeta{Name: cluster}, Rules: []rbacv1.PolicyRule{rule}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = rbac.ClusterRoles().Delete(context.Background(), cluster, metav1.DeleteOptions{}) })
	ref := rbacv1.RoleRef{APIGroup: "rbac.authorization.k8s.io", Kind: "ClusterRole", Name: cluster}
	if _, err := rbac.ClusterRoleBindings().Create(ctx, &rbacv1.ClusterRoleBinding{ObjectMeta: metav1.ObjectMeta{Name: cluster}, RoleRef: ref, Subjects: subjects}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = rbac.ClusterRoleBindings().Delete(context.Background(), cluster, metav1.DeleteOptions{}) })
	if parents {
		role := &rbacv1.Role{ObjectMeta: metav1.ObjectMeta{Name: name}, Rules: []rbacv1.PolicyRule{
			{Verbs: []string{"get"}, APIGroups: []string{testGroup}, Resources: []string{"parents"}},
			{Verbs: []string{"get"}, APIGroups: []string{""}, Resources: []string{"configmaps", "secrets"}},
		}}
		if _, err := rbac.Roles(ns).Create(ctx, role, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
		roleRef := rbacv1.RoleRef{APIGroup: "rbac.authorization.k8s.io", Kind: "Role", Name: name}
		if _, err := rbac.RoleBindings(ns).Create(ctx, &rbacv1.RoleBinding{ObjectMeta: metav1.ObjectMeta{Name: name}, RoleRef: roleRef, Subjects: subjects}, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	return token
}

// waitController waits until the token's user sees the test's controller and ok
// holds of it: new RBAC bindings take a moment to reach the authorizer.
func waitController(t *testing.T, c *engineapi.Client, token, name string, ok func(engineapi.ControllerSummary) bool) engineapi.ControllerSummary {
	t.Helper()
	var found engineapi.ControllerSummary
	kubetest.Eventually(t, 30*time.Second, "the controller is listed", func(ctx context.Context) (bool, error) {
		list, err := c.Controllers(ctx, token)
		if err != nil {
			return false, err
		}
		for _, s := range list.Items {
			if s.Name == name && s.Kind == engineapi.KindComposite {
				found = s
				return ok(s), fmt.Errorf("summary %+v", s)
			}
		}
		return false, fmt.Errorf("not among %d controllers", len(list.Items))
	})
	return found
}

func hookCalls(t *testing.T, c *engineapi.Client, token, ns string) *engineapi.HookCallList {
	t.Helper()
	list, err := c.HookCalls(kubetest.Context(t), token, engineapi.HookCallQuery{Controller: engineapi.KindComposite + "/" + ns, Namespace: ns, Parent: "p"})
	if err != nil {
		t.Fatal(err)
	}
	return list
}

func waitParent(t *testing.T, c *engineapi.Client, token, ns, name, what string, ok func(*engineapi.ParentDetail) bool) *engineapi.ParentDetail {
	t.Helper()
	var d *engineapi.ParentDetail
	kubetest.Eventually(t, 30*time.Second, what, func(ctx context.Context) (bool, error) {
		var err error
		if d, err = c.Parent(ctx, token, engineapi.KindComposite, ns, ns, name); err != nil {
			return false, err
		}
		return ok(d), fmt.Errorf("detail %+v", d)
	})
	return d
}

func callWithDiff(calls []engineapi.HookCall) *engineapi.HookCall {
	for i := range calls {
		if calls[i].Diff != "" {
			return &calls[i]
		}
	}
	return nil
}

func child(d *engineapi.ParentDetail, kind, name string) *engineapi.Child {
	for i := range d.Children {
		if d.Children[i].Kind == kind && d.Children[i].Name == name {
			return &d.Children[i]
		}
	}
	return nil
}

// diffHas reports whether a line of diff starting with sign holds text.
func diffHas(diff, sign, text string) bool {
	for _, line := range strings.Split(diff, "\n") {
		if strings.HasPrefix(line, sign) && strings.Contains(line, text) {
			return true
		}
	}
	return false
}
