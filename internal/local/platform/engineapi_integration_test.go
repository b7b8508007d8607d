//go:build integration

package platform

import (
	"context"
	"errors"
	"fmt"
	"testing"
	"time"

	authenticationv1 "k8s.io/api/authentication/v1"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/clientcmd"

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
	cfg, err := clientcmd.BuildConfigFromFlags("", p.Kubeconfig)
	if err != nil {
		t.Fatal(err)
	}
	kube := kubernetes.NewForConfigOrDie(cfg)
	const name = "engine-api-viewer"
	if _, err := kube.CoreV1().ServiceAccounts("default").Create(ctx, &corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Name: name}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	binding := &rbacv1.ClusterRoleBinding{
		ObjectMeta: metav1.ObjectMeta{Name: name},
		RoleRef:    rbacv1.RoleRef{APIGroup: "rbac.authorization.k8s.io", Kind: "ClusterRole", Name: "cluster-admin"},
		Subjects:   []rbacv1.Subject{{Kind: "ServiceAccount", Name: name, Namespace: "default"}},
	}
	if _, err := kube.RbacV1().ClusterRoleBindings().Create(ctx, binding, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	tr, err := kube.CoreV1().ServiceAccounts("default").CreateToken(ctx, name, &authenticationv1.TokenRequest{}, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	kubetest.Eventually(t, time.Minute, "the engine API lists the bundled operators' controllers", func(ctx context.Context) (bool, error) {
		list, err := client.Controllers(ctx, tr.Status.Token)
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
