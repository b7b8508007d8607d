// Package kubetest is the integration-test harness: one real control plane per test
// package (started from TestMain), or an Env for a cluster the package did not start,
// such as a local platform's (Connect); a fresh namespace per test, waits with a
// deadline and a readable failure message, the project's CRDs installed once per
// package (Env.InstallCRDs), objects created, read and waited for by
// (GroupVersionResource, namespace, name) (Env.Create, Env.WaitFor, Env.WaitGone,
// Env.Events), ServiceAccounts and their tokens (Env.ServiceAccount, Env.Token,
// Env.ConfigFor), a component run in the background until the test ends (Run) and
// free loopback ports (FreeAddr). Package kubetest/start runs a gateway or an
// engine against the control plane; packages it cannot serve (internal/engine and
// internal/gateway, which it imports) run theirs through Run.
//
//	var env *kubetest.Env
//
//	func TestMain(m *testing.M) { kubetest.Main(m, &env, cluster.Defaults()) }
//
//	func TestSomething(t *testing.T) {
//		env.InstallCRDs(t)
//		ns := env.Namespace(t)
//		...
//		env.WaitGone(t, "the ConfigMap is collected", configMaps, ns, "child")
//	}
package kubetest
