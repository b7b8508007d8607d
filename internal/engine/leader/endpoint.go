package leader

import (
	"context"
	"encoding/json"
	"fmt"
	"net"
	"strconv"
	"strings"

	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/kubernetes"
	"k8s.io/klog/v2"
	"k8s.io/utils/ptr"
)

// Endpoint publishes the replica that serves the engine's API as the endpoint of a
// Service without a selector: with leader election only the leader records hook calls
// and answers, so the Service must send every request to it, as the API server's
// endpoint reconciler does for the kubernetes Service.
type Endpoint struct {
	namespace, service string
	ip                 string
	port               int32
}

// ParseEndpoint reads --api-service (NAMESPACE/NAME), --api-advertise-address and
// the port of --api-address; without --api-service it returns nil.
func ParseEndpoint(service, advertise, apiAddress string) (*Endpoint, error) {
	if service == "" {
		return nil, nil
	}
	ns, name, ok := strings.Cut(service, "/")
	if !ok || ns == "" || name == "" {
		return nil, fmt.Errorf("--api-service %q is not NAMESPACE/NAME", service)
	}
	if apiAddress == "0" || apiAddress == "" {
		return nil, fmt.Errorf("--api-service needs the API on: set --api-address")
	}
	_, portText, err := net.SplitHostPort(apiAddress)
	if err != nil {
		return nil, fmt.Errorf("--api-address %q: %w", apiAddress, err)
	}
	port, err := strconv.ParseInt(portText, 10, 32)
	if err != nil || port < 1 || port > 65535 {
		return nil, fmt.Errorf("--api-service needs a fixed port in --api-address, got %q", apiAddress)
	}
	ip := net.ParseIP(advertise)
	if ip == nil || ip.To4() == nil {
		return nil, fmt.Errorf("--api-advertise-address %q is not an IPv4 address (in a pod, pass status.podIP through the downward API)", advertise)
	}
	return &Endpoint{namespace: ns, service: name, ip: ip.String(), port: int32(port)}, nil
}

// slice is the EndpointSlice naming this replica.
func (e *Endpoint) slice() *discoveryv1.EndpointSlice {
	return &discoveryv1.EndpointSlice{
		TypeMeta: metav1.TypeMeta{APIVersion: "discovery.k8s.io/v1", Kind: "EndpointSlice"},
		ObjectMeta: metav1.ObjectMeta{
			Name: e.service + "-leader", Namespace: e.namespace,
			Labels: map[string]string{
				discoveryv1.LabelServiceName: e.service,
				discoveryv1.LabelManagedBy:   "metalambda-engine",
			},
		},
		AddressType: discoveryv1.AddressTypeIPv4,
		Endpoints:   []discoveryv1.Endpoint{{Addresses: []string{e.ip}, Conditions: discoveryv1.EndpointConditions{Ready: ptr.To(true)}}},
		Ports:       []discoveryv1.EndpointPort{{Name: ptr.To("api"), Port: ptr.To(e.port), Protocol: ptr.To(corev1.ProtocolTCP)}},
	}
}

// Publish writes the EndpointSlice with this replica's address (server-side apply, so
// the next leader's write simply replaces it).
func (e *Endpoint) Publish(ctx context.Context, kube kubernetes.Interface) error {
	data, err := json.Marshal(e.slice())
	if err != nil {
		return err
	}
	_, err = kube.DiscoveryV1().EndpointSlices(e.namespace).Patch(ctx, e.service+"-leader", types.ApplyPatchType, data,
		metav1.PatchOptions{FieldManager: "metalambda-engine", Force: ptr.To(true)})
	if err != nil {
		return fmt.Errorf("publish the API endpoint %s:%d for Service %s/%s: %w", e.ip, e.port, e.namespace, e.service, err)
	}
	klog.InfoS("Serving the API as the endpoint of its Service", "service", e.namespace+"/"+e.service, "address", e.ip, "port", e.port)
	return nil
}
