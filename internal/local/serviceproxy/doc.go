// Package serviceproxy makes Service ClusterIPs answer on one Linux machine, the way
// kube-proxy's old userspace mode did: every ClusterIP is added as a /32 address to a
// link the node owns (its pod bridge), a TCP listener on each ClusterIP:port accepts
// connections, and each connection is spliced to one ready endpoint of the Service
// (round-robin over the EndpointSlices).
//
// Pods reach a ClusterIP through their default route (the bridge's host address), and
// host processes reach it as a local address; no packet filter rules and no sysctls
// are involved, and removing the addresses (or the bridge) undoes everything.
//
// It also exposes the API server to pods: it listens on the bridge's host address at
// the API server's port, forwards to the API server's loopback address, and publishes
// that address as the endpoint of the default/kubernetes Service, as an API server's
// endpoint reconciler does for its advertised address.
//
// Only TCP ports are served; UDP and SCTP ports, session affinity, traffic policies,
// NodePorts and LoadBalancer addresses are not emulated.
package serviceproxy
