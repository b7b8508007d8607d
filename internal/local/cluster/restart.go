package cluster

import (
	"context"
	"fmt"
	"path/filepath"
	"time"
)

// RestartAPIServer stops kube-apiserver and starts it again on the same port, with
// the same flags and credentials, as a crash or an upgrade of the API server alone
// would. grace is how long kube-apiserver may take to exit after SIGTERM before it
// gets SIGKILL; 0 kills it at once, like a crash. etcd and its data, and the other
// components, keep running. It returns once the new kube-apiserver answers /readyz,
// or ctx ends.
func (c *Cluster) RestartAPIServer(ctx context.Context, grace time.Duration) error {
	i, err := c.procIndex("kube-apiserver")
	if err != nil {
		return err
	}
	if err := c.procs[i].stop(grace); err != nil {
		return err
	}
	s, err := ensureSecrets(filepath.Join(c.DataDir, "secrets"))
	if err != nil {
		return err
	}
	args := append(c.apiserverArgs(s), c.opts.ExtraArgs["kube-apiserver"]...)
	p, err := startProcess("kube-apiserver", filepath.Join(c.opts.BinDir, "kube-apiserver"), c.logDir(), args)
	if err != nil {
		return err
	}
	// Same slot: Stop still ends components newest first.
	c.procs[i] = p
	ctx, cancel := context.WithTimeout(ctx, c.opts.StartTimeout)
	defer cancel()
	return waitHealthy(ctx, p, httpCheck(insecureClient, "https://"+hostPort(c.opts.Host, c.opts.APIServerPort)+"/readyz", s.adminToken))
}

func (c *Cluster) procIndex(name string) (int, error) {
	for i, p := range c.procs {
		if p.name == name {
			return i, nil
		}
	}
	return 0, fmt.Errorf("no %s in this cluster", name)
}
