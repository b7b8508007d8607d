// Package endpoints follows the endpoints of one Service through its
// EndpointSlices, for components that address the replicas behind a Service
// one by one: the gateway's replicas find each other (to merge what each
// recorded), and the engine sends each Function's hook calls to the replica
// that keeps it warm.
package endpoints

import (
	"context"
	"errors"
	"net"
	"slices"
	"strconv"
	"time"

	discoveryv1 "k8s.io/api/discovery/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes"
	listersv1 "k8s.io/client-go/listers/discovery/v1"
	"k8s.io/client-go/tools/cache"
)

// Service is the endpoints of one Service, kept current by Run.
type Service struct {
	factory  informers.SharedInformerFactory
	informer cache.SharedIndexInformer
	lister   listersv1.EndpointSliceLister
}

// Watch follows the EndpointSlices of the Service namespace/name; they are listed
// once Run has synced its cache (an empty list until then).
func Watch(kube kubernetes.Interface, namespace, name string) (*Service, error) {
	if namespace == "" || name == "" {
		return nil, errors.New("endpoints: a Service's namespace and name are needed")
	}
	factory := informers.NewSharedInformerFactoryWithOptions(kube, 10*time.Minute, informers.WithNamespace(namespace),
		informers.WithTweakListOptions(func(o *metav1.ListOptions) { o.LabelSelector = discoveryv1.LabelServiceName + "=" + name }))
	slices := factory.Discovery().V1().EndpointSlices()
	return &Service{factory: factory, informer: slices.Informer(), lister: slices.Lister()}, nil
}

// Run watches until ctx ends.
func (s *Service) Run(ctx context.Context) {
	s.factory.Start(ctx.Done())
	cache.WaitForCacheSync(ctx.Done(), s.informer.HasSynced)
	<-ctx.Done()
	s.factory.Shutdown()
}

// Addresses are the "ip:port" addresses of the Service's endpoints at the port
// named port, sorted and without duplicates; with ready, only the endpoints
// ready to serve (a terminating one is not). Only IP addresses are taken: the
// replicas get the callers' tokens, and an FQDN slice (which anyone who may write
// EndpointSlices labelled with the Service's name can add) could name any host.
func (s *Service) Addresses(port string, ready bool) []string {
	list, err := s.lister.List(labels.Everything())
	if err != nil {
		return nil
	}
	return addresses(list, port, ready)
}

func addresses(endpointSlices []*discoveryv1.EndpointSlice, port string, ready bool) []string {
	var out []string
	for _, s := range endpointSlices {
		if s.AddressType != discoveryv1.AddressTypeIPv4 && s.AddressType != discoveryv1.AddressTypeIPv6 {
			continue // an FQDN slice would name any host, which would get the callers' tokens
		}
		number := int32(0)
		for _, p := range s.Ports {
			if p.Name != nil && *p.Name == port && p.Port != nil {
				number = *p.Port
			}
		}
		if number == 0 {
			continue
		}
		for _, ep := range s.Endpoints {
			if len(ep.Addresses) == 0 || net.ParseIP(ep.Addresses[0]) == nil || ready && ep.Conditions.Ready != nil && !*ep.Conditions.Ready {
				continue
			}
			out = append(out, net.JoinHostPort(ep.Addresses[0], strconv.Itoa(int(number))))
		}
	}
	slices.Sort(out)
	return slices.Compact(out)
}
