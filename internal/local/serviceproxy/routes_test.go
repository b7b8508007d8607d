package serviceproxy

import (
	"testing"

	"github.com/google/go-cmp/cmp"
	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/ptr"
)

func TestDesiredRoutes(t *testing.T) {
	svc := func(name, ip string, typ corev1.ServiceType, ports ...corev1.ServicePort) *corev1.Service {
		return &corev1.Service{
			ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: name},
			Spec:       corev1.ServiceSpec{ClusterIP: ip, Type: typ, Ports: ports},
		}
	}
	got := desiredRoutes([]*corev1.Service{
		svc("web", "10.96.0.10", "", corev1.ServicePort{Name: "http", Port: 80}, corev1.ServicePort{Name: "dns", Port: 53, Protocol: corev1.ProtocolUDP}),
		svc("db", "10.96.0.11", corev1.ServiceTypeNodePort, corev1.ServicePort{Port: 5432, Protocol: corev1.ProtocolTCP}),
		svc("headless", "None", "", corev1.ServicePort{Port: 80}),
		svc("pending", "", "", corev1.ServicePort{Port: 80}),
		svc("v6", "fd00::1", "", corev1.ServicePort{Port: 80}),
		svc("external", "", corev1.ServiceTypeExternalName),
	})
	want := map[string]route{
		"10.96.0.10:80":   {service: types.NamespacedName{Namespace: "ns", Name: "web"}, port: "http"},
		"10.96.0.11:5432": {service: types.NamespacedName{Namespace: "ns", Name: "db"}, port: ""},
	}
	if diff := cmp.Diff(want, got, cmp.AllowUnexported(route{})); diff != "" {
		t.Errorf("routes (-want +got):\n%s", diff)
	}
}

func TestReadyBackends(t *testing.T) {
	slice := func(typ discoveryv1.AddressType, ports []discoveryv1.EndpointPort, eps ...discoveryv1.Endpoint) *discoveryv1.EndpointSlice {
		return &discoveryv1.EndpointSlice{AddressType: typ, Ports: ports, Endpoints: eps}
	}
	ep := func(ready *bool, addrs ...string) discoveryv1.Endpoint {
		return discoveryv1.Endpoint{Addresses: addrs, Conditions: discoveryv1.EndpointConditions{Ready: ready}}
	}
	http := []discoveryv1.EndpointPort{{Name: ptr.To("http"), Port: ptr.To[int32](8080)}, {Name: ptr.To("udp"), Port: ptr.To[int32](53), Protocol: ptr.To(corev1.ProtocolUDP)}}
	unnamed := []discoveryv1.EndpointPort{{Name: ptr.To(""), Port: ptr.To[int32](9000), Protocol: ptr.To(corev1.ProtocolTCP)}}
	slices := []*discoveryv1.EndpointSlice{
		slice(discoveryv1.AddressTypeIPv4, http, ep(ptr.To(true), "10.244.0.5"), ep(nil, "10.244.0.3"), ep(ptr.To(false), "10.244.0.9")),
		slice(discoveryv1.AddressTypeIPv4, http, ep(ptr.To(true), "10.244.0.5")), // the same endpoint in a second slice
		slice(discoveryv1.AddressTypeIPv6, http, ep(ptr.To(true), "fd00::5")),
		slice(discoveryv1.AddressTypeIPv4, unnamed, ep(ptr.To(true), "10.244.0.7")),
	}
	cases := []struct {
		port string
		want []string
	}{
		{"http", []string{"10.244.0.3:8080", "10.244.0.5:8080"}},
		{"", []string{"10.244.0.7:9000"}},
		{"udp", nil},
		{"missing", nil},
	}
	for _, tc := range cases {
		if diff := cmp.Diff(tc.want, readyBackends(tc.port, slices)); diff != "" {
			t.Errorf("port %q (-want +got):\n%s", tc.port, diff)
		}
	}

	// While no endpoint is ready, those serving as they terminate take
	// connections, as kube-proxy's do; once one is ready, only it does.
	draining := discoveryv1.Endpoint{Addresses: []string{"10.244.1.1"}, Conditions: discoveryv1.EndpointConditions{
		Ready: ptr.To(false), Serving: ptr.To(true), Terminating: ptr.To(true)}}
	stopped := discoveryv1.Endpoint{Addresses: []string{"10.244.1.2"}, Conditions: discoveryv1.EndpointConditions{
		Ready: ptr.To(false), Serving: ptr.To(false), Terminating: ptr.To(true)}}
	replaced := []*discoveryv1.EndpointSlice{slice(discoveryv1.AddressTypeIPv4, http, draining, stopped, ep(ptr.To(false), "10.244.1.3"))}
	if got := readyBackends("http", replaced); !cmp.Equal(got, []string{"10.244.1.1:8080"}) {
		t.Errorf("no endpoint ready: %v, want the one serving as it terminates", got)
	}
	replaced[0].Endpoints = append(replaced[0].Endpoints, ep(ptr.To(true), "10.244.1.4"))
	if got := readyBackends("http", replaced); !cmp.Equal(got, []string{"10.244.1.4:8080"}) {
		t.Errorf("one endpoint ready: %v, want it alone", got)
	}
}

func TestKubernetesEndpoints(t *testing.T) {
	ep, slice := kubernetesEndpoints("10.244.0.1", 6443)
	if ep.Namespace != "default" || ep.Name != "kubernetes" || ep.Labels[discoveryv1.LabelSkipMirror] != "true" {
		t.Errorf("Endpoints meta %+v", ep.ObjectMeta)
	}
	//lint:ignore SA1019 the type the API server publishes
	wantSubsets := []corev1.EndpointSubset{{
		Addresses: []corev1.EndpointAddress{{IP: "10.244.0.1"}},
		Ports:     []corev1.EndpointPort{{Name: "https", Port: 6443, Protocol: corev1.ProtocolTCP}},
	}}
	if diff := cmp.Diff(wantSubsets, ep.Subsets); diff != "" {
		t.Errorf("subsets (-want +got):\n%s", diff)
	}
	if slice.Labels[discoveryv1.LabelServiceName] != "kubernetes" || slice.AddressType != discoveryv1.AddressTypeIPv4 {
		t.Errorf("slice meta %+v type %s", slice.ObjectMeta, slice.AddressType)
	}
	if got := readyBackends("https", []*discoveryv1.EndpointSlice{slice}); !cmp.Equal(got, []string{"10.244.0.1:6443"}) {
		t.Errorf("the published slice serves %v", got)
	}
}

func TestAPIServerEndpoint(t *testing.T) {
	a := &APIServer{Address: []byte{10, 244, 0, 1}, Target: "127.0.0.1:6443"}
	if got, err := a.endpoint(); err != nil || got != "10.244.0.1:6443" {
		t.Errorf("endpoint = %q, %v", got, err)
	}
	if _, err := (&APIServer{Address: []byte{10, 244, 0, 1}, Target: "127.0.0.1"}).endpoint(); err == nil {
		t.Error("a target without a port was accepted")
	}
}
