package cluster

import (
	"context"
	"fmt"
	"net/http"
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
	s, err := ensureSecrets(filepath.Join(c.DataDir, "secrets"))
	if err != nil {
		return err
	}
	url := "https://" + hostPort(c.opts.Host, c.opts.APIServerPort) + "/readyz"
	return c.restart(ctx, "kube-apiserver", c.apiserverArgs(s), grace, httpCheck(insecureClient, url, s.adminToken))
}

// RestartEtcd stops etcd and starts it again on the same ports and data directory, as
// a crash (grace 0) or a restart of etcd alone would; kube-apiserver keeps running and
// reconnects. It returns once etcd answers /health, or ctx ends.
func (c *Cluster) RestartEtcd(ctx context.Context, grace time.Duration) error {
	url := fmt.Sprintf("http://%s/health", hostPort(c.opts.Host, c.opts.EtcdClientPort))
	return c.restart(ctx, "etcd", c.etcdArgs(), grace, httpCheck(http.DefaultClient, url, ""))
}

// restart stops the component name and starts it again in the same slot with args
// (and its extra arguments), then waits until healthy accepts it.
func (c *Cluster) restart(ctx context.Context, name string, args []string, grace time.Duration, healthy check) error {
	i, err := c.procIndex(name)
	if err != nil {
		return err
	}
	if err := c.procs[i].stop(grace); err != nil {
		return err
	}
	args = append(args, c.opts.ExtraArgs[name]...)
	p, err := startProcess(name, filepath.Join(c.opts.BinDir, name), c.logDir(), args)
	if err != nil {
		return err
	}
	// Same slot: Stop still ends components newest first.
	c.procs[i] = p
	ctx, cancel := context.WithTimeout(ctx, c.opts.StartTimeout)
	defer cancel()
	return waitHealthy(ctx, p, healthy)
}

func (c *Cluster) procIndex(name string) (int, error) {
	for i, p := range c.procs {
		if p.name == name {
			return i, nil
		}
	}
	return 0, fmt.Errorf("no %s in this cluster", name)
}
