package hook

import (
	"net"
	"net/http"
	"strings"
)

// TokenForHosts presents a bearer token on hook calls to some hosts (a gateway that
// requires its hook token) that carry no Authorization of their own; calls to any
// other host go out as they are.
type TokenForHosts struct {
	// Hosts are where the token goes. "host:port" matches that address alone; a
	// host without a port matches it on any port, and "name.namespace" (a Service)
	// also matches "name.namespace.svc" and "name.namespace.svc.cluster.local" (name
	// other cluster domains in full).
	Hosts []string
	Token string
	// Next sends the requests; nil means the client Client uses by default.
	Next Doer
}

// Do sets the token on req when its host is one of d.Hosts, then sends it.
func (d TokenForHosts) Do(req *http.Request) (*http.Response, error) {
	if req.Header.Get("Authorization") == "" && d.matches(req.URL.Host) {
		req.Header.Set("Authorization", "Bearer "+d.Token)
	}
	if d.Next == nil {
		return sharedHTTP.Do(req)
	}
	return d.Next.Do(req)
}

func (d TokenForHosts) matches(hostport string) bool {
	host := hostport
	if h, _, err := net.SplitHostPort(hostport); err == nil {
		host = h
	}
	for _, want := range d.Hosts {
		if _, _, err := net.SplitHostPort(want); err == nil {
			if strings.EqualFold(want, hostport) {
				return true
			}
			continue
		}
		if strings.EqualFold(want, host) || serviceName(want, host) {
			return true
		}
	}
	return false
}

// serviceName reports whether host is one of the longer DNS names of the Service
// "name.namespace" in the default cluster domain.
func serviceName(service, host string) bool {
	if strings.Count(service, ".") != 1 {
		return false
	}
	host = strings.TrimSuffix(host, ".")
	return strings.EqualFold(host, service+".svc") || strings.EqualFold(host, service+".svc.cluster.local")
}
