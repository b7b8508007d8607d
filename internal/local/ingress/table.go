package ingress

import (
	"cmp"
	"fmt"
	"net"
	"slices"
	"strconv"
	"strings"
	"sync/atomic"

	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	networkingv1 "k8s.io/api/networking/v1"

	"github.com/metalambda/metalambda/internal/local/endpoints"
)

// classAnnotation is the class of Ingresses written before spec.ingressClassName.
const classAnnotation = "kubernetes.io/ingress.class"

// world is what a table is built from: the informers' current objects.
type world struct {
	ingresses []*networkingv1.Ingress
	services  []*corev1.Service
	slices    []*discoveryv1.EndpointSlice
}

// table is an immutable routing table. Only the backends' round-robin counters change
// after it is built.
type table struct {
	exact    map[string][]route // by host, in precedence order
	wildcard map[string][]route // by "*.suffix", in precedence order
	any      []route            // rules without host, in precedence order
	defaults []defaultRoute     // oldest Ingress first
	backends map[string]*backend
}

// route is one path of one Ingress rule.
type route struct {
	host    string // as written in the rule; "" for any host
	path    pathRule
	ingress *ingressRef
	backend *backend
}

// defaultRoute is an Ingress's spec.defaultBackend.
type defaultRoute struct {
	ingress *ingressRef
	hosts   []string // hosts of the Ingress's rules; "" for a rule without host
	backend *backend
}

// ingressRef names an Ingress and orders Ingresses: oldest first, then by key.
type ingressRef struct {
	key     string      // namespace/name
	created int64       // creationTimestamp, Unix seconds
	wake    *wakeTarget // from WakeTargetAnnotation; nil without one
	wakeErr string      // why WakeTargetAnnotation cannot be read
}

func (r *ingressRef) compare(o *ingressRef) int {
	return cmp.Or(cmp.Compare(r.created, o.created), strings.Compare(r.key, o.key))
}

// backend is one resolved Ingress backend: a Service port of one namespace.
type backend struct {
	name        string   // namespace/service:port as the Ingress names it
	endpoints   []string // ready endpoints, "ip:port", sorted
	unavailable string   // why no endpoint can serve, when endpoints is empty
	next        *atomic.Uint64
}

// pick returns the next endpoint, round-robin.
func (b *backend) pick() string {
	n := b.next.Add(1) - 1
	return b.endpoints[n%uint64(len(b.endpoints))]
}

// match finds the route for a request: the most specific host kind with a matching
// path, then the Ingresses' default backends.
func (t *table) match(host, path string) (route, bool) {
	for _, routes := range [][]route{t.exact[host], t.wildcard[wildcardSuffix(host)], t.any} {
		for _, r := range routes {
			if r.path.matches(path) {
				return r, true
			}
		}
	}
	return t.defaultFor(host)
}

// defaultFor picks the default backend of the oldest Ingress with a rule for host, or
// else of the oldest Ingress with one.
func (t *table) defaultFor(host string) (route, bool) {
	for _, d := range t.defaults {
		if slices.ContainsFunc(d.hosts, func(h string) bool { return hostMatches(h, host) }) {
			return route{ingress: d.ingress, backend: d.backend}, true
		}
	}
	if len(t.defaults) > 0 {
		return route{ingress: t.defaults[0].ingress, backend: t.defaults[0].backend}, true
	}
	return route{}, false
}

func hostMatches(ruleHost, host string) bool {
	switch kindOf(ruleHost) {
	case hostAny:
		return true
	case hostWildcard:
		return wildcardSuffix(host) == ruleHost
	default:
		return ruleHost == host
	}
}

// buildTable builds the routing table of the Ingresses of className (see
// Options.ClassName). Backends keep the round-robin position they had in prev.
func buildTable(w world, className string, prev *table) *table {
	b := newBuilder(w, prev)
	t := &table{exact: map[string][]route{}, wildcard: map[string][]route{}, backends: b.backends}
	for _, ing := range w.ingresses {
		if servesClass(ing, className) {
			b.addIngress(t, ing)
		}
	}
	for _, routes := range t.exact {
		sortRoutes(routes)
	}
	for _, routes := range t.wildcard {
		sortRoutes(routes)
	}
	sortRoutes(t.any)
	slices.SortStableFunc(t.defaults, func(a, b defaultRoute) int { return a.ingress.compare(b.ingress) })
	return t
}

func servesClass(ing *networkingv1.Ingress, className string) bool {
	if className == "" {
		return true
	}
	class := ing.Annotations[classAnnotation]
	if ing.Spec.IngressClassName != nil {
		class = *ing.Spec.IngressClassName
	}
	return class == "" || class == className
}

// sortRoutes orders routes by precedence: longest path, Exact before Prefix, oldest
// Ingress, then as written.
func sortRoutes(routes []route) {
	slices.SortStableFunc(routes, func(a, b route) int {
		switch {
		case a.path.longer(b.path):
			return -1
		case b.path.longer(a.path):
			return 1
		}
		return a.ingress.compare(b.ingress)
	})
}

// builder resolves backends once per table.
type builder struct {
	services map[string]*corev1.Service              // by namespace/name
	slices   map[string][]*discoveryv1.EndpointSlice // by namespace/service
	backends map[string]*backend                     // by name
	prev     map[string]*backend
}

func newBuilder(w world, prev *table) *builder {
	b := &builder{
		services: map[string]*corev1.Service{},
		slices:   map[string][]*discoveryv1.EndpointSlice{},
		backends: map[string]*backend{},
	}
	if prev != nil {
		b.prev = prev.backends
	}
	for _, s := range w.services {
		b.services[s.Namespace+"/"+s.Name] = s
	}
	for _, s := range w.slices {
		if svc := s.Labels[discoveryv1.LabelServiceName]; svc != "" {
			b.slices[s.Namespace+"/"+svc] = append(b.slices[s.Namespace+"/"+svc], s)
		}
	}
	return b
}

func (b *builder) addIngress(t *table, ing *networkingv1.Ingress) {
	ref := &ingressRef{key: ing.Namespace + "/" + ing.Name, created: ing.CreationTimestamp.Unix()}
	if v, ok := ing.Annotations[WakeTargetAnnotation]; ok {
		if t, err := parseWakeTarget(ing.Namespace, v); err != nil {
			ref.wakeErr = err.Error()
		} else {
			ref.wake = t
		}
	}
	var hosts []string
	for _, rule := range ing.Spec.Rules {
		host := strings.ToLower(rule.Host)
		hosts = append(hosts, host)
		if rule.HTTP == nil {
			continue
		}
		for _, p := range rule.HTTP.Paths {
			r := route{host: host, path: newPathRule(p.Path, p.PathType), ingress: ref, backend: b.backend(ing.Namespace, p.Backend)}
			switch kindOf(host) {
			case hostExact:
				t.exact[host] = append(t.exact[host], r)
			case hostWildcard:
				t.wildcard[host] = append(t.wildcard[host], r)
			default:
				t.any = append(t.any, r)
			}
		}
	}
	if ing.Spec.DefaultBackend != nil {
		t.defaults = append(t.defaults, defaultRoute{ingress: ref, hosts: hosts, backend: b.backend(ing.Namespace, *ing.Spec.DefaultBackend)})
	}
}

// backend resolves an Ingress backend, once per name.
func (b *builder) backend(namespace string, ib networkingv1.IngressBackend) *backend {
	name := backendName(namespace, ib)
	if be, ok := b.backends[name]; ok {
		return be
	}
	be := &backend{name: name, next: new(atomic.Uint64)}
	if old, ok := b.prev[name]; ok {
		be.next = old.next
	}
	be.endpoints, be.unavailable = b.resolve(namespace, ib)
	b.backends[name] = be
	return be
}

func backendName(namespace string, ib networkingv1.IngressBackend) string {
	switch {
	case ib.Service == nil && ib.Resource != nil:
		return namespace + "/" + ib.Resource.Kind + "/" + ib.Resource.Name
	case ib.Service == nil:
		return namespace + "/<no service>"
	case ib.Service.Port.Name != "":
		return namespace + "/" + ib.Service.Name + ":" + ib.Service.Port.Name
	default:
		return namespace + "/" + ib.Service.Name + ":" + strconv.Itoa(int(ib.Service.Port.Number))
	}
}

// resolve finds the ready endpoints of a backend, or says why there are none.
func (b *builder) resolve(namespace string, ib networkingv1.IngressBackend) ([]string, string) {
	if ib.Service == nil {
		return nil, "only Service backends are supported"
	}
	svc, ok := b.services[namespace+"/"+ib.Service.Name]
	if !ok {
		return nil, "no such Service"
	}
	if svc.Spec.Type == corev1.ServiceTypeExternalName {
		return nil, "ExternalName Services are not supported"
	}
	port, ok := servicePort(svc, ib.Service.Port)
	if !ok {
		return nil, "port not found (the Service has " + describePorts(svc.Spec.Ports) + ")"
	}
	endpoints := readyEndpoints(b.slices[namespace+"/"+svc.Name], port)
	if len(endpoints) == 0 {
		return nil, "no ready endpoints"
	}
	return endpoints, ""
}

func servicePort(svc *corev1.Service, want networkingv1.ServiceBackendPort) (corev1.ServicePort, bool) {
	for _, p := range svc.Spec.Ports {
		if (want.Name != "" && p.Name == want.Name) || (want.Name == "" && p.Port == want.Number) {
			return p, true
		}
	}
	return corev1.ServicePort{}, false
}

func describePorts(ports []corev1.ServicePort) string {
	if len(ports) == 0 {
		return "no ports"
	}
	var parts []string
	for _, p := range ports {
		s := strconv.Itoa(int(p.Port))
		if p.Name != "" {
			s = fmt.Sprintf("%s/%d", p.Name, p.Port)
		}
		parts = append(parts, s)
	}
	return "ports " + strings.Join(parts, ", ")
}

// readyEndpoints lists "ip:port" of the endpoints that take new connections (the
// ready ones, or while none is, those serving as they terminate: endpoints.Choose),
// using the slice port named like the Service port (the EndpointSlice controller
// resolved targetPort).
func readyEndpoints(list []*discoveryv1.EndpointSlice, port corev1.ServicePort) []string {
	return endpoints.Choose(func(use func(discoveryv1.EndpointConditions) bool) []string {
		seen := map[string]bool{}
		var out []string
		for _, s := range list {
			number, ok := slicePort(s, port)
			if !ok {
				continue
			}
			for _, e := range s.Endpoints {
				if !use(e.Conditions) {
					continue
				}
				for _, addr := range e.Addresses {
					hp := net.JoinHostPort(addr, strconv.Itoa(int(number)))
					if !seen[hp] {
						seen[hp] = true
						out = append(out, hp)
					}
				}
			}
		}
		slices.Sort(out)
		return out
	})
}

func slicePort(s *discoveryv1.EndpointSlice, port corev1.ServicePort) (int32, bool) {
	protocol := cmp.Or(port.Protocol, corev1.ProtocolTCP)
	for _, p := range s.Ports {
		if p.Port == nil || ptrOr(p.Name, "") != port.Name || cmp.Or(ptrOr(p.Protocol, ""), corev1.ProtocolTCP) != protocol {
			continue
		}
		return *p.Port, true
	}
	return 0, false
}

func ptrOr[T any](p *T, def T) T {
	if p == nil {
		return def
	}
	return *p
}
