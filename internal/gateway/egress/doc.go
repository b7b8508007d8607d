// Package egress owns the HTTP client of requests the gateway makes on a user's behalf
// (the dashboard's "try it"): a client that cannot be turned against the gateway's own
// network.
//
// It follows no redirect (a 3xx is the caller's answer, as it came), ignores the proxy
// settings of the environment, bounds each request with a timeout, and checks every
// connection just before it is made, on the address actually connected to, after name
// resolution (so that a name that resolves, or is rebound, to a refused address is
// refused too). It refuses loopback, link-local (cloud metadata services among
// them), unspecified and multicast addresses, in their IPv4-mapped IPv6 forms as
// well, and a list of denied destinations (the platform's control plane: the
// Kubernetes API server, etcd, the gateway's and the engine's APIs). An allowlist
// names the destinations reached even so: on the local platform the ingress that
// serves PythonLambdas listens on loopback.
package egress
