// Package ingress is the local platform's ingress router. It watches Ingresses
// (networking.k8s.io/v1), Services and EndpointSlices (discovery.k8s.io/v1), keeps an
// immutable routing table rebuilt on every change, and proxies each HTTP request, by
// host and path, to a ready endpoint of the matching backend, round-robin.
//
// Matching follows the Ingress API: a rule's host is exact ("foo.example.com"), a
// one-label wildcard ("*.example.com") or absent (any host); paths are Exact or Prefix
// (element-wise on "/"), ImplementationSpecific meaning Prefix. For a request the
// router takes the most specific host that has a matching path (exact, then wildcard,
// then rules without a host), and within it the longest path, Exact before Prefix at
// equal length, the oldest Ingress (creationTimestamp, then namespace/name) on ties.
// A request no rule matches goes to a spec.defaultBackend: that of an Ingress with a
// rule for the request's host if there is one, else of any Ingress, oldest first.
//
// Before matching, the request path is normalised (percent-encoded characters
// decoded, "." and ".." segments resolved, repeated slashes collapsed, a trailing slash
// kept) and the backend receives that normalised path, so "/public/../admin" is
// matched and forwarded as "/admin". A path with an encoded slash ("%2F"), a backslash
// or a NUL byte is refused with 400.
//
// Errors are plain text: 404 when no Ingress serves the request, 503 when the matched
// backend has no such Service, no such port or no ready endpoints, 502 when the
// chosen endpoint cannot be reached.
//
// Scale from zero (wake.go, hold.go): an Ingress whose WakeTargetAnnotation names an
// object has its requests for a backend without ready endpoints held, within
// Options.HoldTimeout and Options.MaxHeld, while the router writes the object's
// LastDemandAnnotation; each routing-table rebuild wakes the held requests. Past a
// bound the answer is 503 with Retry-After.
package ingress
