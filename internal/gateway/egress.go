package gateway

import (
	"net"
	"net/url"
	"strings"

	"k8s.io/client-go/rest"

	"github.com/metalambda/metalambda/internal/gateway/egress"
)

// controlPlane are the destinations the dashboard's "try it" never connects to that
// the gateway knows of: the Kubernetes API server, the engine's API and its own
// public URL, besides those the options list (EgressDeny).
func controlPlane(cfg *rest.Config, opts *Options) []egress.Destination {
	var out []egress.Destination
	add := func(rawURL, what string) {
		if hp := urlHostPort(rawURL); hp != "" {
			out = append(out, egress.Destination{Address: hp, What: what})
		}
	}
	add(cfg.Host, "the Kubernetes API server")
	add(opts.EngineURL, "the engine's API")
	add(opts.PublicURL, "the gateway's API")
	return append(out, opts.EgressDeny...)
}

// urlHostPort is the host:port a URL (or a bare host[:port], as rest.Config.Host may
// be) reaches, with the scheme's port when it names none; "" when it has no host.
func urlHostPort(rawURL string) string {
	if rawURL == "" {
		return ""
	}
	if !strings.Contains(rawURL, "://") {
		rawURL = "https://" + rawURL
	}
	u, err := url.Parse(rawURL)
	if err != nil || u.Hostname() == "" {
		return ""
	}
	port := u.Port()
	if port == "" {
		port = map[string]string{"http": "80", "https": "443"}[u.Scheme]
	}
	if port == "" {
		return ""
	}
	return net.JoinHostPort(u.Hostname(), port)
}
