package dns

import (
	"fmt"
	"net"
	"slices"
	"strings"

	"github.com/miekg/dns"
	corev1 "k8s.io/api/core/v1"
)

// Limits a kubelet enforces on a pod's resolver configuration.
const (
	maxNameservers = 3
	maxSearches    = 32
)

// Resolver is a resolv.conf's content that matters here.
type Resolver struct {
	Nameservers []string
	Searches    []string
	Options     []string // "name" or "name:value"
}

// HostResolver reads the host's resolver configuration (what a pod with dnsPolicy
// Default gets).
func HostResolver(file string) (Resolver, error) {
	conf, err := dns.ClientConfigFromFile(file)
	if err != nil {
		return Resolver{}, fmt.Errorf("read %s: %w", file, err)
	}
	r := Resolver{Nameservers: conf.Servers, Searches: conf.Search}
	if conf.Ndots != 1 {
		r.Options = append(r.Options, fmt.Sprintf("ndots:%d", conf.Ndots))
	}
	return r, nil
}

// ForPod is the resolver configuration a kubelet gives pod: with dnsPolicy
// ClusterFirst (the default) the cluster DNS server at clusterDNS and the search path
// of the pod's namespace; with Default the host's; with None only the pod's
// dnsConfig, which the other policies are merged with. A hostNetwork pod with
// ClusterFirst gets the host's, as with a kubelet; ClusterFirstWithHostNet gets the
// cluster's.
func ForPod(pod *corev1.Pod, clusterDNS net.IP, domain string, host Resolver) (Resolver, error) {
	var r Resolver
	policy := pod.Spec.DNSPolicy
	if policy == "" {
		policy = corev1.DNSClusterFirst
	}
	if policy == corev1.DNSClusterFirst && pod.Spec.HostNetwork {
		policy = corev1.DNSDefault
	}
	switch policy {
	case corev1.DNSClusterFirst, corev1.DNSClusterFirstWithHostNet:
		r.Nameservers = []string{clusterDNS.String()}
		r.Searches = append([]string{pod.Namespace + ".svc." + domain, "svc." + domain, domain}, host.Searches...)
		r.Options = []string{"ndots:5"}
	case corev1.DNSDefault:
		r = Resolver{Nameservers: slices.Clone(host.Nameservers), Searches: slices.Clone(host.Searches), Options: slices.Clone(host.Options)}
	case corev1.DNSNone:
		if pod.Spec.DNSConfig == nil || len(pod.Spec.DNSConfig.Nameservers) == 0 {
			return Resolver{}, fmt.Errorf("dnsPolicy None needs dnsConfig.nameservers")
		}
	default:
		return Resolver{}, fmt.Errorf("dnsPolicy %q is not one of ClusterFirst, ClusterFirstWithHostNet, Default, None", policy)
	}
	if c := pod.Spec.DNSConfig; c != nil {
		r.Nameservers = appendNew(r.Nameservers, c.Nameservers...)
		r.Searches = appendNew(r.Searches, c.Searches...)
		for _, o := range c.Options {
			opt := o.Name
			if o.Value != nil {
				opt += ":" + *o.Value
			}
			r.Options = slices.DeleteFunc(r.Options, func(have string) bool { return optionName(have) == o.Name })
			r.Options = append(r.Options, opt)
		}
	}
	if len(r.Nameservers) > maxNameservers {
		return Resolver{}, fmt.Errorf("the pod's resolver would have %d nameservers, more than %d", len(r.Nameservers), maxNameservers)
	}
	if len(r.Searches) > maxSearches {
		return Resolver{}, fmt.Errorf("the pod's resolver would have %d search domains, more than %d", len(r.Searches), maxSearches)
	}
	return r, nil
}

func appendNew(list []string, more ...string) []string {
	for _, s := range more {
		if !slices.Contains(list, s) {
			list = append(list, s)
		}
	}
	return list
}

func optionName(opt string) string { name, _, _ := strings.Cut(opt, ":"); return name }

// String is the resolv.conf file.
func (r Resolver) String() string {
	var b strings.Builder
	for _, ns := range r.Nameservers {
		fmt.Fprintf(&b, "nameserver %s\n", ns)
	}
	if len(r.Searches) > 0 {
		fmt.Fprintf(&b, "search %s\n", strings.Join(r.Searches, " "))
	}
	if len(r.Options) > 0 {
		fmt.Fprintf(&b, "options %s\n", strings.Join(r.Options, " "))
	}
	return b.String()
}
