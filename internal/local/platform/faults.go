package platform

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	"k8s.io/client-go/kubernetes"
)

// Fault hooks: a test or the soak (hack/soak) restarts one component of a running
// platform, as its crash would, and the platform brings it back. The pods of the
// chart and of the operators are the cluster's to restart (delete them); these are
// the processes the platform itself runs.

// runningNode is the local node the platform runs, and how to stop it.
type runningNode struct {
	mu     sync.Mutex
	kube   kubernetes.Interface
	cancel context.CancelFunc
	done   chan struct{}
}

// startNode builds the local node with Options.Node and runs it until stopNode,
// returning once it is Ready.
func (p *Platform) startNode(kube kubernetes.Interface) error {
	if p.node == nil {
		p.node = &runningNode{kube: kube}
	}
	n, err := p.opts.Node(kube, p.opts.DataDir)
	if err != nil {
		return fmt.Errorf("local node: %w", err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() {
		defer close(done)
		_ = n.Run(ctx)
	}()
	p.node.cancel, p.node.done = cancel, done
	return waitUntil(2*time.Minute, "the local node is Ready", n.Ready)
}

// stopNode stops the local node, which stops every pod it runs (the Pod objects
// stay), and waits until it has.
func (p *Platform) stopNode() {
	if p.node == nil || p.node.cancel == nil {
		return
	}
	p.node.cancel()
	<-p.node.done
	p.node.cancel = nil
}

// RestartNode stops the local node, as its process ending would (every pod it runs
// stops), and starts a new one on the same state directory and network, which
// starts the pods bound to it again. It returns once the new node is Ready; the
// pods then start as on any node that comes back.
func (p *Platform) RestartNode() error {
	if p.node == nil {
		return errors.New("this platform runs no local node")
	}
	p.node.mu.Lock()
	defer p.node.mu.Unlock()
	p.stopNode()
	return p.startNode(p.node.kube)
}

// RestartAPIServer stops kube-apiserver (SIGKILL after grace; 0 is a crash) and
// starts it again on the same port and data; it returns once it is ready.
func (p *Platform) RestartAPIServer(ctx context.Context, grace time.Duration) error {
	return p.cluster.RestartAPIServer(ctx, grace)
}

// RestartEtcd stops etcd (SIGKILL after grace; 0 is a crash) and starts it again on
// the same ports and data; kube-apiserver reconnects. It returns once etcd is
// healthy.
func (p *Platform) RestartEtcd(ctx context.Context, grace time.Duration) error {
	return p.cluster.RestartEtcd(ctx, grace)
}
