// Package dns answers DNS for a cluster's Services on one machine, the part
// of cluster DNS (CoreDNS's kubernetes plugin) that pods rely on: a Service's name
// resolves in the pod's namespace and in the cluster domain, and every other name is
// forwarded to the host's resolvers.
//
// Records served, under the cluster domain (cluster.local by default):
//
//   - <service>.<namespace>.svc.<domain> A: the ClusterIP; for a headless Service,
//     the addresses of its ready endpoints (EndpointSlices); for an ExternalName
//     Service, a CNAME to its external name.
//   - <hostname>.<service>.<namespace>.svc.<domain> A: a headless Service's endpoint
//     with that hostname (a StatefulSet's pod).
//
// A name under the domain that matches nothing is NXDOMAIN; a name that matches with
// another type (AAAA on an IPv4 cluster) is an empty answer. SRV and PTR records are
// not served.
package dns
