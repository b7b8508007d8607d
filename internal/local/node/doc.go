// Package node is the local platform's dev-mode kubelet: it registers a Node, keeps its
// Ready condition and Lease fresh, and runs the Pods the scheduler binds to it as host
// processes, each Pod in its own network namespace attached to a bridge through the
// standard CNI bridge and host-local plugins.
//
// Images are mapped to host runtimes by a table the user can extend (ImageRule): python
// images run the host's python3, node images its Node.js, common base images (busybox,
// alpine, debian, ...) their command with the host's tools; an image it cannot map runs
// a placeholder process and the Pod says so. Restart policies and phases follow a
// kubelet's; the container-log endpoint accepts only the API server's client
// certificate. Volumes
// (configMap, secret, emptyDir, downwardAPI) are materialised under the state directory
// and bound at their mountPath in the container's sandbox; a claim's volume
// (persistentVolumeClaim, ephemeral) is the host directory of the local or hostPath
// PersistentVolume bound to it, bound the same way.
//
// Every container, and every exec probe, runs in the gateway's sandbox
// (internal/sandbox, namespace mode), started in the pod's network namespace: a
// read-only view of the host's system directories and of the runtime its image maps
// to, its volumes, a private /tmp, PID, IPC, UTS and cgroup namespaces of its own,
// no_new_privs, the sandbox's seccomp filter, a cgroup bounded by resources.limits.
// securityContext decides its user, groups and capabilities (security.go): the user
// of its namespace unless runAsUser names one; no capability but those added from a
// container runtime's defaults; runAsNonRoot with runAsUser 0 and privileged are
// refused with CreateContainerConfigError. A pod still shares the host's kernel and
// reaches what the bridge reaches; docs/local-platform.md says what it can and cannot
// do.
//
// Service ClusterIPs answer from pods and from the host through the service proxy
// (internal/serviceproxy) the node runs on its bridge; containers get the Service
// variables a kubelet sets (KUBERNETES_SERVICE_HOST and the rest), and projected
// service account tokens are bound to the pod and refreshed at 80% of their life, so
// client libraries' in-cluster configuration works in a pod.
//
// It is for development on one Linux machine only and needs root; real clusters run
// real kubelets.
package node
