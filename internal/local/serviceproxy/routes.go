package serviceproxy

import (
	"net"
	"slices"
	"strconv"

	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/metalambda/metalambda/internal/local/endpoints"
)

// route is where a ClusterIP:port listener sends its connections: the ready
// endpoints of one port of one Service.
type route struct {
	service types.NamespacedName
	port    string // the Service port's name, which its EndpointSlice ports carry
}

// desiredRoutes returns a route for every TCP port of every Service with an IPv4
// ClusterIP, keyed by "ClusterIP:port".
func desiredRoutes(services []*corev1.Service) map[string]route {
	out := map[string]route{}
	for _, svc := range services {
		if svc.Spec.Type == corev1.ServiceTypeExternalName {
			continue
		}
		ip := net.ParseIP(svc.Spec.ClusterIP)
		if ip == nil || ip.To4() == nil {
			continue // headless ("None"), unallocated, or IPv6
		}
		for _, p := range svc.Spec.Ports {
			if p.Protocol != "" && p.Protocol != corev1.ProtocolTCP {
				continue
			}
			key := net.JoinHostPort(ip.String(), strconv.Itoa(int(p.Port)))
			out[key] = route{service: types.NamespacedName{Namespace: svc.Namespace, Name: svc.Name}, port: p.Name}
		}
	}
	return out
}

// readyBackends returns the "ip:port" of every IPv4 endpoint that takes new
// connections (the ready ones, or while none is, those serving as they terminate:
// endpoints.Choose) and serves the Service port named portName, sorted and without
// duplicates.
func readyBackends(portName string, eps []*discoveryv1.EndpointSlice) []string {
	return endpoints.Choose(func(use func(discoveryv1.EndpointConditions) bool) []string {
		var out []string
		for _, s := range eps {
			if s.AddressType != discoveryv1.AddressTypeIPv4 {
				continue
			}
			port, ok := slicePort(s, portName)
			if !ok {
				continue
			}
			for _, e := range s.Endpoints {
				if !use(e.Conditions) {
					continue
				}
				for _, a := range e.Addresses {
					out = append(out, net.JoinHostPort(a, strconv.Itoa(int(port))))
				}
			}
		}
		slices.Sort(out)
		return slices.Compact(out)
	})
}

// slicePort finds the TCP port named name in an EndpointSlice.
func slicePort(s *discoveryv1.EndpointSlice, name string) (int32, bool) {
	for _, p := range s.Ports {
		pname := ""
		if p.Name != nil {
			pname = *p.Name
		}
		tcp := p.Protocol == nil || *p.Protocol == corev1.ProtocolTCP
		if pname == name && tcp && p.Port != nil {
			return *p.Port, true
		}
	}
	return 0, false
}
