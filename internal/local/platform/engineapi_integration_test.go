//go:build integration

package platform

import (
	"context"
	"errors"
	"fmt"
	"testing"
	"time"

	rbacv1 "k8s.io/api/rbac/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/metalambda/metalambda/internal/engineapi"
	"github.com/metalambda/metalambda/internal/kubetest"
)

// checkEngineAPI checks that the platform's engine serves its API on loopback: a
// request without a token is refused, and a ServiceAccount that may view
// everything sees the bundled operators' CompositeControllers running.
func checkEngineAPI(t *testing.T, ctx context.Context, p *Platform) {
	t.Helper()
	client := &engineapi.Client{BaseURL: p.EngineURL()}
	if _, err := client.Controllers(ctx, ""); !errors.Is(err, engineapi.ErrUnauthorized) {
		t.Errorf("engine API without a token: %v, want 401", err)
	}
	env := connect(t, p.Kubeconfig)
	const name = "engine-api-viewer"
	token := env.ServiceAccount(t, "default", name)
	binding := &rbacv1.ClusterRoleBinding{
		ObjectMeta: metav1.ObjectMeta{Name: name},
		RoleRef:    rbacv1.RoleRef{APIGroup: "rbac.authorization.k8s.io", Kind: "ClusterRole", Name: "cluster-admin"},
		Subjects:   []rbacv1.Subject{{Kind: "ServiceAccount", Name: name, Namespace: "default"}},
	}
	if _, err := env.Kube.RbacV1().ClusterRoleBindings().Create(ctx, binding, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	kubetest.Eventually(t, time.Minute, "the engine API lists the bundled operators' controllers", func(ctx context.Context) (bool, error) {
		list, err := client.Controllers(ctx, token)
		if err != nil {
			return false, err
		}
		var running []string
		for _, c := range list.Items {
			if c.Running {
				running = append(running, c.Name)
			}
		}
		return len(running) >= 2 && list.HistoryEnabled, fmt.Errorf("running controllers %v, history on %v", running, list.HistoryEnabled)
	})
}
