package node

import (
	"bufio"
	"context"
	"fmt"
	"os"
	"runtime"
	"strconv"
	"strings"
	"time"

	coordinationv1 "k8s.io/api/coordination/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
)

// kubeletVersion is what the node reports as its kubelet version.
const kubeletVersion = "v1.34.3-metalambda-local"

// notReadyTaint is the taint the API server puts on a new Node; a real cluster's node
// lifecycle controller removes it once the node is Ready, here the node does.
const notReadyTaint = "node.kubernetes.io/not-ready"

// register creates or adopts the Node, makes it Ready and creates its Lease.
func (n *Node) register(ctx context.Context) error {
	nodes := n.kube.CoreV1().Nodes()
	node, err := nodes.Get(ctx, n.opts.Name, metav1.GetOptions{})
	if apierrors.IsNotFound(err) {
		node, err = nodes.Create(ctx, n.nodeObject(), metav1.CreateOptions{})
	}
	if err != nil {
		return fmt.Errorf("register node %s: %w", n.opts.Name, err)
	}
	if err := n.removeNotReadyTaint(ctx, node); err != nil {
		return err
	}
	return n.renew(ctx)
}

// nodeObject is the Node as first registered.
func (n *Node) nodeObject() *corev1.Node {
	return &corev1.Node{
		ObjectMeta: metav1.ObjectMeta{Name: n.opts.Name, Labels: map[string]string{
			"kubernetes.io/hostname": n.opts.Name,
			"kubernetes.io/os":       runtime.GOOS,
			"kubernetes.io/arch":     runtime.GOARCH,
			"metalambda.dev/local":   "true",
		}},
		Spec: corev1.NodeSpec{PodCIDR: n.opts.PodCIDR, PodCIDRs: []string{n.opts.PodCIDR}},
	}
}

func (n *Node) removeNotReadyTaint(ctx context.Context, node *corev1.Node) error {
	var kept []corev1.Taint
	for _, t := range node.Spec.Taints {
		if t.Key != notReadyTaint {
			kept = append(kept, t)
		}
	}
	if len(kept) == len(node.Spec.Taints) {
		return nil
	}
	node = node.DeepCopy()
	node.Spec.Taints = kept
	_, err := n.kube.CoreV1().Nodes().Update(ctx, node, metav1.UpdateOptions{})
	return err
}

// renew writes the node status (Ready, capacity, addresses) and renews the Lease.
func (n *Node) renew(ctx context.Context) error {
	if err := n.writeNodeStatus(ctx, corev1.ConditionTrue, "KubeletReady", "local node is posting ready status"); err != nil {
		return err
	}
	return n.renewLease(ctx)
}

func (n *Node) setNotReady(ctx context.Context) error {
	return n.writeNodeStatus(ctx, corev1.ConditionUnknown, "NodeStopped", "local node stopped")
}

func (n *Node) writeNodeStatus(ctx context.Context, ready corev1.ConditionStatus, reason, message string) error {
	nodes := n.kube.CoreV1().Nodes()
	node, err := nodes.Get(ctx, n.opts.Name, metav1.GetOptions{})
	if err != nil {
		return err
	}
	node = node.DeepCopy()
	node.Status = nodeStatus(node.Status, n.hostResources(), n.net.gw.String(), n.opts.Name, ready, reason, message, time.Now())
	node.Status.DaemonEndpoints.KubeletEndpoint.Port = int32(n.opts.KubeletPort)
	_, err = nodes.UpdateStatus(ctx, node, metav1.UpdateOptions{})
	return err
}

// nodeStatus builds a Node status; the Ready condition keeps its transition time
// while its status does not change.
func nodeStatus(old corev1.NodeStatus, res corev1.ResourceList, ip, hostname string, ready corev1.ConditionStatus, reason, message string, now time.Time) corev1.NodeStatus {
	ts := metav1.NewTime(now.Truncate(time.Second))
	cond := corev1.NodeCondition{Type: corev1.NodeReady, Status: ready, Reason: reason, Message: message, LastHeartbeatTime: ts, LastTransitionTime: ts}
	for _, c := range old.Conditions {
		if c.Type == corev1.NodeReady && c.Status == ready {
			cond.LastTransitionTime = c.LastTransitionTime
		}
	}
	return corev1.NodeStatus{
		Capacity:    res,
		Allocatable: res,
		Phase:       corev1.NodeRunning,
		Conditions:  []corev1.NodeCondition{cond},
		Addresses: []corev1.NodeAddress{
			{Type: corev1.NodeInternalIP, Address: ip},
			{Type: corev1.NodeHostName, Address: hostname},
		},
		NodeInfo: corev1.NodeSystemInfo{
			OperatingSystem: runtime.GOOS, Architecture: runtime.GOARCH,
			KubeletVersion: kubeletVersion, ContainerRuntimeVersion: "metalambda-local://host-process",
			KernelVersion: kernelVersion(),
		},
	}
}

// hostResources reports the host's CPUs and memory, and 110 pods.
func (n *Node) hostResources() corev1.ResourceList {
	return corev1.ResourceList{
		corev1.ResourceCPU:    *resource.NewQuantity(int64(runtime.NumCPU()), resource.DecimalSI),
		corev1.ResourceMemory: *resource.NewQuantity(memTotal(), resource.BinarySI),
		corev1.ResourcePods:   *resource.NewQuantity(110, resource.DecimalSI),
	}
}

// memTotal reads MemTotal from /proc/meminfo, in bytes.
func memTotal() int64 {
	f, err := os.Open("/proc/meminfo")
	if err != nil {
		return 0
	}
	defer f.Close()
	s := bufio.NewScanner(f)
	for s.Scan() {
		fields := strings.Fields(s.Text())
		if len(fields) >= 2 && fields[0] == "MemTotal:" {
			kb, _ := strconv.ParseInt(fields[1], 10, 64)
			return kb * 1024
		}
	}
	return 0
}

func kernelVersion() string {
	b, _ := os.ReadFile("/proc/sys/kernel/osrelease")
	return strings.TrimSpace(string(b))
}

// renewLease creates or renews the node's Lease in kube-node-lease.
func (n *Node) renewLease(ctx context.Context) error {
	leases := n.kube.CoordinationV1().Leases(corev1.NamespaceNodeLease)
	now := metav1.NewMicroTime(time.Now())
	lease, err := leases.Get(ctx, n.opts.Name, metav1.GetOptions{})
	if apierrors.IsNotFound(err) {
		lease = &coordinationv1.Lease{
			ObjectMeta: metav1.ObjectMeta{Name: n.opts.Name, Namespace: corev1.NamespaceNodeLease},
			Spec: coordinationv1.LeaseSpec{
				HolderIdentity: ptr.To(n.opts.Name), LeaseDurationSeconds: ptr.To(int32(40)), RenewTime: &now,
			},
		}
		if node, err := n.kube.CoreV1().Nodes().Get(ctx, n.opts.Name, metav1.GetOptions{}); err == nil {
			lease.OwnerReferences = []metav1.OwnerReference{{APIVersion: "v1", Kind: "Node", Name: node.Name, UID: node.UID}}
		}
		_, err = leases.Create(ctx, lease, metav1.CreateOptions{})
		return err
	}
	if err != nil {
		return err
	}
	lease = lease.DeepCopy()
	lease.Spec.RenewTime = &now
	lease.Spec.HolderIdentity = ptr.To(n.opts.Name)
	_, err = leases.Update(ctx, lease, metav1.UpdateOptions{})
	return err
}
