package platform

import (
	"context"
	"fmt"

	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
)

// DashboardAdmin is the ServiceAccount, in GatewayNamespace, that the local platform
// binds to cluster-admin so that its user can log in to the dashboard with
// `kubectl -n metalambda-system create token metalambda-dashboard-admin`. Only the
// local platform creates it; the deploy bundles do not.
const DashboardAdmin = "metalambda-dashboard-admin"

// DashboardTokenCommand prints a token that logs in to the local platform's dashboard.
const DashboardTokenCommand = "kubectl -n " + GatewayNamespace + " create token " + DashboardAdmin

// installDashboardAdmin creates DashboardAdmin and its cluster-admin binding, unless
// they exist.
func installDashboardAdmin(ctx context.Context, kube kubernetes.Interface) error {
	ns := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: GatewayNamespace}}
	if _, err := kube.CoreV1().Namespaces().Create(ctx, ns, metav1.CreateOptions{}); err != nil && !apierrors.IsAlreadyExists(err) {
		return fmt.Errorf("dashboard admin: %w", err)
	}
	sa := &corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Name: DashboardAdmin, Namespace: GatewayNamespace}}
	if _, err := kube.CoreV1().ServiceAccounts(GatewayNamespace).Create(ctx, sa, metav1.CreateOptions{}); err != nil && !apierrors.IsAlreadyExists(err) {
		return fmt.Errorf("dashboard admin: %w", err)
	}
	binding := &rbacv1.ClusterRoleBinding{
		ObjectMeta: metav1.ObjectMeta{Name: DashboardAdmin},
		RoleRef:    rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "ClusterRole", Name: "cluster-admin"},
		Subjects:   []rbacv1.Subject{{Kind: rbacv1.ServiceAccountKind, Name: DashboardAdmin, Namespace: GatewayNamespace}},
	}
	if _, err := kube.RbacV1().ClusterRoleBindings().Create(ctx, binding, metav1.CreateOptions{}); err != nil && !apierrors.IsAlreadyExists(err) {
		return fmt.Errorf("dashboard admin: %w", err)
	}
	return nil
}
