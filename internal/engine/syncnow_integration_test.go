//go:build integration

package engine

import (
	"context"
	"errors"
	"fmt"
	"net/http/httptest"
	"slices"
	"strings"
	"testing"
	"time"

	rbacv1 "k8s.io/api/rbac/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	"github.com/metalambda/metalambda/internal/engineapi"
	"github.com/metalambda/metalambda/internal/kubetest"
)

// A sync on demand through the engine's API on a real control plane: it reaches the
// hook at once without changing the parent; it needs update on the parent (get is
// not enough, nor update in another namespace); a parent that does not exist is a
// 404 only to a caller that may update it; all parents are those the caller may
// update, and no other.
func TestSyncOnDemand(t *testing.T) {
	setup(t)
	ns, other := env.Namespace(t), env.Namespace(t)
	e := startEngine(t, ns)
	handler, err := e.mgr.API(env.Kube)
	if err != nil {
		t.Fatal(err)
	}
	api := httptest.NewServer(handler)
	t.Cleanup(api.Close)
	client := &engineapi.Client{BaseURL: api.URL}

	arrivals := make(chan string, 100)
	hook := newHookServer(t, func(req map[string]any) (int, any) {
		parent := req["parent"].(map[string]any)
		arrivals <- field(parent, "metadata", "namespace").(string) + "/" + field(parent, "metadata", "name").(string)
		if field(parent, "metadata", "name") == "held" {
			return 429, retryAfterHeader("60")
		}
		return 200, map[string]any{"status": map[string]any{"synced": true}, "children": []any{}}
	})
	create(t, ccGVR, "", `
apiVersion: metacontroller.k8s.io/v1alpha1
kind: CompositeController
metadata: {name: %[1]s, labels: {metalambda.dev/test-engine: %[1]s}}
spec:
  generateSelector: true
  parentResource: {apiVersion: test.metalambda.dev/v1, resource: parents, labelSelector: {matchLabels: {metalambda.dev/test-engine: %[1]s}}}
  hooks:
    sync: {webhook: {url: "%[2]s/sync"}}
`, ns, hook.URL)
	create(t, parentsGVR, ns, "{apiVersion: test.metalambda.dev/v1, kind: Parent, metadata: {name: p}}")
	create(t, parentsGVR, ns, "{apiVersion: test.metalambda.dev/v1, kind: Parent, metadata: {name: q}}")
	elsewhere := &unstructured.Unstructured{Object: map[string]any{"apiVersion": "test.metalambda.dev/v1", "kind": "Parent",
		"metadata": map[string]any{"name": "r", "labels": map[string]any{engineLabel: ns}}}}
	env.Create(t, parentsGVR, other, elsewhere)
	for _, key := range []string{ns + "/p", ns + "/q", other + "/r"} {
		name := key[strings.Index(key, "/")+1:]
		env.WaitFor(t, key+" synced", parentsGVR, key[:strings.Index(key, "/")], name, func(u *unstructured.Unstructured) error {
			if synced, _, _ := unstructured.NestedBool(u.Object, "status", "synced"); !synced {
				return errors.New("no status.synced")
			}
			return nil
		})
	}

	getter := apiServiceAccount(t, ns, "getter", true)
	updater := apiServiceAccount(t, ns, "updater", false)
	grantParents(t, ns, ns, "updater", "update")
	outsider := apiServiceAccount(t, ns, "outsider", false)
	grantParents(t, other, ns, "outsider", "update")
	ctx := kubetest.Context(t)
	waitController(t, client, updater, ns, func(engineapi.ControllerSummary) bool { return true })
	one := func(name string) engineapi.SyncRequest { return engineapi.SyncRequest{Namespace: ns, Name: name} }

	t.Run("reaches the hook", func(t *testing.T) {
		before := env.MustGet(t, parentsGVR, ns, "p").GetResourceVersion()
		drain(arrivals)
		kubetest.Eventually(t, 30*time.Second, "RBAC lets the updater sync (a parent that does not exist is a 404)", func(context.Context) (bool, error) {
			_, err := client.Sync(ctx, updater, engineapi.KindComposite, ns, one("missing"))
			return errors.Is(err, engineapi.ErrNotFound), err
		})
		start := time.Now()
		res, err := client.Sync(ctx, updater, engineapi.KindComposite, ns, one("p"))
		if err != nil {
			t.Fatal(err)
		}
		if res.Queued != 1 || len(res.Parents) != 1 || res.Parents[0].Name != "p" || res.Parents[0].Namespace != ns || res.Parents[0].HeldUntil != nil {
			t.Errorf("answer %+v, want ns/p queued", res)
		}
		waitArrival(t, arrivals, 5*time.Second, ns+"/p")
		t.Logf("the hook was called %s after the sync was asked for", time.Since(start))
		// A second sync's call comes after the first sync finished: by then, any
		// write of the first is made.
		if _, err := client.Sync(ctx, updater, engineapi.KindComposite, ns, one("p")); err != nil {
			t.Fatal(err)
		}
		waitArrival(t, arrivals, 5*time.Second, ns+"/p")
		if after := env.MustGet(t, parentsGVR, ns, "p").GetResourceVersion(); after != before {
			t.Errorf("the parent changed: resourceVersion %s, then %s", before, after)
		}
	})

	t.Run("refused", func(t *testing.T) {
		for who, token := range map[string]string{"get only": getter, "update in another namespace": outsider} {
			for _, name := range []string{"p", "missing"} {
				_, err := client.Sync(ctx, token, engineapi.KindComposite, ns, one(name))
				if !errors.Is(err, engineapi.ErrForbidden) || !strings.Contains(err.Error(), "may not update parents.test.metalambda.dev "+name) {
					t.Errorf("%s, parent %s: %v, want 403 naming update on it", who, name, err)
				}
			}
		}
		if _, err := client.Sync(ctx, updater, engineapi.KindComposite, ns, one("missing")); !errors.Is(err, engineapi.ErrNotFound) {
			t.Errorf("a parent that does not exist: %v, want 404", err)
		}
		if _, err := client.Sync(ctx, updater, engineapi.KindComposite, ns+"-none", engineapi.SyncRequest{All: true}); !errors.Is(err, engineapi.ErrForbidden) {
			t.Errorf("a controller the caller may not get: %v, want 403", err)
		}
	})

	t.Run("all", func(t *testing.T) {
		drain(arrivals)
		res, err := client.Sync(ctx, updater, engineapi.KindComposite, ns, engineapi.SyncRequest{All: true})
		if err != nil {
			t.Fatal(err)
		}
		var names []string
		for _, p := range res.Parents {
			names = append(names, p.Namespace+"/"+p.Name)
		}
		if want := []string{ns + "/p", ns + "/q"}; res.Queued != 2 || !slices.Equal(names, want) || res.NotPermitted != 1 {
			t.Errorf("answer %+v, want %v queued and 1 not permitted", res, want)
		}
		waitArrival(t, arrivals, 5*time.Second, ns+"/p", ns+"/q")

		res, err = client.Sync(ctx, outsider, engineapi.KindComposite, ns, engineapi.SyncRequest{All: true})
		if err != nil || res.Queued != 1 || res.Parents[0].Namespace != other {
			t.Errorf("the outsider's all: %+v, %v; want only %s/r", res, err, other)
		}
		if _, err := client.Sync(ctx, getter, engineapi.KindComposite, ns, engineapi.SyncRequest{All: true}); !errors.Is(err, engineapi.ErrForbidden) {
			t.Errorf("all by a caller that may update none: %v, want 403", err)
		}
	})

	// A parent whose hook asked for a pause (429, Retry-After: 60) stays held: the
	// sync is queued, and the answer says when it will run.
	t.Run("held", func(t *testing.T) {
		create(t, parentsGVR, ns, "{apiVersion: test.metalambda.dev/v1, kind: Parent, metadata: {name: held}}")
		waitArrival(t, arrivals, 30*time.Second, ns+"/held")
		var res *engineapi.SyncResult
		kubetest.Eventually(t, 10*time.Second, "the answer says the parent is held", func(context.Context) (bool, error) {
			var err error
			res, err = client.Sync(ctx, updater, engineapi.KindComposite, ns, one("held"))
			return err == nil && res.Queued == 1 && res.Parents[0].HeldUntil != nil, fmt.Errorf("%+v, %v", res, err)
		})
		if left := time.Until(*res.Parents[0].HeldUntil); left < 30*time.Second || left > 61*time.Second {
			t.Errorf("held for %s more, want about a minute", left)
		}
	})
}

// grantParents lets the ServiceAccount saNS/name verb the test parents of ns.
func grantParents(t *testing.T, ns, saNS, name, verb string) {
	t.Helper()
	ctx, rbac := kubetest.Context(t), env.Kube.RbacV1()
	role := &rbacv1.Role{ObjectMeta: metav1.ObjectMeta{Name: name + "-" + verb}, Rules: []rbacv1.PolicyRule{
		{Verbs: []string{verb}, APIGroups: []string{testGroup}, Resources: []string{"parents"}},
	}}
	if _, err := rbac.Roles(ns).Create(ctx, role, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	binding := &rbacv1.RoleBinding{ObjectMeta: role.ObjectMeta,
		RoleRef:  rbacv1.RoleRef{APIGroup: "rbac.authorization.k8s.io", Kind: "Role", Name: role.Name},
		Subjects: []rbacv1.Subject{{Kind: "ServiceAccount", Name: name, Namespace: saNS}}}
	if _, err := rbac.RoleBindings(ns).Create(ctx, binding, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
}

func drain(ch <-chan string) {
	for {
		select {
		case <-ch:
		default:
			return
		}
	}
}

// waitArrival waits up to timeout for the hook to be called for every one of keys.
func waitArrival(t *testing.T, arrivals <-chan string, timeout time.Duration, keys ...string) {
	t.Helper()
	deadline := time.After(timeout)
	for len(keys) > 0 {
		select {
		case got := <-arrivals:
			keys = slices.DeleteFunc(keys, func(k string) bool { return k == got })
		case <-deadline:
			t.Fatalf("the hook was not called for %v within %s", keys, timeout)
		}
	}
}
