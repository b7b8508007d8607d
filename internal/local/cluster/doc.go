// Package cluster runs a real Kubernetes control plane (etcd, kube-apiserver,
// kube-controller-manager and kube-scheduler) as child processes on loopback.
//
// The binaries come from the pinned build that `make kube` puts in the user's cache
// (see deploy/local/build-kube.sh). Integration tests use a throw-away cluster in a
// temporary directory; the local platform (`metalambda up`) uses the same code with a
// persistent data directory, so state survives a restart.
//
// Every child runs in its own process group and receives SIGKILL if the process that
// started it dies, so a panicking test does not leave a control plane behind.
package cluster
