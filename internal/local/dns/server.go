package dns

import (
	"context"
	"errors"
	"fmt"
	"net"
	"strings"
	"syscall"
	"time"

	"github.com/miekg/dns"
	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/labels"
	corelisters "k8s.io/client-go/listers/core/v1"
	discoverylisters "k8s.io/client-go/listers/discovery/v1"
	"k8s.io/klog/v2"
)

// DefaultDomain is the cluster domain when Options.Domain is empty, as a kubelet's
// --cluster-domain default.
const DefaultDomain = "cluster.local"

// ttl is the records' time to live: short, as CoreDNS's default of 5 seconds, so a
// Service recreated with a new address is seen soon.
const ttl = 5

// Options configure a Server.
type Options struct {
	// Domain is the cluster domain. Default DefaultDomain.
	Domain string
	// Upstreams are the resolvers ("ip:port") names outside the domain go to.
	// Default: the nameservers of the host's /etc/resolv.conf.
	Upstreams []string
	// ForwardTimeout bounds one forwarded query. Default 2s.
	ForwardTimeout time.Duration
}

// Server answers the cluster's names from Service and EndpointSlice listers.
type Server struct {
	services corelisters.ServiceLister
	slices   discoverylisters.EndpointSliceLister
	zone     string // "svc.<domain>." in canonical form
	opts     Options
	client   *dns.Client
}

// New returns a Server reading the given listers (their informers must be started
// by the caller).
func New(services corelisters.ServiceLister, slices discoverylisters.EndpointSliceLister, opts Options) (*Server, error) {
	if opts.Domain == "" {
		opts.Domain = DefaultDomain
	}
	if _, ok := dns.IsDomainName(opts.Domain); !ok {
		return nil, fmt.Errorf("cluster domain %q is not a domain name", opts.Domain)
	}
	if opts.Upstreams == nil {
		conf, err := dns.ClientConfigFromFile("/etc/resolv.conf")
		if err == nil {
			for _, s := range conf.Servers {
				opts.Upstreams = append(opts.Upstreams, net.JoinHostPort(s, conf.Port))
			}
		}
	}
	if opts.ForwardTimeout == 0 {
		opts.ForwardTimeout = 2 * time.Second
	}
	return &Server{
		services: services, slices: slices, opts: opts,
		zone:   dns.CanonicalName("svc." + opts.Domain),
		client: &dns.Client{Timeout: opts.ForwardTimeout},
	}, nil
}

// Domain is the cluster domain the server answers for.
func (s *Server) Domain() string { return s.opts.Domain }

// ListenAndServe answers on addr over UDP and TCP until ctx ends. It returns once
// both listeners are bound, with the address bound (addr's port may be 0), or the
// error that kept one from binding.
func (s *Server) ListenAndServe(ctx context.Context, addr string) (string, error) {
	pc, l, err := listenBoth(addr)
	if err != nil {
		return "", fmt.Errorf("cluster DNS: %w", err)
	}
	bound := pc.LocalAddr().String()
	started := make(chan struct{}, 2)
	notify := func() { started <- struct{}{} }
	servers := []*dns.Server{
		{PacketConn: pc, Handler: s, NotifyStartedFunc: notify},
		{Listener: l, Handler: s, NotifyStartedFunc: notify},
	}
	for _, srv := range servers {
		go func() {
			if err := srv.ActivateAndServe(); err != nil && ctx.Err() == nil {
				klog.FromContext(ctx).Error(err, "Cluster DNS stopped", "address", addr)
			}
		}()
	}
	<-started
	<-started
	go func() {
		<-ctx.Done()
		for _, srv := range servers {
			_ = srv.Shutdown()
		}
	}()
	return bound, nil
}

// listenBoth binds addr over UDP and then the same port over TCP. When addr's port
// is 0, the port the kernel picked for UDP may be taken over TCP by another process;
// then it tries a new one, a few times.
func listenBoth(addr string) (net.PacketConn, net.Listener, error) {
	_, port, err := net.SplitHostPort(addr)
	if err != nil {
		return nil, nil, err
	}
	for attempt := 0; ; attempt++ {
		pc, err := net.ListenPacket("udp", addr)
		if err != nil {
			return nil, nil, err
		}
		l, err := net.Listen("tcp", pc.LocalAddr().String())
		if err == nil {
			return pc, l, nil
		}
		pc.Close()
		if port != "0" || !errors.Is(err, syscall.EADDRINUSE) || attempt == 9 {
			return nil, nil, err
		}
	}
}

// ServeDNS answers one query: from the listers inside the cluster domain, from the
// upstream resolvers outside it.
func (s *Server) ServeDNS(w dns.ResponseWriter, req *dns.Msg) {
	if len(req.Question) != 1 {
		reply := new(dns.Msg).SetRcode(req, dns.RcodeFormatError)
		_ = w.WriteMsg(reply)
		return
	}
	q := req.Question[0]
	if !dns.IsSubDomain(s.zone, dns.CanonicalName(q.Name)) {
		_ = w.WriteMsg(s.forward(req))
		return
	}
	reply := new(dns.Msg).SetReply(req)
	reply.Authoritative = true
	answers, found, err := s.lookup(dns.CanonicalName(q.Name), q.Qtype)
	switch {
	case err != nil:
		reply.Rcode = dns.RcodeServerFailure
	case !found:
		reply.Rcode = dns.RcodeNameError
		reply.Ns = []dns.RR{s.soa()}
	default:
		reply.Answer = answers
	}
	_ = w.WriteMsg(reply)
}

// forward sends a query for a name outside the cluster to the first upstream that
// answers.
func (s *Server) forward(req *dns.Msg) *dns.Msg {
	for _, up := range s.opts.Upstreams {
		reply, _, err := s.client.Exchange(req, up)
		if err == nil {
			return reply
		}
	}
	return new(dns.Msg).SetRcode(req, dns.RcodeServerFailure)
}

// lookup answers a name under svc.<domain>: <service>.<namespace>.svc.<domain> or
// <hostname>.<service>.<namespace>.svc.<domain>. found is false when no such name
// exists; answers is empty when it exists without records of qtype.
func (s *Server) lookup(name string, qtype uint16) (answers []dns.RR, found bool, err error) {
	labels := dns.SplitDomainName(strings.TrimSuffix(name, s.zone))
	var hostname, service, namespace string
	switch len(labels) {
	case 2:
		service, namespace = labels[0], labels[1]
	case 3:
		hostname, service, namespace = labels[0], labels[1], labels[2]
	default:
		return nil, false, nil
	}
	svc, err := s.services.Services(namespace).Get(service)
	if apierrors.IsNotFound(err) {
		return nil, false, nil
	}
	if err != nil {
		return nil, false, err
	}
	if svc.Spec.Type == corev1.ServiceTypeExternalName {
		if hostname != "" {
			return nil, false, nil
		}
		if qtype != dns.TypeA && qtype != dns.TypeCNAME {
			return nil, true, nil
		}
		target := dns.Fqdn(svc.Spec.ExternalName)
		return []dns.RR{&dns.CNAME{Hdr: s.header(name, dns.TypeCNAME), Target: target}}, true, nil
	}
	var ips []net.IP
	if headless(svc) {
		ips, found, err = s.endpointIPs(svc, hostname)
		if err != nil || !found {
			return nil, found, err
		}
	} else {
		if hostname != "" {
			return nil, false, nil
		}
		for _, ip := range svc.Spec.ClusterIPs {
			ips = append(ips, net.ParseIP(ip))
		}
	}
	for _, ip := range ips {
		switch {
		case ip == nil:
		case ip.To4() != nil && qtype == dns.TypeA:
			answers = append(answers, &dns.A{Hdr: s.header(name, dns.TypeA), A: ip.To4()})
		case ip.To4() == nil && qtype == dns.TypeAAAA:
			answers = append(answers, &dns.AAAA{Hdr: s.header(name, dns.TypeAAAA), AAAA: ip})
		}
	}
	return answers, true, nil
}

func headless(svc *corev1.Service) bool {
	return svc.Spec.ClusterIP == "" || svc.Spec.ClusterIP == corev1.ClusterIPNone
}

// endpointIPs returns a headless Service's ready endpoint addresses, or with a
// hostname that endpoint's alone. A headless Service always exists; a hostname exists
// only if an endpoint carries it.
func (s *Server) endpointIPs(svc *corev1.Service, hostname string) ([]net.IP, bool, error) {
	sel := labels.SelectorFromSet(labels.Set{discoveryv1.LabelServiceName: svc.Name})
	eps, err := s.slices.EndpointSlices(svc.Namespace).List(sel)
	if err != nil {
		return nil, false, err
	}
	var ips []net.IP
	found := hostname == ""
	for _, es := range eps {
		for _, ep := range es.Endpoints {
			if ep.Conditions.Ready != nil && !*ep.Conditions.Ready {
				continue
			}
			if hostname != "" && (ep.Hostname == nil || *ep.Hostname != hostname) {
				continue
			}
			found = true
			for _, a := range ep.Addresses {
				ips = append(ips, net.ParseIP(a))
			}
		}
	}
	return ips, found, nil
}

func (s *Server) header(name string, rrtype uint16) dns.RR_Header {
	return dns.RR_Header{Name: name, Rrtype: rrtype, Class: dns.ClassINET, Ttl: ttl}
}

// soa is the zone's SOA record, sent with NXDOMAIN answers so resolvers may cache the
// negative answer briefly.
func (s *Server) soa() dns.RR {
	domain := dns.Fqdn(s.opts.Domain)
	return &dns.SOA{
		Hdr: s.header(domain, dns.TypeSOA), Ns: "ns.dns." + domain, Mbox: "hostmaster." + domain,
		Serial: 1, Refresh: 7200, Retry: 1800, Expire: 86400, Minttl: ttl,
	}
}
