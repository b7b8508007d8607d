package endpoints

import (
	"slices"
	"testing"

	discoveryv1 "k8s.io/api/discovery/v1"
)

// Addresses come from the slices' port of the given name; ready leaves out the
// endpoints whose ready condition is false (nil counts as ready, as the API says).
func TestAddresses(t *testing.T) {
	name, other := "hooks", "api"
	port, otherPort := int32(8081), int32(8080)
	yes, no := true, false
	slice := func(ports []discoveryv1.EndpointPort, eps ...discoveryv1.Endpoint) *discoveryv1.EndpointSlice {
		return &discoveryv1.EndpointSlice{AddressType: discoveryv1.AddressTypeIPv4, Ports: ports, Endpoints: eps}
	}
	ep := func(addr string, ready *bool) discoveryv1.Endpoint {
		return discoveryv1.Endpoint{Addresses: []string{addr}, Conditions: discoveryv1.EndpointConditions{Ready: ready}}
	}
	both := []discoveryv1.EndpointPort{{Name: &name, Port: &port}, {Name: &other, Port: &otherPort}}
	list := []*discoveryv1.EndpointSlice{
		slice(both, ep("10.0.0.2", &yes), ep("10.0.0.1", nil), ep("10.0.0.3", &no)),
		slice(both, ep("10.0.0.1", &yes), ep("fd00::1", &yes)),
		slice([]discoveryv1.EndpointPort{{Name: &other, Port: &otherPort}}, ep("10.0.0.9", &yes)),
	}
	if got, want := addresses(list, "hooks", true), []string{"10.0.0.1:8081", "10.0.0.2:8081", "[fd00::1]:8081"}; !slices.Equal(got, want) {
		t.Errorf("ready hooks addresses = %v, want %v", got, want)
	}
	if got, want := addresses(list, "api", false), []string{"10.0.0.1:8080", "10.0.0.2:8080", "10.0.0.3:8080", "10.0.0.9:8080", "[fd00::1]:8080"}; !slices.Equal(got, want) {
		t.Errorf("all api addresses = %v, want %v", got, want)
	}
	if got := addresses(list, "metrics", false); len(got) != 0 {
		t.Errorf("addresses of a port no slice has = %v", got)
	}
}

// A slice of FQDN addresses, or an address that is not an IP, names no endpoint:
// the addresses get the callers' tokens, and a host name could point anywhere.
func TestAddressesOnlyIPs(t *testing.T) {
	name, port := "api", int32(8080)
	ports := []discoveryv1.EndpointPort{{Name: &name, Port: &port}}
	list := []*discoveryv1.EndpointSlice{
		{AddressType: discoveryv1.AddressTypeFQDN, Ports: ports, Endpoints: []discoveryv1.Endpoint{{Addresses: []string{"attacker.example.com"}}}},
		{AddressType: discoveryv1.AddressTypeIPv4, Ports: ports, Endpoints: []discoveryv1.Endpoint{{Addresses: []string{"evil.example.com"}}, {Addresses: []string{"10.0.0.1"}}}},
		{AddressType: discoveryv1.AddressTypeIPv6, Ports: ports, Endpoints: []discoveryv1.Endpoint{{Addresses: []string{"fd00::1"}}}},
	}
	if got, want := addresses(list, "api", false), []string{"10.0.0.1:8080", "[fd00::1]:8080"}; !slices.Equal(got, want) {
		t.Errorf("addresses = %v, want %v", got, want)
	}
}
