// Package node is the local platform's dev-mode kubelet: it registers a Node, keeps its
// Ready condition and Lease fresh, and runs the Pods the scheduler binds to it as host
// processes, each Pod in its own network namespace attached to a bridge through the
// standard CNI bridge and host-local plugins.
//
// Images are mapped to host runtimes (any python:* image runs the host's python3); an
// image it cannot map runs a placeholder process and the Pod says so. Volumes
// (configMap, secret, emptyDir, downwardAPI) are materialised under the state directory
// and bind-mounted at their mountPath in a private mount namespace; a claim's volume
// (persistentVolumeClaim, ephemeral) is the host directory of the local or hostPath
// PersistentVolume bound to it, mounted the same way.
//
// It is for development on one Linux machine only and needs root; real clusters run
// real kubelets.
package node
