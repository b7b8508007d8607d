package node

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"k8s.io/apimachinery/pkg/util/wait"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes"
	corelisters "k8s.io/client-go/listers/core/v1"
	"k8s.io/client-go/tools/cache"
	"k8s.io/klog/v2"

	"github.com/metalambda/metalambda/internal/gateway/sandbox"
	"github.com/metalambda/metalambda/internal/local/dns"
)

// Node is a running local node.
type Node struct {
	kube kubernetes.Interface
	opts Options
	net  *network
	// sandbox runs every container and exec probe (see containerSpec).
	sandbox *sandbox.Sandbox
	// openFiles is containers' RLIMIT_NOFILE: the node's own hard limit, up to
	// 2^20 (a container cannot raise it).
	openFiles int64
	ready     atomic.Bool
	// serviceLister and stopServices belong to the service proxy (services.go).
	serviceLister corelisters.ServiceLister
	stopServices  func()
	// hostResolver is the host's resolv.conf, for pods with dnsPolicy Default.
	hostResolver dns.Resolver
	tokens       tokenCache

	mu      sync.Mutex
	workers map[types.UID]*podWorker
	wg      sync.WaitGroup
	// closed is set when the node shuts down; no new worker starts after it.
	closed bool
	// started lists every process the node started (tests check none survives).
	started []int
	// namespaces lists the network namespace of every pod the node ran (tests
	// check none survives).
	namespaces []string
}

// New checks the options (Validate) and the machine and returns a node; Run starts
// it.
func New(kube kubernetes.Interface, opts Options) (*Node, error) {
	if err := opts.Validate(); err != nil {
		return nil, err
	}
	nw, err := newNetwork(opts)
	if err != nil {
		return nil, err
	}
	sb, err := sandbox.New(sandbox.Options{Mode: sandbox.ModeNamespaces})
	if err != nil {
		return nil, fmt.Errorf("the local node runs containers in sandboxes: %w", err)
	}
	var nofile syscall.Rlimit
	if err := syscall.Getrlimit(syscall.RLIMIT_NOFILE, &nofile); err != nil {
		return nil, err
	}
	return &Node{kube: kube, opts: opts, net: nw, sandbox: sb, openFiles: int64(min(nofile.Max, 1<<20)),
		workers: map[types.UID]*podWorker{}}, nil
}

// Options returns the effective options.
func (n *Node) Options() Options { return n.opts }

// Ready reports whether the node is registered, Ready and running pods.
func (n *Node) Ready() bool { return n.ready.Load() }

// Run registers the node, runs the pods bound to it until ctx ends, then stops every
// pod and removes every network namespace and the bridge it created.
func (n *Node) Run(ctx context.Context) error {
	log := klog.FromContext(ctx).WithValues("node", n.opts.Name)
	log.Info("Starting local node", append([]any{"podCIDR", n.opts.PodCIDR, "bridge", n.opts.Bridge, "stateDir", n.opts.StateDir,
		"python", n.opts.Python, "nodejs", n.opts.NodeJS, "imageMap", n.opts.ImageMapFile}, n.sandbox.Describe()...)...)
	if err := os.MkdirAll(filepath.Join(n.opts.StateDir, "pods"), 0o755); err != nil {
		return err
	}
	setupCtx := context.WithoutCancel(ctx)
	defer n.shutdown(setupCtx)
	var err error
	if err = n.net.ensureBridge(ctx); err != nil {
		return fmt.Errorf("create bridge %s: %w", n.opts.Bridge, err)
	}
	if n.stopServices, err = n.startServices(ctx); err != nil {
		return fmt.Errorf("service proxy: %w", err)
	}
	stopLogs, err := n.serveLogs(ctx)
	if err != nil {
		return err
	}
	defer stopLogs()
	if err := n.register(ctx); err != nil {
		return err
	}
	factory := informers.NewSharedInformerFactoryWithOptions(n.kube, 0, informers.WithTweakListOptions(func(o *metav1.ListOptions) {
		o.FieldSelector = fields.OneTermEqualSelector("spec.nodeName", n.opts.Name).String()
	}))
	pods := factory.Core().V1().Pods().Informer()
	if _, err := pods.AddEventHandler(cache.ResourceEventHandlerFuncs{
		AddFunc:    func(obj any) { n.podChanged(ctx, obj) },
		UpdateFunc: func(_, obj any) { n.podChanged(ctx, obj) },
		DeleteFunc: func(obj any) { n.podGone(obj) },
	}); err != nil {
		return err
	}
	factory.Start(ctx.Done())
	defer factory.Shutdown()
	if !cache.WaitForCacheSync(ctx.Done(), pods.HasSynced) {
		return ctx.Err()
	}
	n.ready.Store(true)
	log.Info("Local node ready")
	n.heartbeat(ctx)
	return nil
}

// shutdown stops every pod (without deleting the Pod objects), releases the
// sandbox's cgroup directory, stops the service proxy, marks the node not ready
// and removes the bridge.
func (n *Node) shutdown(ctx context.Context) {
	n.ready.Store(false)
	n.mu.Lock()
	n.closed = true
	for _, w := range n.workers {
		w.stop()
	}
	n.mu.Unlock()
	n.wg.Wait()
	n.sandbox.Close()
	if n.stopServices != nil {
		n.stopServices()
	}
	ctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	if err := n.setNotReady(ctx); err != nil {
		klog.FromContext(ctx).V(1).Info("Cannot mark the node not ready", "err", err)
	}
	if err := n.net.removeBridge(ctx); err != nil {
		klog.FromContext(ctx).Error(err, "Cannot remove the bridge", "bridge", n.opts.Bridge)
	}
	_ = os.RemoveAll(filepath.Join(n.opts.StateDir, "cni"))
}

func (n *Node) heartbeat(ctx context.Context) {
	wait.UntilWithContext(ctx, func(ctx context.Context) {
		if err := n.renew(ctx); err != nil && ctx.Err() == nil {
			klog.FromContext(ctx).Error(err, "Node heartbeat failed", "node", n.opts.Name)
		}
	}, n.opts.HeartbeatInterval)
}

// podChanged starts a worker for a new pod or hands the worker the pod's latest state.
func (n *Node) podChanged(ctx context.Context, obj any) {
	pod, ok := obj.(*corev1.Pod)
	if !ok {
		return
	}
	n.mu.Lock()
	defer n.mu.Unlock()
	if w, ok := n.workers[pod.UID]; ok {
		w.update(pod)
		return
	}
	if n.closed {
		return
	}
	if pod.DeletionTimestamp == nil && (pod.Status.Phase == corev1.PodSucceeded || pod.Status.Phase == corev1.PodFailed) {
		return // finished before this node started; nothing to run
	}
	w := newPodWorker(n, pod)
	n.workers[pod.UID] = w
	n.namespaces = append(n.namespaces, w.netns)
	n.wg.Add(1)
	go func() {
		defer n.wg.Done()
		w.run(context.WithoutCancel(ctx))
		n.mu.Lock()
		delete(n.workers, pod.UID)
		n.mu.Unlock()
	}()
}

// podGone stops the worker of a pod whose object was removed.
func (n *Node) podGone(obj any) {
	if d, ok := obj.(cache.DeletedFinalStateUnknown); ok {
		obj = d.Obj
	}
	pod, ok := obj.(*corev1.Pod)
	if !ok {
		return
	}
	n.mu.Lock()
	defer n.mu.Unlock()
	if w, ok := n.workers[pod.UID]; ok {
		w.stop()
	}
}

func (n *Node) recordStarted(pid int) {
	n.mu.Lock()
	n.started = append(n.started, pid)
	n.mu.Unlock()
}

// PodNetworkNamespaces lists the network namespace names of every pod the node has
// run, removed or not.
func (n *Node) PodNetworkNamespaces() []string {
	n.mu.Lock()
	defer n.mu.Unlock()
	return slices.Clone(n.namespaces)
}

// StartedPIDs lists every process the node has started.
func (n *Node) StartedPIDs() []int {
	n.mu.Lock()
	defer n.mu.Unlock()
	return slices.Clone(n.started)
}
