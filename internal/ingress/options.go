package ingress

import (
	"context"
	"net"
	"time"

	"github.com/prometheus/client_golang/prometheus"
)

// Options configure a Router.
type Options struct {
	// ClassName selects the Ingresses to serve: those of this class (spec.ingressClassName,
	// or the older kubernetes.io/ingress.class annotation) plus those with no class.
	// Empty serves every Ingress.
	ClassName string

	// Dial opens connections to endpoints ("ip:port"). Default: a net.Dialer. Tests map
	// endpoint addresses to local servers with it.
	Dial func(ctx context.Context, network, addr string) (net.Conn, error)

	// DialTimeout bounds connecting to an endpoint. Default 5s.
	DialTimeout time.Duration

	// ResponseHeaderTimeout bounds the wait for an endpoint's response headers after
	// the request is sent. Default 60s.
	ResponseHeaderTimeout time.Duration

	// IdleConnTimeout is how long an idle keep-alive connection to an endpoint is kept.
	// Default 90s.
	IdleConnTimeout time.Duration

	// Registerer, when set, receives the router's metrics
	// (metalambda_ingress_requests_total{host,code}).
	Registerer prometheus.Registerer
}

func (o *Options) setDefaults() {
	if o.DialTimeout <= 0 {
		o.DialTimeout = 5 * time.Second
	}
	if o.ResponseHeaderTimeout <= 0 {
		o.ResponseHeaderTimeout = 60 * time.Second
	}
	if o.IdleConnTimeout <= 0 {
		o.IdleConnTimeout = 90 * time.Second
	}
	if o.Dial == nil {
		d := &net.Dialer{KeepAlive: 30 * time.Second}
		o.Dial = d.DialContext
	}
}
