package node

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"net"
	"net/url"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes"
	"k8s.io/klog/v2"

	"github.com/metalambda/metalambda/internal/local/dns"
	"github.com/metalambda/metalambda/internal/local/serviceproxy"
)

// startServices starts the Service and EndpointSlice informers the container
// environment and the service proxy read, and the proxy itself on the bridge. It
// returns once the caches are filled, and a function that stops the proxy (after the
// pods, before the bridge goes).
func (n *Node) startServices(ctx context.Context) (stop func(), err error) {
	cidrs, err := n.serviceCIDRs(ctx)
	if err != nil {
		return nil, err
	}
	n.net.serviceCIDRs = cidrs
	factory := informers.NewSharedInformerFactory(n.kube, 0)
	n.serviceLister = factory.Core().V1().Services().Lister()
	proxy, err := serviceproxy.New(n.kube, factory, serviceproxy.Options{
		Link: n.opts.Bridge, Clients: n.net.subnet, APIServer: apiServerFor(n.kube, n.net.gw),
	})
	if err != nil {
		return nil, err
	}
	ctx, cancel := context.WithCancel(ctx)
	factory.Start(ctx.Done())
	done := make(chan struct{})
	go func() {
		defer close(done)
		if err := proxy.Run(ctx); err != nil && ctx.Err() == nil {
			klog.FromContext(ctx).Error(err, "Service proxy stopped")
		}
	}()
	stop = func() {
		cancel()
		<-done
		factory.Shutdown()
	}
	for typ, ok := range factory.WaitForCacheSync(ctx.Done()) {
		if !ok {
			stop()
			return nil, fmt.Errorf("informer for %v did not sync", typ)
		}
	}
	if err := n.startDNS(ctx, factory); err != nil {
		stop()
		return nil, err
	}
	return stop, nil
}

// startDNS serves the cluster's names on the bridge's host address, port 53: the
// nameserver of every pod with dnsPolicy ClusterFirst (resolvConf).
func (n *Node) startDNS(ctx context.Context, factory informers.SharedInformerFactory) error {
	host, err := dns.HostResolver(hostResolvConf)
	if err != nil {
		return err
	}
	srv, err := dns.New(factory.Core().V1().Services().Lister(), factory.Discovery().V1().EndpointSlices().Lister(),
		dns.Options{Domain: n.opts.ClusterDomain, Upstreams: hostUpstreams(host)})
	if err != nil {
		return err
	}
	if _, err := srv.ListenAndServe(ctx, net.JoinHostPort(n.net.gw.String(), "53")); err != nil {
		return err
	}
	n.hostResolver = host
	return nil
}

// hostResolvConf is the host's resolver configuration: what dnsPolicy Default pods
// get, and where names outside the cluster are sent.
const hostResolvConf = "/etc/resolv.conf"

func hostUpstreams(host dns.Resolver) []string {
	out := []string{}
	for _, ns := range host.Nameservers {
		out = append(out, net.JoinHostPort(ns, "53"))
	}
	return out
}

// resolvConf writes the pod's resolv.conf into dir and returns the bind mount that
// puts it at /etc/resolv.conf in every container, as a kubelet does.
func (n *Node) resolvConf(pod *corev1.Pod, dir string) (bindMount, error) {
	r, err := dns.ForPod(pod, n.net.gw, n.opts.ClusterDomain, n.hostResolver)
	if err != nil {
		return bindMount{}, invalidSpec("%v", err)
	}
	file := filepath.Join(dir, "resolv.conf")
	if err := os.WriteFile(file, []byte(r.String()), 0o644); err != nil {
		return bindMount{}, err
	}
	return bindMount{source: file, target: hostResolvConf, readOnly: true}, nil
}

// serviceCIDRs returns the cluster's IPv4 Service ranges (the API server publishes
// its --service-cluster-ip-range as the ServiceCIDR "kubernetes").
func (n *Node) serviceCIDRs(ctx context.Context) ([]string, error) {
	list, err := n.kube.NetworkingV1().ServiceCIDRs().List(ctx, metav1.ListOptions{})
	if err != nil {
		return nil, fmt.Errorf("list ServiceCIDRs: %w", err)
	}
	var out []string
	for _, sc := range list.Items {
		for _, c := range sc.Spec.CIDRs {
			if ip, _, err := net.ParseCIDR(c); err == nil && ip.To4() != nil {
				out = append(out, c)
			}
		}
	}
	if len(out) == 0 {
		return nil, errors.New("the cluster has no IPv4 ServiceCIDR")
	}
	slices.Sort(out)
	return out, nil
}

// apiServerFor says how pods reach the API server the node's client talks to: at
// the bridge's host address, on the API server's port.
func apiServerFor(kube kubernetes.Interface, gw net.IP) *serviceproxy.APIServer {
	cs, ok := kube.(*kubernetes.Clientset)
	if !ok || cs.CoreV1().RESTClient() == nil {
		return nil
	}
	u := cs.CoreV1().RESTClient().Get().URL()
	return &serviceproxy.APIServer{Address: gw, Target: hostWithPort(u)}
}

func hostWithPort(u *url.URL) string {
	if u.Port() != "" {
		return u.Host
	}
	port := "443"
	if u.Scheme == "http" {
		port = "80"
	}
	return net.JoinHostPort(u.Hostname(), port)
}

// services lists every Service the node knows (for the container environment).
func (n *Node) services(context.Context) ([]*corev1.Service, error) {
	if n.serviceLister == nil {
		return nil, nil
	}
	return n.serviceLister.List(labels.Everything())
}

// masterService is the Service every pod gets variables for, whatever its namespace.
const masterService = "kubernetes"

// serviceEnv returns the variables a kubelet gives a container of a pod in namespace
// ns for the Services it knows: the default/kubernetes Service always, and with
// service links enabled every Service of ns; {NAME}_SERVICE_HOST, _SERVICE_PORT,
// _SERVICE_PORT_{PORT} and the Docker-link style {NAME}_PORT_* variables.
func serviceEnv(services []*corev1.Service, ns string, enableLinks bool) []corev1.EnvVar {
	byName := map[string]*corev1.Service{}
	for _, s := range services {
		if !serviceIPSet(s) {
			continue
		}
		switch {
		case s.Namespace == metav1.NamespaceDefault && s.Name == masterService:
			if _, ok := byName[s.Name]; !ok {
				byName[s.Name] = s
			}
		case s.Namespace == ns && enableLinks:
			byName[s.Name] = s
		}
	}
	chosen := make([]*corev1.Service, 0, len(byName))
	for _, s := range byName {
		chosen = append(chosen, s)
	}
	slices.SortFunc(chosen, func(a, b *corev1.Service) int { return cmp.Compare(a.Name, b.Name) })
	var out []corev1.EnvVar
	for _, s := range chosen {
		out = append(out, serviceVars(s)...)
	}
	return out
}

func serviceIPSet(s *corev1.Service) bool {
	return s.Spec.ClusterIP != "" && s.Spec.ClusterIP != corev1.ClusterIPNone && len(s.Spec.Ports) > 0
}

func serviceVars(s *corev1.Service) []corev1.EnvVar {
	prefix := envName(s.Name)
	ip := s.Spec.ClusterIP
	out := []corev1.EnvVar{
		{Name: prefix + "_SERVICE_HOST", Value: ip},
		{Name: prefix + "_SERVICE_PORT", Value: strconv.Itoa(int(s.Spec.Ports[0].Port))},
	}
	for _, p := range s.Spec.Ports {
		if p.Name != "" {
			out = append(out, corev1.EnvVar{Name: prefix + "_SERVICE_PORT_" + envName(p.Name), Value: strconv.Itoa(int(p.Port))})
		}
	}
	for i, p := range s.Spec.Ports {
		proto := string(cmp.Or(p.Protocol, corev1.ProtocolTCP))
		addr := fmt.Sprintf("%s://%s", strings.ToLower(proto), net.JoinHostPort(ip, strconv.Itoa(int(p.Port))))
		if i == 0 {
			out = append(out, corev1.EnvVar{Name: prefix + "_PORT", Value: addr})
		}
		pp := fmt.Sprintf("%s_PORT_%d_%s", prefix, p.Port, strings.ToUpper(proto))
		out = append(out,
			corev1.EnvVar{Name: pp, Value: addr},
			corev1.EnvVar{Name: pp + "_PROTO", Value: strings.ToLower(proto)},
			corev1.EnvVar{Name: pp + "_PORT", Value: strconv.Itoa(int(p.Port))},
			corev1.EnvVar{Name: pp + "_ADDR", Value: ip},
		)
	}
	return out
}

// envName turns a Service or port name into a variable name, as a kubelet does.
func envName(s string) string { return strings.ToUpper(strings.ReplaceAll(s, "-", "_")) }
