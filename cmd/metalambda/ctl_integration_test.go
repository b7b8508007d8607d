//go:build integration

package main

import (
	"context"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	rbacv1 "k8s.io/api/rbac/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	clientcmdapi "k8s.io/client-go/tools/clientcmd/api"

	"github.com/metalambda/metalambda/internal/engine"
	"github.com/metalambda/metalambda/internal/kubetest"
	"github.com/metalambda/metalambda/internal/kubetest/start"
)

// metalambda ctl as a tenant: a user who may read the namespaced controllers of one
// namespace lists and shows them, and sees nothing of another namespace's, whose
// controller it can neither list nor get.
func TestCtlShowsATenantOnlyItsOwn(t *testing.T) {
	env.InstallCRDs(t)
	mine, theirs := env.Namespace(t), env.Namespace(t)
	e := start.StartEngine(t, env.Config, engine.Defaults())
	handler, err := e.API(env.Kube)
	if err != nil {
		t.Fatal(err)
	}
	api := httptest.NewServer(handler)
	t.Cleanup(api.Close)

	ncc := schema.GroupVersionResource{Group: "metalambda.dev", Version: "v1alpha1", Resource: "namespacedcompositecontrollers"}
	for _, ns := range []string{mine, theirs} {
		env.Create(t, ncc, ns, &unstructured.Unstructured{Object: map[string]any{
			"apiVersion": "metalambda.dev/v1alpha1", "kind": "NamespacedCompositeController",
			"metadata": map[string]any{"name": "ctl-" + ns},
			"spec": map[string]any{
				"serviceAccountName": "nobody", // holds no right: the controller does not run
				"parentResource":     map[string]any{"apiVersion": "v1", "resource": "configmaps"},
				"childResources":     []any{map[string]any{"apiVersion": "v1", "resource": "secrets"}},
				"hooks":              map[string]any{"sync": map[string]any{"webhook": map[string]any{"service": map[string]any{"name": "hook"}}}},
			},
		}})
	}
	token := env.ServiceAccount(t, mine, "viewer")
	grant(t, mine, mine, "viewer", rbacv1.PolicyRule{Verbs: []string{"get", "list"}, APIGroups: []string{"metalambda.dev"}, Resources: []string{"namespacedcompositecontrollers"}})
	viewer := cli{kubeconfig: writeKubeconfig(t, t.TempDir(), mine, &clientcmdapi.AuthInfo{Token: token})}
	ctl := func(args ...string) result {
		return viewer.run(t, "", append(append([]string{"ctl"}, args...), "--kubeconfig", viewer.kubeconfig, "--engine", api.URL)...)
	}

	kubetest.Eventually(t, 30*time.Second, "the viewer lists its namespace's controller with its condition", func(context.Context) (bool, error) {
		r := ctl("list", "-A")
		return r.code == 0 && strings.Contains(r.out, "ctl-"+mine) && strings.Contains(r.out, "False"), nil
	})
	for _, args := range [][]string{{"list", "-A"}, {"list", "-n", theirs}, {"list"}} {
		r := ctl(args...)
		if r.code != 0 {
			t.Errorf("ctl %v: exit %d, stderr %q", args, r.code, r.err)
		}
		if strings.Contains(r.out+r.err, "ctl-"+theirs) {
			t.Errorf("ctl %v shows the other namespace's controller:\n%s", args, r.out)
		}
	}
	r := ctl("get", "ncc/ctl-"+mine).must(t)
	for _, want := range []string{"ctl-" + mine, "nobody", "Ready"} {
		if !strings.Contains(r.out, want) {
			t.Errorf("ctl get: stdout lacks %q:\n%s", want, r.out)
		}
	}
	r = ctl("get", "ncc/ctl-"+theirs, "-n", theirs)
	if r.code != exitDenied {
		t.Errorf("ctl get of the other namespace's controller: exit %d, want %d (refused)", r.code, exitDenied)
	}
	if strings.Contains(r.out, "nobody") {
		t.Errorf("ctl get of the other namespace's controller printed it:\n%s", r.out)
	}
	_ = env.Dynamic.Resource(ncc).Namespace(theirs).Delete(context.Background(), "ctl-"+theirs, metav1.DeleteOptions{})
}
