package node

import (
	"context"
	"encoding/json"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strings"

	"github.com/containernetworking/cni/libcni"
	current "github.com/containernetworking/cni/pkg/types/100"
)

// cniNetwork is the name of the node's CNI network.
const cniNetwork = "metalambda"

// network attaches pod network namespaces to the node's bridge through CNI.
type network struct {
	cni    *libcni.CNIConfig
	list   *libcni.NetworkConfigList
	bridge string
	gw     net.IP
	subnet *net.IPNet
	// serviceCIDRs are routed from every pod to the bridge's host address, where the
	// service proxy answers (set before the first pod; see services.go).
	serviceCIDRs []string
}

func newNetwork(opts Options) (*network, error) {
	gw, subnet := gateway(opts.PodCIDR)
	conf := map[string]any{
		"cniVersion": "1.0.0",
		"name":       cniNetwork,
		"plugins": []any{map[string]any{
			"type":      "bridge",
			"bridge":    opts.Bridge,
			"isGateway": true,
			"ipMasq":    false,
			"ipam": map[string]any{
				"type":    "host-local",
				"ranges":  [][]map[string]string{{{"subnet": subnet.String(), "gateway": gw.String()}}},
				"dataDir": filepath.Join(opts.StateDir, "cni", "networks"),
			},
		}},
	}
	data, err := json.Marshal(conf)
	if err != nil {
		return nil, err
	}
	list, err := libcni.ConfListFromBytes(data)
	if err != nil {
		return nil, fmt.Errorf("CNI configuration: %w", err)
	}
	return &network{
		cni:    libcni.NewCNIConfigWithCacheDir([]string{opts.CNIBinDir}, filepath.Join(opts.StateDir, "cni", "cache"), nil),
		list:   list,
		bridge: opts.Bridge,
		gw:     gw,
		subnet: subnet,
	}, nil
}

// ensureBridge creates the bridge with the gateway address, so the node has its
// InternalIP before the first pod. A bridge of that name left by an earlier run is
// taken over.
func (nw *network) ensureBridge(ctx context.Context) error {
	if _, err := net.InterfaceByName(nw.bridge); err != nil {
		if err := ipCmd(ctx, "link", "add", nw.bridge, "type", "bridge"); err != nil {
			return err
		}
	}
	ones, _ := nw.subnet.Mask.Size()
	addr := fmt.Sprintf("%s/%d", nw.gw, ones)
	if err := ipCmd(ctx, "addr", "replace", addr, "dev", nw.bridge); err != nil {
		return err
	}
	return ipCmd(ctx, "link", "set", nw.bridge, "up")
}

func (nw *network) removeBridge(ctx context.Context) error {
	if _, err := net.InterfaceByName(nw.bridge); err != nil {
		return nil
	}
	return ipCmd(ctx, "link", "del", nw.bridge)
}

// netnsPath is where `ip netns add` pins a namespace.
func netnsPath(name string) string { return "/run/netns/" + name }

// attach creates the network namespace and runs CNI ADD into it; it returns the
// pod's address.
func (nw *network) attach(ctx context.Context, netns, id string) (string, error) {
	if _, err := os.Stat(netnsPath(netns)); err != nil {
		if err := ipCmd(ctx, "netns", "add", netns); err != nil {
			return "", err
		}
	}
	if err := ipCmd(ctx, "-n", netns, "link", "set", "lo", "up"); err != nil {
		return "", err
	}
	res, err := nw.cni.AddNetworkList(ctx, nw.list, nw.runtimeConf(netns, id))
	if err != nil {
		return "", fmt.Errorf("CNI ADD: %w", err)
	}
	cur, err := current.NewResultFromResult(res)
	if err != nil {
		return "", err
	}
	for _, cidr := range nw.serviceCIDRs {
		if err := ipCmd(ctx, "-n", netns, "route", "replace", cidr, "via", nw.gw.String()); err != nil {
			return "", err
		}
	}
	for _, ip := range cur.IPs {
		if ip.Address.IP.To4() != nil {
			return ip.Address.IP.String(), nil
		}
	}
	return "", fmt.Errorf("CNI ADD gave no IPv4 address: %v", cur)
}

// detach runs CNI DEL (releasing the address) and removes the network namespace.
func (nw *network) detach(ctx context.Context, netns, id string) error {
	var errs []string
	if err := nw.cni.DelNetworkList(ctx, nw.list, nw.runtimeConf(netns, id)); err != nil {
		errs = append(errs, "CNI DEL: "+err.Error())
	}
	if _, err := os.Stat(netnsPath(netns)); err == nil {
		if err := ipCmd(ctx, "netns", "del", netns); err != nil {
			errs = append(errs, err.Error())
		}
	}
	if len(errs) > 0 {
		return fmt.Errorf("detach %s: %s", netns, strings.Join(errs, "; "))
	}
	return nil
}

func (nw *network) runtimeConf(netns, id string) *libcni.RuntimeConf {
	return &libcni.RuntimeConf{ContainerID: id, NetNS: netnsPath(netns), IfName: "eth0"}
}

func ipCmd(ctx context.Context, args ...string) error {
	out, err := exec.CommandContext(ctx, "ip", args...).CombinedOutput()
	if err != nil {
		return fmt.Errorf("ip %s: %w: %s", strings.Join(args, " "), err, strings.TrimSpace(string(out)))
	}
	return nil
}
