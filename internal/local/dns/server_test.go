package dns

import (
	"context"
	"net"
	"slices"
	"testing"

	"github.com/miekg/dns"
	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	corelisters "k8s.io/client-go/listers/core/v1"
	discoverylisters "k8s.io/client-go/listers/discovery/v1"
	"k8s.io/client-go/tools/cache"
	"k8s.io/utils/ptr"
)

// startServer serves the given objects on a loopback port and returns its address.
func startServer(t *testing.T, upstreams []string, objs ...any) string {
	t.Helper()
	svcs := cache.NewIndexer(cache.MetaNamespaceKeyFunc, cache.Indexers{cache.NamespaceIndex: cache.MetaNamespaceIndexFunc})
	slices := cache.NewIndexer(cache.MetaNamespaceKeyFunc, cache.Indexers{cache.NamespaceIndex: cache.MetaNamespaceIndexFunc})
	for _, o := range objs {
		switch o := o.(type) {
		case *corev1.Service:
			_ = svcs.Add(o)
		case *discoveryv1.EndpointSlice:
			_ = slices.Add(o)
		}
	}
	if upstreams == nil {
		upstreams = []string{}
	}
	s, err := New(corelisters.NewServiceLister(svcs), discoverylisters.NewEndpointSliceLister(slices), Options{Upstreams: upstreams})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	t.Cleanup(cancel)
	addr, err := s.ListenAndServe(ctx, "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	return addr
}

func query(t *testing.T, addr, name string, qtype uint16, network string) *dns.Msg {
	t.Helper()
	c := &dns.Client{Net: network}
	reply, _, err := c.Exchange(new(dns.Msg).SetQuestion(dns.Fqdn(name), qtype), addr)
	if err != nil {
		t.Fatalf("query %s: %v", name, err)
	}
	return reply
}

// answers lists the A addresses and CNAME targets of a reply.
func answers(m *dns.Msg) []string {
	var out []string
	for _, rr := range m.Answer {
		switch rr := rr.(type) {
		case *dns.A:
			out = append(out, rr.A.String())
		case *dns.CNAME:
			out = append(out, "CNAME "+rr.Target)
		}
	}
	slices.Sort(out)
	return out
}

func TestServiceRecords(t *testing.T) {
	meta := func(ns, name string) metav1.ObjectMeta { return metav1.ObjectMeta{Namespace: ns, Name: name} }
	objs := []any{
		&corev1.Service{ObjectMeta: meta("apps", "web"), Spec: corev1.ServiceSpec{ClusterIP: "10.96.0.20", ClusterIPs: []string{"10.96.0.20"}}},
		&corev1.Service{ObjectMeta: meta("apps", "db"), Spec: corev1.ServiceSpec{ClusterIP: corev1.ClusterIPNone}},
		&corev1.Service{ObjectMeta: meta("apps", "ext"), Spec: corev1.ServiceSpec{Type: corev1.ServiceTypeExternalName, ExternalName: "db.example.org"}},
		&discoveryv1.EndpointSlice{
			ObjectMeta: metav1.ObjectMeta{Namespace: "apps", Name: "db-abc", Labels: map[string]string{discoveryv1.LabelServiceName: "db"}},
			Endpoints: []discoveryv1.Endpoint{
				{Addresses: []string{"10.244.0.5"}, Hostname: ptr.To("db-0"), Conditions: discoveryv1.EndpointConditions{Ready: ptr.To(true)}},
				{Addresses: []string{"10.244.0.6"}, Hostname: ptr.To("db-1"), Conditions: discoveryv1.EndpointConditions{Ready: ptr.To(true)}},
				{Addresses: []string{"10.244.0.7"}, Hostname: ptr.To("db-2"), Conditions: discoveryv1.EndpointConditions{Ready: ptr.To(false)}},
			},
		},
	}
	addr := startServer(t, nil, objs...)
	for _, tc := range []struct {
		name  string
		qtype uint16
		rcode int
		want  []string
	}{
		{"web.apps.svc.cluster.local", dns.TypeA, dns.RcodeSuccess, []string{"10.96.0.20"}},
		{"WEB.Apps.svc.cluster.local", dns.TypeA, dns.RcodeSuccess, []string{"10.96.0.20"}},
		{"web.apps.svc.cluster.local", dns.TypeAAAA, dns.RcodeSuccess, nil},
		{"db.apps.svc.cluster.local", dns.TypeA, dns.RcodeSuccess, []string{"10.244.0.5", "10.244.0.6"}},
		{"db-1.db.apps.svc.cluster.local", dns.TypeA, dns.RcodeSuccess, []string{"10.244.0.6"}},
		{"db-2.db.apps.svc.cluster.local", dns.TypeA, dns.RcodeNameError, nil},
		{"ext.apps.svc.cluster.local", dns.TypeA, dns.RcodeSuccess, []string{"CNAME db.example.org."}},
		{"web.other.svc.cluster.local", dns.TypeA, dns.RcodeNameError, nil},
		{"x.web.apps.svc.cluster.local", dns.TypeA, dns.RcodeNameError, nil},
		{"apps.svc.cluster.local", dns.TypeA, dns.RcodeNameError, nil},
	} {
		for _, network := range []string{"udp", "tcp"} {
			reply := query(t, addr, tc.name, tc.qtype, network)
			if reply.Rcode != tc.rcode || !slices.Equal(answers(reply), tc.want) {
				t.Errorf("%s %s over %s: rcode %s, answers %v; want %s, %v", tc.name, dns.TypeToString[tc.qtype], network,
					dns.RcodeToString[reply.Rcode], answers(reply), dns.RcodeToString[tc.rcode], tc.want)
			}
			if !reply.Authoritative {
				t.Errorf("%s: answer is not authoritative", tc.name)
			}
		}
	}
}

// TestForward checks that names outside the cluster go to the upstream resolver, and
// that a dead upstream is a SERVFAIL, not a hang.
func TestForward(t *testing.T) {
	upstream := startUpstream(t, "example.org.", "192.0.2.7")
	addr := startServer(t, []string{upstream})
	if got := answers(query(t, addr, "example.org", dns.TypeA, "udp")); !slices.Equal(got, []string{"192.0.2.7"}) {
		t.Errorf("forwarded example.org: %v, want [192.0.2.7]", got)
	}
	dead := startServer(t, []string{"127.0.0.1:1"})
	if reply := query(t, dead, "example.org", dns.TypeA, "udp"); reply.Rcode != dns.RcodeServerFailure {
		t.Errorf("with no upstream answering: rcode %s, want SERVFAIL", dns.RcodeToString[reply.Rcode])
	}
}

// startUpstream is a resolver on loopback that knows one name.
func startUpstream(t *testing.T, name, ip string) string {
	t.Helper()
	pc, err := net.ListenPacket("udp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	srv := &dns.Server{PacketConn: pc, Handler: dns.HandlerFunc(func(w dns.ResponseWriter, r *dns.Msg) {
		m := new(dns.Msg).SetReply(r)
		if r.Question[0].Name == name {
			m.Answer = []dns.RR{&dns.A{Hdr: dns.RR_Header{Name: name, Rrtype: dns.TypeA, Class: dns.ClassINET, Ttl: 60}, A: net.ParseIP(ip)}}
		} else {
			m.Rcode = dns.RcodeNameError
		}
		_ = w.WriteMsg(m)
	})}
	go func() { _ = srv.ActivateAndServe() }()
	t.Cleanup(func() { _ = srv.Shutdown() })
	return pc.LocalAddr().String()
}

func TestForPod(t *testing.T) {
	host := Resolver{Nameservers: []string{"192.0.2.53"}, Searches: []string{"corp.example"}}
	dnsIP := net.ParseIP("10.244.0.1")
	pod := func(policy corev1.DNSPolicy, hostNet bool, cfg *corev1.PodDNSConfig) *corev1.Pod {
		return &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: "apps"}, Spec: corev1.PodSpec{DNSPolicy: policy, HostNetwork: hostNet, DNSConfig: cfg}}
	}
	for _, tc := range []struct {
		name string
		pod  *corev1.Pod
		want string
		err  bool
	}{
		{"default policy is ClusterFirst", pod("", false, nil),
			"nameserver 10.244.0.1\nsearch apps.svc.cluster.local svc.cluster.local cluster.local corp.example\noptions ndots:5\n", false},
		{"hostNetwork with ClusterFirst gets the host's", pod(corev1.DNSClusterFirst, true, nil),
			"nameserver 192.0.2.53\nsearch corp.example\n", false},
		{"ClusterFirstWithHostNet", pod(corev1.DNSClusterFirstWithHostNet, true, nil),
			"nameserver 10.244.0.1\nsearch apps.svc.cluster.local svc.cluster.local cluster.local corp.example\noptions ndots:5\n", false},
		{"dnsConfig merges", pod("", false, &corev1.PodDNSConfig{
			Nameservers: []string{"192.0.2.9"}, Searches: []string{"extra.example", "svc.cluster.local"},
			Options: []corev1.PodDNSConfigOption{{Name: "ndots", Value: ptr.To("2")}, {Name: "edns0"}},
		}), "nameserver 10.244.0.1\nnameserver 192.0.2.9\nsearch apps.svc.cluster.local svc.cluster.local cluster.local corp.example extra.example\noptions ndots:2 edns0\n", false},
		{"None with dnsConfig", pod(corev1.DNSNone, false, &corev1.PodDNSConfig{Nameservers: []string{"192.0.2.9"}}),
			"nameserver 192.0.2.9\n", false},
		{"None without nameservers", pod(corev1.DNSNone, false, nil), "", true},
		{"too many nameservers", pod("", false, &corev1.PodDNSConfig{Nameservers: []string{"192.0.2.1", "192.0.2.2", "192.0.2.3"}}), "", true},
		{"unknown policy", pod("Cluster", false, nil), "", true},
	} {
		r, err := ForPod(tc.pod, dnsIP, DefaultDomain, host)
		if (err != nil) != tc.err {
			t.Errorf("%s: error %v, want error %v", tc.name, err, tc.err)
			continue
		}
		if err == nil && r.String() != tc.want {
			t.Errorf("%s:\n%s\nwant:\n%s", tc.name, r, tc.want)
		}
	}
}
