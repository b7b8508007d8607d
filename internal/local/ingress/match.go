package ingress

import (
	"net"
	"strings"

	networkingv1 "k8s.io/api/networking/v1"
)

// hostKind orders host specificity: a request is served by the most specific kind that
// has a matching path.
type hostKind int

const (
	hostExact hostKind = iota
	hostWildcard
	hostAny
)

func kindOf(host string) hostKind {
	switch {
	case host == "":
		return hostAny
	case strings.HasPrefix(host, "*."):
		return hostWildcard
	default:
		return hostExact
	}
}

// requestHost is the Host header without port, lower case, without a trailing dot.
func requestHost(hostport string) string {
	host := hostport
	if h, _, err := net.SplitHostPort(hostport); err == nil {
		host = h
	}
	host = strings.TrimPrefix(strings.TrimSuffix(host, "]"), "[")
	return strings.TrimSuffix(strings.ToLower(host), ".")
}

// wildcardSuffix is what a wildcard rule matching host would be keyed by: host with its
// first label replaced by "*" ("a.example.com" → "*.example.com"), or "" when host has
// a single label.
func wildcardSuffix(host string) string {
	i := strings.IndexByte(host, '.')
	if i <= 0 || i == len(host)-1 {
		return ""
	}
	return "*" + host[i:]
}

// pathRule is one path of an Ingress rule, normalized.
type pathRule struct {
	path  string // Prefix: without trailing "/" ("" matches everything)
	exact bool
}

func newPathRule(path string, pathType *networkingv1.PathType) pathRule {
	if path == "" {
		path = "/"
	}
	if pathType != nil && *pathType == networkingv1.PathTypeExact {
		return pathRule{path: path, exact: true}
	}
	return pathRule{path: strings.TrimRight(path, "/")}
}

// matches reports whether the request path p matches: Exact compares whole paths,
// Prefix compares "/"-separated elements, so "/foo" matches "/foo" and "/foo/bar" but
// not "/foobar".
func (r pathRule) matches(p string) bool {
	if r.exact {
		return p == r.path
	}
	return p == r.path || strings.HasPrefix(p, r.path+"/")
}

// longer reports whether r takes precedence over o: the longer path, then Exact.
func (r pathRule) longer(o pathRule) bool {
	if len(r.path) != len(o.path) {
		return len(r.path) > len(o.path)
	}
	return r.exact && !o.exact
}
