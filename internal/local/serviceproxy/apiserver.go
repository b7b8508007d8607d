package serviceproxy

import (
	"context"
	"fmt"
	"net"
	"strconv"

	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
)

// APIServer says how pods reach the API server.
type APIServer struct {
	// Address is the host address pods reach the API server at (the bridge's). The
	// proxy listens there on Target's port.
	Address net.IP
	// Target is the API server's own host:port (on loopback).
	Target string
}

// endpoint is the "ip:port" published for the default/kubernetes Service.
func (a *APIServer) endpoint() (string, error) {
	_, port, err := net.SplitHostPort(a.Target)
	if err != nil {
		return "", fmt.Errorf("API server address %q: %w", a.Target, err)
	}
	if a.Address.To4() == nil {
		return "", fmt.Errorf("API server advertise address %v is not IPv4", a.Address)
	}
	return net.JoinHostPort(a.Address.String(), port), nil
}

// The names the API server gives its own Service and endpoints.
const (
	kubernetesName      = "kubernetes"
	kubernetesNamespace = metav1.NamespaceDefault
	kubernetesPortName  = "https"
)

// kubernetesEndpoints builds the default/kubernetes Endpoints and EndpointSlice for an
// API server at ip:port, as the API server's endpoint reconciler writes them (the
// Endpoints marked so the mirroring controller leaves them alone).
//
//lint:ignore SA1019 returns the v1 Endpoints the API server still publishes
func kubernetesEndpoints(ip string, port int32) (*corev1.Endpoints, *discoveryv1.EndpointSlice) {
	meta := metav1.ObjectMeta{Name: kubernetesName, Namespace: kubernetesNamespace}
	//lint:ignore SA1019 the API server still publishes v1 Endpoints for this Service
	ep := &corev1.Endpoints{ObjectMeta: *meta.DeepCopy(), Subsets: []corev1.EndpointSubset{{
		Addresses: []corev1.EndpointAddress{{IP: ip}},
		Ports:     []corev1.EndpointPort{{Name: kubernetesPortName, Port: port, Protocol: corev1.ProtocolTCP}},
	}}}
	ep.Labels = map[string]string{discoveryv1.LabelSkipMirror: "true"}
	slice := &discoveryv1.EndpointSlice{
		ObjectMeta:  *meta.DeepCopy(),
		AddressType: discoveryv1.AddressTypeIPv4,
		Endpoints: []discoveryv1.Endpoint{{
			Addresses:  []string{ip},
			Conditions: discoveryv1.EndpointConditions{Ready: ptr.To(true)},
		}},
		Ports: []discoveryv1.EndpointPort{{Name: ptr.To(kubernetesPortName), Port: ptr.To(port), Protocol: ptr.To(corev1.ProtocolTCP)}},
	}
	slice.Labels = map[string]string{discoveryv1.LabelServiceName: kubernetesName}
	return ep, slice
}

// publishEndpoints makes the default/kubernetes EndpointSlice and Endpoints name the
// API server's address, writing only what differs.
func (p *Proxy) publishEndpoints(ctx context.Context) error {
	ip, portStr, err := net.SplitHostPort(p.apiEndpoint)
	if err != nil {
		return err
	}
	port, err := strconv.ParseInt(portStr, 10, 32)
	if err != nil {
		return err
	}
	ep, slice := kubernetesEndpoints(ip, int32(port))
	if err := p.applySlice(ctx, slice); err != nil {
		return fmt.Errorf("publish the kubernetes EndpointSlice: %w", err)
	}
	if p.endpointsWritten {
		return nil
	}
	if err := p.applyEndpoints(ctx, ep); err != nil {
		return fmt.Errorf("publish the kubernetes Endpoints: %w", err)
	}
	p.endpointsWritten = true
	return nil
}

func (p *Proxy) applySlice(ctx context.Context, want *discoveryv1.EndpointSlice) error {
	client := p.kube.DiscoveryV1().EndpointSlices(kubernetesNamespace)
	have, err := p.slices.EndpointSlices(kubernetesNamespace).Get(kubernetesName)
	if apierrors.IsNotFound(err) {
		_, err = client.Create(ctx, want, metav1.CreateOptions{})
		return err
	}
	if err != nil {
		return err
	}
	if equality.Semantic.DeepEqual(have.Endpoints, want.Endpoints) && equality.Semantic.DeepEqual(have.Ports, want.Ports) &&
		have.Labels[discoveryv1.LabelServiceName] == kubernetesName {
		return nil
	}
	update := have.DeepCopy()
	update.Endpoints, update.Ports, update.AddressType = want.Endpoints, want.Ports, want.AddressType
	if update.Labels == nil {
		update.Labels = map[string]string{}
	}
	update.Labels[discoveryv1.LabelServiceName] = kubernetesName
	_, err = client.Update(ctx, update, metav1.UpdateOptions{})
	return err
}

//lint:ignore SA1019 see kubernetesEndpoints
func (p *Proxy) applyEndpoints(ctx context.Context, want *corev1.Endpoints) error {
	client := p.kube.CoreV1().Endpoints(kubernetesNamespace)
	have, err := client.Get(ctx, kubernetesName, metav1.GetOptions{})
	if apierrors.IsNotFound(err) {
		_, err = client.Create(ctx, want, metav1.CreateOptions{})
		return err
	}
	if err != nil {
		return err
	}
	if equality.Semantic.DeepEqual(have.Subsets, want.Subsets) && have.Labels[discoveryv1.LabelSkipMirror] == "true" {
		return nil
	}
	update := have.DeepCopy()
	update.Subsets = want.Subsets
	if update.Labels == nil {
		update.Labels = map[string]string{}
	}
	update.Labels[discoveryv1.LabelSkipMirror] = "true"
	_, err = client.Update(ctx, update, metav1.UpdateOptions{})
	return err
}

// withdrawEndpoints removes the published endpoints when the proxy stops, so the
// kubernetes Service does not name an address nobody serves.
func (p *Proxy) withdrawEndpoints(ctx context.Context) error {
	err := p.kube.DiscoveryV1().EndpointSlices(kubernetesNamespace).Delete(ctx, kubernetesName, metav1.DeleteOptions{})
	if err != nil && !apierrors.IsNotFound(err) {
		return err
	}
	err = p.kube.CoreV1().Endpoints(kubernetesNamespace).Delete(ctx, kubernetesName, metav1.DeleteOptions{})
	if err != nil && !apierrors.IsNotFound(err) {
		return err
	}
	return nil
}
