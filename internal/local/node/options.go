package node

import (
	"errors"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"time"

	"github.com/metalambda/metalambda/internal/defaults"
	"github.com/metalambda/metalambda/internal/gateway/sandbox"
)

// CNIInstallHint says how to get the CNI plugins the node needs.
const CNIInstallHint = "apt-get install -y containernetworking-plugins"

// Options configure a local node. Start from Defaults.
type Options struct {
	// Name is the Node's name. Default "metalambda-local".
	Name string
	// PodCIDR is the subnet pods get their addresses from; its first address is the
	// bridge's (and the Node's InternalIP). Default 10.244.0.0/24.
	PodCIDR string
	// Bridge is the Linux bridge the pods attach to. Default "mlbr0".
	Bridge string
	// CNIBinDir holds the CNI plugins (bridge, host-local). Default /usr/lib/cni.
	CNIBinDir string
	// StateDir holds pod directories (volumes, logs) and CNI state. Default
	// /var/lib/metalambda/node.
	StateDir string
	// Python is the host interpreter that python images and commands run. Default: the
	// real path of the python3 found on PATH.
	Python string
	// NodeJS is the host Node.js binary that node images and node commands run.
	// Default: node on PATH; without one, node images run placeholders.
	NodeJS string
	// Images are image rules tried before ImageMapFile's and the built-in ones; the
	// first rule that matches an image decides how it runs.
	Images []ImageRule
	// ImageMapFile is a YAML file of further image rules, `images:` with a list of
	// {image, kind, interpreter} (docs/local-platform.md).
	ImageMapFile string
	// ClientCAFile is a PEM file of the CAs whose client certificates the
	// container-log endpoint accepts. Default: the API server's client CA, which it
	// publishes in kube-system/extension-apiserver-authentication.
	ClientCAFile string
	// BackoffInitial and BackoffMax bound the restart back-off of crashing containers.
	// Defaults 10s and 5m, as a kubelet.
	BackoffInitial time.Duration
	BackoffMax     time.Duration
	// HeartbeatInterval is how often the Node status and Lease are renewed. Default 10s.
	HeartbeatInterval time.Duration
	// ClusterDomain is the domain of the node's cluster DNS, which serves Service
	// names on the bridge's host address for pods with dnsPolicy ClusterFirst.
	// Default cluster.local, as a kubelet's --cluster-domain.
	ClusterDomain string
	// KubeletPort serves the container-log endpoint (`kubectl logs`) on the node's
	// address. Default 10250.
	KubeletPort int

	// imageRules is the effective image table (Validate builds it).
	imageRules []ImageRule
	// runtimePaths are, by interpreter or entrypoint, the host paths outside the
	// system directories that a container running it must see (Validate finds
	// them): the interpreter's installation, the entrypoint itself.
	runtimePaths map[string][]string
}

// requiredPlugins are the CNI plugins the node runs.
var requiredPlugins = []string{"bridge", "host-local"}

// Defaults are the options of `metalambda up --node`: its flag defaults are these,
// and New takes no zero value for one of them. Python and NodeJS stay empty: they
// are looked up on PATH.
func Defaults() Options {
	return Options{
		Name:              "metalambda-local",
		PodCIDR:           "10.244.0.0/24",
		Bridge:            "mlbr0",
		CNIBinDir:         "/usr/lib/cni",
		StateDir:          "/var/lib/metalambda/node",
		ClusterDomain:     "cluster.local",
		BackoffInitial:    10 * time.Second,
		BackoffMax:        5 * time.Minute,
		HeartbeatInterval: 10 * time.Second,
		KubeletPort:       10250,
	}
}

// checkSet refuses options that did not start from Defaults.
func (o *Options) checkSet() error {
	return defaults.Check("node", "set",
		defaults.Option{Name: "Name", Set: o.Name != ""},
		defaults.Option{Name: "CNIBinDir", Set: o.CNIBinDir != ""},
		defaults.Option{Name: "ClusterDomain", Set: o.ClusterDomain != ""},
		defaults.Option{Name: "BackoffInitial", Set: o.BackoffInitial > 0},
		defaults.Option{Name: "HeartbeatInterval", Set: o.HeartbeatInterval > 0},
		defaults.Option{Name: "KubeletPort", Set: o.KubeletPort > 0},
	)
}

// Check reports what would keep a node with these options from starting on this
// machine (the checks New makes), without changing o: callers run it before starting
// anything else, so that a missing CNI plugin is named before a control plane starts.
func (o Options) Check() error {
	return o.Validate()
}

// Validate reports the first problem with the options or the machine, in words a
// person can act on. It resolves Python to a real interpreter path.
func (o *Options) Validate() error {
	if os.Geteuid() != 0 {
		return errors.New("the local node needs root (network namespaces, bridge, mounts): run it as root")
	}
	if err := o.checkSet(); err != nil {
		return err
	}
	for _, p := range requiredPlugins {
		path := filepath.Join(o.CNIBinDir, p)
		if _, err := os.Stat(path); err != nil {
			return fmt.Errorf("CNI plugin %s is missing: install the CNI plugins with `%s` (or set CNIBinDir)", path, CNIInstallHint)
		}
	}
	for _, tool := range []string{"ip", "nsenter", "sh"} {
		if _, err := exec.LookPath(tool); err != nil {
			return fmt.Errorf("%s is not on PATH (apt-get install -y iproute2 util-linux)", tool)
		}
	}
	if _, err := exec.LookPath("bwrap"); err != nil {
		return errors.New("bwrap, which contains every container, is not on PATH (apt-get install -y bubblewrap)")
	}
	ip, subnet, err := net.ParseCIDR(o.PodCIDR)
	if err != nil || ip.To4() == nil {
		return fmt.Errorf("pod CIDR %q is not an IPv4 subnet", o.PodCIDR)
	}
	if ones, _ := subnet.Mask.Size(); ones > 29 {
		return fmt.Errorf("pod CIDR %q is too small", o.PodCIDR)
	}
	if o.Bridge == "" || len(o.Bridge) > 15 || strings.ContainsAny(o.Bridge, "/ ") {
		return fmt.Errorf("bridge name %q is not a valid interface name (1-15 characters)", o.Bridge)
	}
	if !filepath.IsAbs(o.StateDir) {
		return fmt.Errorf("state directory %q must be an absolute path", o.StateDir)
	}
	if o.BackoffMax < o.BackoffInitial {
		return errors.New("restart back-off: need 0 < BackoffInitial <= BackoffMax")
	}
	python, err := resolvePython(o.Python)
	if err != nil {
		return err
	}
	o.Python = python
	if o.NodeJS, err = resolveNodeJS(o.NodeJS); err != nil {
		return err
	}
	if err := o.buildImageRules(); err != nil {
		return err
	}
	return o.findRuntimePaths()
}

// findRuntimePaths fills runtimePaths for the node's interpreters and those and
// the entrypoints of the image rules.
func (o *Options) findRuntimePaths() error {
	o.runtimePaths = map[string][]string{}
	add := func(key string, paths []string, err error) error {
		if err != nil {
			return err
		}
		o.runtimePaths[key] = outsideSystemDirs(paths)
		return nil
	}
	pythons, nodes := []string{o.Python}, []string{o.NodeJS}
	for _, r := range o.imageRules {
		switch {
		case runtimeKind(r.Kind) == runtimePython && r.Interpreter != "":
			pythons = append(pythons, r.Interpreter)
		case runtimeKind(r.Kind) == runtimeNode && r.Interpreter != "":
			nodes = append(nodes, r.Interpreter)
		case len(r.Entrypoint) > 0:
			if err := add(r.Entrypoint[0], entrypointPaths(r.Entrypoint[0]), nil); err != nil {
				return err
			}
		}
	}
	for _, p := range pythons {
		paths, err := pythonPaths(p)
		if err := add(p, paths, err); err != nil {
			return err
		}
	}
	for _, n := range nodes {
		if n != "" {
			_ = add(n, nodePaths(n), nil)
		}
	}
	return nil
}

// entrypointPaths are a host entrypoint and, when they are beside it, the
// sandbox's launcher and worker executables: the gateway's image holds them
// beside the gateway, which starts its workers from them.
func entrypointPaths(entrypoint string) []string {
	paths := []string{entrypoint}
	names := []string{sandbox.LauncherExecutable, sandbox.WorkerExecutable}
	for _, rt := range sandbox.WorkerRuntimes {
		names = append(names, sandbox.WorkerExecutableFor(rt))
	}
	for _, name := range names {
		exe := filepath.Join(filepath.Dir(entrypoint), name)
		if fi, err := os.Stat(exe); err == nil && fi.Mode().IsRegular() {
			paths = append(paths, exe)
		}
	}
	return paths
}

// pythonPaths are the interpreter and its installation (sys.prefix and
// sys.base_prefix, which differ in a virtual environment).
func pythonPaths(python string) ([]string, error) {
	out, err := exec.Command(python, "-c", "import sys; print(sys.prefix); print(sys.base_prefix)").Output()
	if err != nil {
		return nil, fmt.Errorf("asking %s for its installation: %w", python, err)
	}
	return append([]string{python}, strings.Fields(string(out))...), nil
}

// nodePaths are Node.js and its installation: the directory above its bin/.
func nodePaths(node string) []string {
	real, err := filepath.EvalSymlinks(node)
	if err != nil {
		return []string{node}
	}
	if filepath.Base(filepath.Dir(real)) == "bin" {
		return []string{node, filepath.Dir(filepath.Dir(real))}
	}
	return []string{node, real}
}

// systemDirs are what every container sees read-only (the sandbox shows them).
var systemDirs = []string{"/usr", "/bin", "/lib", "/lib64", "/sbin"}

// outsideSystemDirs are the real paths of paths that are neither a system
// directory nor inside one, and none inside another of them.
func outsideSystemDirs(paths []string) []string {
	var out []string
	for _, p := range paths {
		real, err := filepath.EvalSymlinks(p)
		if err != nil || real == "/" || slices.ContainsFunc(systemDirs, func(d string) bool { return sandbox.Within(real, d) }) {
			continue
		}
		out = append(out, real)
	}
	slices.SortFunc(out, func(a, b string) int { return len(a) - len(b) })
	var kept []string
	for _, p := range out {
		if !slices.ContainsFunc(kept, func(k string) bool { return sandbox.Within(p, k) }) {
			kept = append(kept, p)
		}
	}
	return kept
}

// resolveNodeJS returns the path of the host's Node.js: name if set (it must
// exist), else node on PATH, else "" (node images then run placeholders).
func resolveNodeJS(name string) (string, error) {
	if name == "" {
		path, _ := exec.LookPath("node")
		return path, nil
	}
	path, err := exec.LookPath(name)
	if err != nil {
		return "", fmt.Errorf("the Node.js binary %q for node images is not an executable on this host", name)
	}
	return path, nil
}

// resolvePython returns the real interpreter behind name (a shim such as pyenv's is
// resolved by asking the interpreter itself).
func resolvePython(name string) (string, error) {
	if name == "" {
		name = "python3"
	}
	path, err := exec.LookPath(name)
	if err != nil {
		return "", fmt.Errorf("no host python3 (%s) for python images: install python3 or set Options.Python", name)
	}
	out, err := exec.Command(path, "-c", "import sys; print(sys.executable)").Output()
	if err != nil {
		return "", fmt.Errorf("run %s: %w", path, err)
	}
	real := strings.TrimSpace(string(out))
	if real == "" {
		return path, nil
	}
	return real, nil
}

// gateway returns the bridge's address (the subnet's first host) with its prefix.
func gateway(podCIDR string) (net.IP, *net.IPNet) {
	_, subnet, _ := net.ParseCIDR(podCIDR)
	gw := make(net.IP, 4)
	copy(gw, subnet.IP.To4())
	gw[3]++
	return gw, subnet
}
