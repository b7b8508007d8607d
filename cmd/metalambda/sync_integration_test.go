//go:build integration

package main

import (
	"context"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	clientcmdapi "k8s.io/client-go/tools/clientcmd/api"

	"github.com/metalambda/metalambda/internal/engine"
	"github.com/metalambda/metalambda/internal/kubetest"
	"github.com/metalambda/metalambda/internal/kubetest/start"
	"github.com/metalambda/metalambda/internal/local/platform"
)

// metalambda sync end to end: an engine whose API the CLI reaches with --engine, a
// DecoratorController over labelled ConfigMaps, and users of the test's namespace
// that may update the ConfigMaps, or only get them.
func TestSync(t *testing.T) {
	env.InstallCRDs(t)
	ns := env.Namespace(t)
	ctx := kubetest.Context(t)
	calls := make(chan string, 100)
	hook := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		var req struct {
			Object struct {
				Metadata struct{ Namespace, Name string } `json:"metadata"`
			} `json:"object"`
		}
		_ = json.NewDecoder(r.Body).Decode(&req)
		calls <- req.Object.Metadata.Namespace + "/" + req.Object.Metadata.Name
		_, _ = w.Write([]byte(`{}`))
	}))
	t.Cleanup(hook.Close)

	e := start.StartEngine(t, env.Config, engine.Defaults())
	handler, err := e.API(env.Kube)
	if err != nil {
		t.Fatal(err)
	}
	api := httptest.NewServer(handler)
	t.Cleanup(api.Close)
	dc := &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": "metacontroller.k8s.io/v1alpha1", "kind": "DecoratorController", "metadata": map[string]any{"name": ns},
		"spec": map[string]any{
			"resources": []any{map[string]any{"apiVersion": "v1", "resource": "configmaps", "labelSelector": map[string]any{"matchLabels": map[string]any{"sync-test": ns}}}},
			"hooks":     map[string]any{"sync": map[string]any{"webhook": map[string]any{"url": hook.URL + "/sync"}}},
		},
	}}
	env.Create(t, schema.GroupVersionResource{Group: "metacontroller.k8s.io", Version: "v1alpha1", Resource: "decoratorcontrollers"}, "", dc)
	t.Cleanup(func() {
		_ = env.Dynamic.Resource(schema.GroupVersionResource{Group: "metacontroller.k8s.io", Version: "v1alpha1", Resource: "decoratorcontrollers"}).Delete(context.Background(), ns, metav1.DeleteOptions{})
	})
	for _, name := range []string{"one", "two"} {
		cm := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: name, Labels: map[string]string{"sync-test": ns}}}
		if _, err := env.Kube.CoreV1().ConfigMaps(ns).Create(ctx, cm, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	waitCalls(t, calls, ns+"/one", ns+"/two")

	as := func(verb string) cli {
		name := "sync-" + verb
		token := env.ServiceAccount(t, ns, name)
		grant(t, "", ns, name, rbacv1.PolicyRule{Verbs: []string{"get"}, APIGroups: []string{"metacontroller.k8s.io"}, Resources: []string{"decoratorcontrollers"}, ResourceNames: []string{ns}})
		grant(t, ns, ns, name, rbacv1.PolicyRule{Verbs: []string{verb}, APIGroups: []string{""}, Resources: []string{"configmaps"}})
		return cli{kubeconfig: writeKubeconfig(t, t.TempDir(), ns, &clientcmdapi.AuthInfo{Token: token})}
	}
	updater, getter := as("update"), as("get")
	sync := func(c cli, args ...string) result {
		return c.run(t, "", append(append([]string{"sync"}, args...), "--kubeconfig", c.kubeconfig, "--engine", api.URL)...)
	}
	kubetest.Eventually(t, 30*time.Second, "RBAC lets the updater sync", func(context.Context) (bool, error) {
		return sync(updater, "dec/"+ns, ns+"/missing").code == exitError, nil
	})

	r := sync(updater, "dec/"+ns, ns+"/one").must(t)
	if !strings.Contains(r.out, "queued 1 parent of DecoratorController "+ns) || !strings.Contains(r.out, ns+"/one") {
		t.Errorf("stdout %q, want one queued parent named", r.out)
	}
	waitCalls(t, calls, ns+"/one")
	r = sync(updater, "decoratorcontroller/"+ns, "two", "-n", ns).must(t)
	waitCalls(t, calls, ns+"/two")
	r = sync(updater, "dec/"+ns, "--all").must(t)
	if !strings.Contains(r.out, "queued 2 parents") {
		t.Errorf("--all: stdout %q, want 2 queued", r.out)
	}
	waitCalls(t, calls, ns+"/one", ns+"/two")

	if r := sync(updater, "dec/"+ns, ns+"/missing"); r.code != exitError || !strings.Contains(r.err, "has no parent "+ns+"/missing") {
		t.Errorf("a parent that does not exist: exit %d, stderr %q; want 1 naming it", r.code, r.err)
	}
	if r := sync(getter, "dec/"+ns, ns+"/one"); r.code != exitDenied || !strings.Contains(r.err, "may not update configmaps one in namespace "+ns) {
		t.Errorf("get only: exit %d, stderr %q; want 4 naming the missing update", r.code, r.err)
	}
	if r := sync(getter, "dec/"+ns, ns+"/missing"); r.code != exitDenied {
		t.Errorf("get only, a parent that does not exist: exit %d, want 4 (nothing is looked up)", r.code)
	}

	// Without --engine: $METALAMBDA_ENGINE, then the engine-url file beside a
	// kubeconfig that `metalambda up` wrote.
	t.Setenv(engineEnv, api.URL)
	r = updater.run(t, "", "sync", "dec/"+ns, "--all", "--kubeconfig", updater.kubeconfig).must(t)
	t.Setenv(engineEnv, "")
	token := env.Token(t, ns, "sync-update")
	dataDir := t.TempDir()
	kubeconfig := writeKubeconfig(t, dataDir, ns, &clientcmdapi.AuthInfo{Token: token})
	writeFile(t, dataDir, filepath.Base(platform.EngineURLFile(dataDir)), api.URL+"\n")
	cli{kubeconfig: kubeconfig}.run(t, "", "sync", "dec/"+ns, "--all", "--kubeconfig", kubeconfig).must(t)
	if r := updater.run(t, "", "sync", "dec/"+ns, "--all", "--kubeconfig", updater.kubeconfig); r.code != exitError || !strings.Contains(r.err, "no engine API") {
		t.Errorf("no engine named: exit %d, stderr %q; want 1 saying so", r.code, r.err)
	}

	for _, args := range [][]string{{"dec/" + ns}, {"dec/" + ns, "one", "--all"}, {"job/" + ns, "--all"}} {
		if r := sync(updater, args...); r.code != exitUsage {
			t.Errorf("sync %v: exit %d, want 2", args, r.code)
		}
	}
}

// grant gives the ServiceAccount saNS/name rule in ns, or cluster-wide when ns is "".
func grant(t *testing.T, ns, saNS, name string, rule rbacv1.PolicyRule) {
	t.Helper()
	ctx, rbac := kubetest.Context(t), env.Kube.RbacV1()
	subjects := []rbacv1.Subject{{Kind: "ServiceAccount", Name: name, Namespace: saNS}}
	if ns == "" {
		role, err := rbac.ClusterRoles().Create(ctx, &rbacv1.ClusterRole{ObjectMeta: metav1.ObjectMeta{GenerateName: saNS + "-" + name + "-"}, Rules: []rbacv1.PolicyRule{rule}}, metav1.CreateOptions{})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = rbac.ClusterRoles().Delete(context.Background(), role.Name, metav1.DeleteOptions{}) })
		binding := &rbacv1.ClusterRoleBinding{ObjectMeta: metav1.ObjectMeta{Name: role.Name}, Subjects: subjects,
			RoleRef: rbacv1.RoleRef{APIGroup: "rbac.authorization.k8s.io", Kind: "ClusterRole", Name: role.Name}}
		if _, err := rbac.ClusterRoleBindings().Create(ctx, binding, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = rbac.ClusterRoleBindings().Delete(context.Background(), role.Name, metav1.DeleteOptions{}) })
		return
	}
	role, err := rbac.Roles(ns).Create(ctx, &rbacv1.Role{ObjectMeta: metav1.ObjectMeta{GenerateName: name + "-"}, Rules: []rbacv1.PolicyRule{rule}}, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	binding := &rbacv1.RoleBinding{ObjectMeta: metav1.ObjectMeta{Name: role.Name}, Subjects: subjects,
		RoleRef: rbacv1.RoleRef{APIGroup: "rbac.authorization.k8s.io", Kind: "Role", Name: role.Name}}
	if _, err := rbac.RoleBindings(ns).Create(ctx, binding, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
}

// waitCalls waits for the hook to be called for every one of keys.
func waitCalls(t *testing.T, calls <-chan string, keys ...string) {
	t.Helper()
	deadline := time.After(30 * time.Second)
	for len(keys) > 0 {
		select {
		case got := <-calls:
			for i, k := range keys {
				if k == got {
					keys = append(keys[:i], keys[i+1:]...)
					break
				}
			}
		case <-deadline:
			t.Fatalf("the hook was not called for %v", keys)
		}
	}
}
