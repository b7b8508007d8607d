package ingress

import (
	"time"

	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	networkingv1 "k8s.io/api/networking/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
)

const testNS = "ns"

// epoch is when the oldest test Ingress was created; age(n) is n minutes later.
var epoch = time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)

type ingressOption func(*networkingv1.Ingress)

// newIngress builds an Ingress in testNS created at epoch.
func newIngress(name string, opts ...ingressOption) *networkingv1.Ingress {
	ing := &networkingv1.Ingress{ObjectMeta: metav1.ObjectMeta{
		Namespace: testNS, Name: name, CreationTimestamp: metav1.NewTime(epoch),
	}}
	for _, o := range opts {
		o(ing)
	}
	return ing
}

func rule(host string, paths ...networkingv1.HTTPIngressPath) ingressOption {
	return func(ing *networkingv1.Ingress) {
		ing.Spec.Rules = append(ing.Spec.Rules, networkingv1.IngressRule{
			Host: host, IngressRuleValue: networkingv1.IngressRuleValue{HTTP: &networkingv1.HTTPIngressRuleValue{Paths: paths}},
		})
	}
}

func defaultBackend(service string) ingressOption {
	return func(ing *networkingv1.Ingress) { ing.Spec.DefaultBackend = serviceBackend(service) }
}

func class(name string) ingressOption {
	return func(ing *networkingv1.Ingress) { ing.Spec.IngressClassName = &name }
}

func classAnnotated(name string) ingressOption {
	return func(ing *networkingv1.Ingress) { ing.Annotations = map[string]string{classAnnotation: name} }
}

func age(minutes int) ingressOption {
	return func(ing *networkingv1.Ingress) {
		ing.CreationTimestamp = metav1.NewTime(epoch.Add(time.Duration(minutes) * time.Minute))
	}
}

func inNamespace(ns string) ingressOption {
	return func(ing *networkingv1.Ingress) { ing.Namespace = ns }
}

func withPath(typ networkingv1.PathType, path, service string) networkingv1.HTTPIngressPath {
	return networkingv1.HTTPIngressPath{Path: path, PathType: &typ, Backend: *serviceBackend(service)}
}

func prefix(path, service string) networkingv1.HTTPIngressPath {
	return withPath(networkingv1.PathTypePrefix, path, service)
}

func exact(path, service string) networkingv1.HTTPIngressPath {
	return withPath(networkingv1.PathTypeExact, path, service)
}

func implSpecific(path, service string) networkingv1.HTTPIngressPath {
	return withPath(networkingv1.PathTypeImplementationSpecific, path, service)
}

// serviceBackend names port 80 of service; "svc:name" names a port by name.
func serviceBackend(service string) *networkingv1.IngressBackend {
	port := networkingv1.ServiceBackendPort{Number: 80}
	for i := range service {
		if service[i] == ':' {
			service, port = service[:i], networkingv1.ServiceBackendPort{Name: service[i+1:]}
			break
		}
	}
	return &networkingv1.IngressBackend{Service: &networkingv1.IngressServiceBackend{Name: service, Port: port}}
}

// newService builds a Service in testNS with port 80 named "http" to 8080.
func newService(name string, ports ...corev1.ServicePort) *corev1.Service {
	if len(ports) == 0 {
		ports = []corev1.ServicePort{{Name: "http", Port: 80, TargetPort: intstr.FromInt32(8080), Protocol: corev1.ProtocolTCP}}
	}
	return &corev1.Service{
		ObjectMeta: metav1.ObjectMeta{Namespace: testNS, Name: name},
		Spec:       corev1.ServiceSpec{Ports: ports},
	}
}

type sliceEndpoint struct {
	addr                 string
	ready                *bool
	serving, terminating *bool
}

func ready(addr string) sliceEndpoint    { t := true; return sliceEndpoint{addr: addr, ready: &t} }
func notReady(addr string) sliceEndpoint { f := false; return sliceEndpoint{addr: addr, ready: &f} }
func unknown(addr string) sliceEndpoint  { return sliceEndpoint{addr: addr} }

// draining is an endpoint whose pod is being deleted and still serves.
func draining(addr string) sliceEndpoint {
	t, f := true, false
	return sliceEndpoint{addr: addr, ready: &f, serving: &t, terminating: &t}
}

// newSlice builds an EndpointSlice of service in testNS with port "http" on 8080.
func newSlice(name, service string, endpoints ...sliceEndpoint) *discoveryv1.EndpointSlice {
	return newSliceWithPort(name, service, "http", 8080, endpoints...)
}

func newSliceWithPort(name, service, portName string, port int32, endpoints ...sliceEndpoint) *discoveryv1.EndpointSlice {
	tcp := corev1.ProtocolTCP
	s := &discoveryv1.EndpointSlice{
		ObjectMeta:  metav1.ObjectMeta{Namespace: testNS, Name: name, Labels: map[string]string{discoveryv1.LabelServiceName: service}},
		AddressType: discoveryv1.AddressTypeIPv4,
		Ports:       []discoveryv1.EndpointPort{{Name: &portName, Port: &port, Protocol: &tcp}},
	}
	for _, e := range endpoints {
		s.Endpoints = append(s.Endpoints, discoveryv1.Endpoint{Addresses: []string{e.addr}, Conditions: discoveryv1.EndpointConditions{Ready: e.ready, Serving: e.serving, Terminating: e.terminating}})
	}
	return s
}
