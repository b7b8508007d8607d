package kubetest

import (
	"testing"

	authenticationv1 "k8s.io/api/authentication/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/rest"
)

// ServiceAccount creates a ServiceAccount in ns and returns a token for it. It
// has no rights until the test binds it to some.
func (e *Env) ServiceAccount(t testing.TB, ns, name string) string {
	t.Helper()
	sa := &corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Name: name}}
	if _, err := e.Kube.CoreV1().ServiceAccounts(ns).Create(Context(t), sa, metav1.CreateOptions{}); err != nil {
		t.Fatalf("create ServiceAccount %s/%s: %v", ns, name, err)
	}
	return e.Token(t, ns, name)
}

// Token is a fresh token of the ServiceAccount ns/name, from the TokenRequest API.
func (e *Env) Token(t testing.TB, ns, name string) string {
	t.Helper()
	tr, err := e.Kube.CoreV1().ServiceAccounts(ns).CreateToken(Context(t), name, &authenticationv1.TokenRequest{}, metav1.CreateOptions{})
	if err != nil {
		t.Fatalf("token of %s/%s: %v", ns, name, err)
	}
	return tr.Status.Token
}

// ConfigFor is a client configuration of the control plane that authenticates
// with token alone, nothing of the admin's: a component run as a ServiceAccount.
func (e *Env) ConfigFor(token string) *rest.Config {
	cfg := rest.AnonymousClientConfig(e.Config)
	cfg.BearerToken = token
	return cfg
}
