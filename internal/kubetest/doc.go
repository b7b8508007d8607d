// Package kubetest is the integration-test harness: one real control plane per test
// package (started from TestMain), a fresh namespace per test, waits with a
// deadline and a readable failure message, the project's CRDs installed
// (Env.InstallCRDs) and free loopback ports (FreeAddr). Package kubetest/start
// runs a gateway or an engine against the control plane.
//
//	var env *kubetest.Env
//
//	func TestMain(m *testing.M) { kubetest.Main(m, &env, cluster.Defaults()) }
//
//	func TestSomething(t *testing.T) {
//		ns := env.Namespace(t)
//		...
//		kubetest.Eventually(t, 30*time.Second, "the ConfigMap is collected", func(ctx context.Context) (bool, error) { ... })
//	}
package kubetest
