package cluster

import (
	"errors"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"slices"
	"time"
)

// Component is one control-plane process that Start can run besides etcd and
// kube-apiserver, which always run.
type Component string

// Optional components.
const (
	ControllerManager Component = "kube-controller-manager"
	Scheduler         Component = "kube-scheduler"
)

// BinDirEnv names the environment variable that points at the pinned binaries when
// Options.BinDir is empty. The Makefile sets it from deploy/local/build-kube.sh.
const BinDirEnv = "METALAMBDA_KUBE_BIN"

// DefaultControllers are the kube-controller-manager controllers a cluster runs unless
// Options.Controllers says otherwise: enough for namespaces, garbage collection,
// service accounts, endpoints, the workload controllers, and binding and protecting
// PersistentVolumes and their claims (provisioning is left to a provisioner outside).
var DefaultControllers = []string{
	"namespace-controller", "garbage-collector-controller",
	"serviceaccount-controller", "serviceaccount-token-controller",
	"root-ca-certificate-publisher-controller", "clusterrole-aggregation-controller",
	"endpoints-controller", "endpointslice-controller", "endpointslice-mirroring-controller",
	"deployment-controller", "replicaset-controller", "statefulset-controller",
	"daemonset-controller", "job-controller", "cronjob-controller",
	"ttl-after-finished-controller", "pod-garbage-collector-controller",
	"persistentvolume-binder-controller", "persistentvolume-protection-controller",
	"persistentvolumeclaim-protection-controller", "ephemeral-volume-controller",
}

// Options configure a local control plane. Start from Defaults: with BinDirEnv set, a
// temporary data directory, free loopback ports and every component.
type Options struct {
	// BinDir holds etcd, kube-apiserver, kube-controller-manager and kube-scheduler.
	// Default: $METALAMBDA_KUBE_BIN (read by Defaults).
	BinDir string

	// DataDir holds etcd's data, keys, the kubeconfig and component logs. When empty,
	// Start creates a temporary directory and Stop removes it; a DataDir given here
	// is kept, and a later Start on it resumes the same cluster.
	DataDir string

	// Host is the loopback address every component binds to. Default 127.0.0.1.
	Host string

	// Ports; zero picks a free port.
	EtcdClientPort    int
	EtcdPeerPort      int
	APIServerPort     int
	ControllerMgrPort int
	SchedulerPort     int

	// Components lists the optional components to run. Default all of them; an
	// empty list runs only etcd and kube-apiserver.
	Components []Component

	// Controllers are passed to kube-controller-manager's --controllers.
	// Default DefaultControllers.
	Controllers []string

	// ServiceClusterIPRange is the Service IP range. Default 10.96.0.0/16.
	ServiceClusterIPRange string

	// EtcdNoFsync trades durability for speed (etcd --unsafe-no-fsync). Tests want
	// it; a persistent local platform does not.
	EtcdNoFsync bool

	// StartTimeout bounds how long Start waits for every component to be healthy.
	// Default 90s.
	StartTimeout time.Duration

	// ExtraArgs appends flags to a component's command line, keyed by binary name
	// ("etcd", "kube-apiserver", ...).
	ExtraArgs map[string][]string
}

// Defaults are the options of a control plane with every component, on free
// loopback ports, from the binaries $METALAMBDA_KUBE_BIN names; Start takes no zero
// value for one of them.
func Defaults() Options {
	return Options{
		BinDir:                os.Getenv(BinDirEnv),
		Host:                  "127.0.0.1",
		Components:            []Component{ControllerManager, Scheduler},
		Controllers:           DefaultControllers,
		ServiceClusterIPRange: "10.96.0.0/16",
		StartTimeout:          90 * time.Second,
	}
}

// picksPorts reports whether a port of o is zero, for pickPorts to pick.
func (o *Options) picksPorts() bool {
	for _, port := range o.ports() {
		if *port == 0 {
			return true
		}
	}
	return false
}

// ports are o's ports, each a pointer into o.
func (o *Options) ports() []*int {
	return []*int{&o.EtcdClientPort, &o.EtcdPeerPort, &o.APIServerPort, &o.ControllerMgrPort, &o.SchedulerPort}
}

// pickPorts gives every zero port a free one on Host.
func (o *Options) pickPorts() error {
	// Every port is held until all are chosen: a port released at once can be handed
	// out again, and two components given the same one fail to start.
	var held []net.Listener
	defer func() {
		for _, l := range held {
			l.Close()
		}
	}()
	for _, port := range o.ports() {
		if *port != 0 {
			continue
		}
		l, err := net.Listen("tcp", net.JoinHostPort(o.Host, "0"))
		if err != nil {
			return fmt.Errorf("find a free port on %s: %w", o.Host, err)
		}
		held = append(held, l)
		*port = l.Addr().(*net.TCPAddr).Port
	}
	return nil
}

// Validate reports the first problem with the options, in words a person can act on.
func (o *Options) Validate() error {
	if o.BinDir == "" {
		return fmt.Errorf("no control-plane binaries: set Options.BinDir or $%s (run `make kube`, which prints the directory)", BinDirEnv)
	}
	for _, name := range o.binaries() {
		path := filepath.Join(o.BinDir, name)
		info, err := os.Stat(path)
		if err != nil {
			return fmt.Errorf("control-plane binary %s is missing (run `make kube`): %w", path, err)
		}
		if info.Mode()&0o111 == 0 {
			return fmt.Errorf("control-plane binary %s is not executable", path)
		}
	}
	if o.Host == "" {
		return errors.New("cluster option Host must not be empty (start the options from cluster.Defaults())")
	}
	if ip := net.ParseIP(o.Host); ip == nil || !ip.IsLoopback() {
		return fmt.Errorf("host %q is not a loopback address", o.Host)
	}
	if o.ServiceClusterIPRange == "" {
		return errors.New("cluster option ServiceClusterIPRange must not be empty (start the options from cluster.Defaults())")
	}
	if _, _, err := net.ParseCIDR(o.ServiceClusterIPRange); err != nil {
		return fmt.Errorf("service cluster IP range: %w", err)
	}
	for _, c := range o.Components {
		if c != ControllerManager && c != Scheduler {
			return fmt.Errorf("unknown component %q (known: %s, %s)", c, ControllerManager, Scheduler)
		}
	}
	if o.runs(ControllerManager) && len(o.Controllers) == 0 {
		return errors.New("cluster option Controllers must not be empty when kube-controller-manager runs (start the options from cluster.Defaults())")
	}
	if o.StartTimeout <= 0 {
		return fmt.Errorf("cluster option StartTimeout must be positive, got %s (start the options from cluster.Defaults())", o.StartTimeout)
	}
	return nil
}

func (o *Options) runs(c Component) bool { return slices.Contains(o.Components, c) }

func (o *Options) binaries() []string {
	names := []string{"etcd", "kube-apiserver"}
	for _, c := range o.Components {
		names = append(names, string(c))
	}
	return names
}
