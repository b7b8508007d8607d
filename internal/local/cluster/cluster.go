package cluster

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"time"

	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"
	clientcmdapi "k8s.io/client-go/tools/clientcmd/api"
)

// tempPrefix names the temporary data directories Start creates.
const tempPrefix = "metalambda-cluster-"

// Cluster is a running control plane.
type Cluster struct {
	// Config reaches kube-apiserver as the admin user (system:masters).
	Config *rest.Config
	// KubeconfigPath is a kubeconfig file with the same credentials.
	KubeconfigPath string
	// DataDir holds the cluster's state and logs.
	DataDir string
	// KubeletClientCert and KubeletClientKey are the client certificate (PEM files)
	// kube-apiserver shows nodes; its CA is in KubeletClientCA.
	KubeletClientCert, KubeletClientKey, KubeletClientCA string

	opts     Options
	tempData bool // DataDir was created by Start and is removed by Stop
	procs    []*process
	stopOnce sync.Once
	stopErr  error
}

// Start runs etcd, kube-apiserver and the optional components, and returns once every
// one of them reports healthy. On error nothing is left running.
//
// A port Start picks (a zero port of opts) is free when picked, not always when
// its component binds it, seconds later: an outgoing connection of another process
// can take it as its local port in between. A start that fails so, a component
// saying "address already in use", is tried again from the beginning on newly
// picked ports, up to portAttempts starts in all.
func Start(ctx context.Context, opts Options) (*Cluster, error) {
	if err := opts.Validate(); err != nil {
		return nil, err
	}
	for attempt := 1; ; attempt++ {
		o := opts
		if err := o.pickPorts(); err != nil {
			return nil, err
		}
		if afterPickPorts != nil {
			afterPickPorts(&o)
		}
		c, logs, err := startOnce(ctx, o)
		if err == nil {
			return c, nil
		}
		if attempt < portAttempts && opts.picksPorts() && strings.Contains(logs, "address already in use") {
			continue
		}
		return nil, fmt.Errorf("%w\n%s", err, logs)
	}
}

// portAttempts is how many starts Start makes on ports it picked, when a
// component finds one taken.
const portAttempts = 3

// afterPickPorts, when set (by a test), sees each start's ports before its
// components start.
var afterPickPorts func(*Options)

// startOnce starts the components on opts' ports; on error it stops what it
// started and returns the tails of their logs.
func startOnce(ctx context.Context, opts Options) (*Cluster, string, error) {
	c := &Cluster{opts: opts, DataDir: opts.DataDir}
	if err := c.prepareDataDir(); err != nil {
		return nil, "", err
	}
	ctx, cancel := context.WithTimeout(ctx, opts.StartTimeout)
	defer cancel()
	if err := c.start(ctx); err != nil {
		logs := c.LogTails(30)
		_ = c.Stop()
		return nil, logs, err
	}
	return c, "", nil
}

func (c *Cluster) prepareDataDir() error {
	if c.DataDir == "" {
		removeStaleTempDirs(os.TempDir())
		dir, err := os.MkdirTemp("", tempPrefix)
		if err != nil {
			return err
		}
		c.DataDir, c.tempData = dir, true
		if err := os.WriteFile(filepath.Join(dir, "owner.pid"), []byte(strconv.Itoa(os.Getpid())), 0o600); err != nil {
			return err
		}
	}
	return os.MkdirAll(c.logDir(), 0o700)
}

func (c *Cluster) logDir() string  { return filepath.Join(c.DataDir, "logs") }
func (c *Cluster) certDir() string { return filepath.Join(c.DataDir, "pki") }

func (c *Cluster) start(ctx context.Context) error {
	o := &c.opts
	s, err := ensureSecrets(filepath.Join(c.DataDir, "secrets"))
	if err != nil {
		return err
	}
	c.KubeletClientCert, c.KubeletClientKey, c.KubeletClientCA = s.kubeletClient.certFile, s.kubeletClient.keyFile, s.kubeletClient.caFile
	etcd, err := c.run("etcd", c.etcdArgs())
	if err != nil {
		return err
	}
	if err := waitHealthy(ctx, etcd, httpCheck(http.DefaultClient, fmt.Sprintf("http://%s/health", hostPort(o.Host, o.EtcdClientPort)), "")); err != nil {
		return err
	}
	apiserver, err := c.run("kube-apiserver", c.apiserverArgs(s))
	if err != nil {
		return err
	}
	apiURL := "https://" + hostPort(o.Host, o.APIServerPort)
	if err := waitHealthy(ctx, apiserver, httpCheck(insecureClient, apiURL+"/readyz", s.adminToken)); err != nil {
		return err
	}
	if err := c.writeKubeconfig(apiURL, s.adminToken); err != nil {
		return err
	}
	return c.startOptional(ctx)
}

func (c *Cluster) startOptional(ctx context.Context) error {
	o := &c.opts
	type optional struct {
		component Component
		port      int
		args      []string
	}
	for _, opt := range []optional{
		{ControllerManager, o.ControllerMgrPort, c.controllerManagerArgs()},
		{Scheduler, o.SchedulerPort, c.schedulerArgs()},
	} {
		if !o.runs(opt.component) {
			continue
		}
		p, err := c.run(string(opt.component), opt.args)
		if err != nil {
			return err
		}
		if err := waitHealthy(ctx, p, httpCheck(insecureClient, "https://"+hostPort(o.Host, opt.port)+"/healthz", "")); err != nil {
			return err
		}
	}
	return nil
}

func (c *Cluster) run(name string, args []string) (*process, error) {
	args = append(args, c.opts.ExtraArgs[name]...)
	p, err := startProcess(name, filepath.Join(c.opts.BinDir, name), c.logDir(), args)
	if err != nil {
		return nil, err
	}
	c.procs = append(c.procs, p)
	return p, nil
}

func (c *Cluster) etcdArgs() []string {
	o := &c.opts
	client := "http://" + hostPort(o.Host, o.EtcdClientPort)
	peer := "http://" + hostPort(o.Host, o.EtcdPeerPort)
	args := []string{
		"--name=default",
		"--data-dir=" + filepath.Join(c.DataDir, "etcd"),
		"--listen-client-urls=" + client,
		"--advertise-client-urls=" + client,
		"--listen-peer-urls=" + peer,
		"--initial-advertise-peer-urls=" + peer,
		"--initial-cluster=default=" + peer,
		"--log-level=warn",
	}
	if o.EtcdNoFsync {
		args = append(args, "--unsafe-no-fsync")
	}
	return args
}

func (c *Cluster) apiserverArgs(s *secrets) []string {
	o := &c.opts
	return []string{
		"--etcd-servers=http://" + hostPort(o.Host, o.EtcdClientPort),
		"--cert-dir=" + c.certDir(),
		"--bind-address=" + o.Host,
		"--advertise-address=" + o.Host,
		"--secure-port=" + strconv.Itoa(o.APIServerPort),
		"--token-auth-file=" + s.tokenFile,
		"--authorization-mode=RBAC",
		"--service-account-issuer=https://kubernetes.default.svc.cluster.local",
		"--service-account-key-file=" + s.serviceAccountKey,
		"--service-account-signing-key-file=" + s.serviceAccountKey,
		"--service-cluster-ip-range=" + o.ServiceClusterIPRange,
		"--allow-privileged=true",
		// Nodes accept kube-apiserver's requests (`kubectl logs`) by its client
		// certificate, verified against the client CA it publishes in
		// kube-system/extension-apiserver-authentication.
		"--client-ca-file=" + s.kubeletClient.caFile,
		"--kubelet-client-certificate=" + s.kubeletClient.certFile,
		"--kubelet-client-key=" + s.kubeletClient.keyFile,
		// Reach nodes (`kubectl logs`) at the address they serve on: the local node's
		// bridge address, which its hostname may not resolve to.
		"--kubelet-preferred-address-types=InternalIP,Hostname",
		// The apiserver would publish its loopback address as the endpoint of the
		// "kubernetes" Service, which Endpoints validation refuses in a loop. The
		// local node publishes the address it exposes the apiserver at to pods
		// instead (internal/serviceproxy).
		"--endpoint-reconciler-type=none",
	}
}

func (c *Cluster) componentArgs(port int) []string {
	o := &c.opts
	return []string{
		"--kubeconfig=" + c.KubeconfigPath,
		"--authentication-kubeconfig=" + c.KubeconfigPath,
		"--authorization-kubeconfig=" + c.KubeconfigPath,
		"--bind-address=" + o.Host,
		"--secure-port=" + strconv.Itoa(port),
		"--leader-elect=false",
	}
}

func (c *Cluster) controllerManagerArgs() []string {
	o := &c.opts
	return append(c.componentArgs(o.ControllerMgrPort),
		"--controllers="+strings.Join(o.Controllers, ","),
		"--service-account-private-key-file="+filepath.Join(c.DataDir, "secrets", "service-account.key"),
		"--root-ca-file="+filepath.Join(c.certDir(), "apiserver.crt"),
	)
}

func (c *Cluster) schedulerArgs() []string {
	return c.componentArgs(c.opts.SchedulerPort)
}

func (c *Cluster) writeKubeconfig(apiURL, token string) error {
	ca, err := os.ReadFile(filepath.Join(c.certDir(), "apiserver.crt"))
	if err != nil {
		return fmt.Errorf("read the apiserver's serving certificate: %w", err)
	}
	c.Config = &rest.Config{
		Host:            apiURL,
		BearerToken:     token,
		TLSClientConfig: rest.TLSClientConfig{CAData: ca},
		QPS:             100,
		Burst:           200,
	}
	// Prove the CA and token work before anyone else depends on them.
	client, err := kubernetes.NewForConfig(c.Config)
	if err != nil {
		return err
	}
	if _, err := client.Discovery().ServerVersion(); err != nil {
		return fmt.Errorf("reach kube-apiserver with the admin credentials: %w", err)
	}
	const name = "metalambda"
	cfg := clientcmdapi.NewConfig()
	cfg.Clusters[name] = &clientcmdapi.Cluster{Server: apiURL, CertificateAuthorityData: ca}
	cfg.AuthInfos[name] = &clientcmdapi.AuthInfo{Token: token}
	cfg.Contexts[name] = &clientcmdapi.Context{Cluster: name, AuthInfo: name, Namespace: "default"}
	cfg.CurrentContext = name
	c.KubeconfigPath = filepath.Join(c.DataDir, "kubeconfig")
	return clientcmd.WriteToFile(*cfg, c.KubeconfigPath)
}

// Stop ends every component, newest first, and removes a temporary data directory.
// It is safe to call more than once.
func (c *Cluster) Stop() error {
	c.stopOnce.Do(func() {
		var errs []error
		for i := len(c.procs) - 1; i >= 0; i-- {
			errs = append(errs, c.procs[i].stop(15*time.Second))
		}
		if c.tempData {
			errs = append(errs, os.RemoveAll(c.DataDir))
		}
		c.stopErr = errors.Join(errs...)
	})
	return c.stopErr
}

// LogTails returns the last n lines of every component's log, for a failure message.
func (c *Cluster) LogTails(n int) string {
	var b strings.Builder
	for _, p := range c.procs {
		fmt.Fprintf(&b, "==> %s (%s) <==\n%s\n", p.name, p.logPath, p.tail(n))
	}
	return b.String()
}

// WriteLogs copies every component's whole log to w.
func (c *Cluster) WriteLogs(w io.Writer) {
	for _, p := range c.procs {
		fmt.Fprintf(w, "==> %s <==\n", p.name)
		if data, err := os.ReadFile(p.logPath); err == nil {
			_, _ = w.Write(data)
		}
	}
}

func hostPort(host string, port int) string { return net.JoinHostPort(host, strconv.Itoa(port)) }

// removeStaleTempDirs deletes data directories left by test processes that died
// before they could clean up (a panic, a killed `go test`).
func removeStaleTempDirs(tmp string) {
	dirs, _ := filepath.Glob(filepath.Join(tmp, tempPrefix+"*"))
	for _, dir := range dirs {
		data, err := os.ReadFile(filepath.Join(dir, "owner.pid"))
		if err != nil {
			continue
		}
		pid, err := strconv.Atoi(string(data))
		if err != nil || processAlive(pid) {
			continue
		}
		_ = os.RemoveAll(dir)
	}
}

func processAlive(pid int) bool {
	_, err := os.Stat(fmt.Sprintf("/proc/%d", pid))
	return err == nil
}

// insecureClient checks the health of our own child processes on loopback before
// their certificates are known.
var insecureClient = &http.Client{
	Timeout:   5 * time.Second,
	Transport: &http.Transport{TLSClientConfig: &tls.Config{InsecureSkipVerify: true}}, //nolint:gosec // loopback health checks of our own children
}

// Address is one address a process of the control plane serves on.
type Address struct {
	// HostPort is host:port.
	HostPort string
	// What serves there, e.g. "etcd's client port".
	What string
}

// Addresses are where the control plane serves: etcd's client and peer ports,
// kube-apiserver, and the optional components that run.
func (c *Cluster) Addresses() []Address {
	o := &c.opts
	out := []Address{
		{hostPort(o.Host, o.EtcdClientPort), "etcd's client port"},
		{hostPort(o.Host, o.EtcdPeerPort), "etcd's peer port"},
		{hostPort(o.Host, o.APIServerPort), "kube-apiserver"},
	}
	if o.runs(ControllerManager) {
		out = append(out, Address{hostPort(o.Host, o.ControllerMgrPort), string(ControllerManager)})
	}
	if o.runs(Scheduler) {
		out = append(out, Address{hostPort(o.Host, o.SchedulerPort), string(Scheduler)})
	}
	return out
}
