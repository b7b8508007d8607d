// Package endpoints chooses, as kube-proxy does, which endpoints of a Service's
// EndpointSlices take new connections: the ready ones, or, while none is ready,
// those still serving as they terminate.
//
// The fallback keeps a Service answering across a replacement. A controller acts
// on a new pod's Ready condition at once, and may delete the old pod before the
// EndpointSlice controller has published the new endpoint and a proxy has seen it;
// the old pod, draining, still answers (kube-proxy's ProxyTerminatingEndpoints,
// KEP-1669).
package endpoints

import discoveryv1 "k8s.io/api/discovery/v1"

// Ready reports whether an endpoint is ready: a nil condition means ready, as the
// API documents.
func Ready(c discoveryv1.EndpointConditions) bool {
	return c.Ready == nil || *c.Ready
}

// ServingTerminating reports whether an endpoint is terminating and still serving
// (a nil serving or terminating condition means not).
func ServingTerminating(c discoveryv1.EndpointConditions) bool {
	return c.Terminating != nil && *c.Terminating && c.Serving != nil && *c.Serving
}

// Choose returns what collect returns for the ready endpoints, or, when that is
// empty, for the serving and terminating ones. collect adds what it keeps of
// each endpoint that use accepts.
func Choose[T any](collect func(use func(discoveryv1.EndpointConditions) bool) []T) []T {
	if out := collect(Ready); len(out) > 0 {
		return out
	}
	return collect(ServingTerminating)
}
