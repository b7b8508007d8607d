package ingress

import (
	"context"
	"net"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"k8s.io/client-go/dynamic"
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
	// (metalambda_ingress_requests_total{host,code},
	// metalambda_ingress_hold_seconds{outcome}).
	Registerer prometheus.Registerer

	// Targets, when set, lets the router wake the objects that Ingresses name in their
	// WakeTargetAnnotation: it patches their LastDemandAnnotation. Without it that
	// annotation is ignored and a backend without endpoints answers 503 at once.
	Targets dynamic.Interface

	// DemandInterval is how often, at most, the router writes the demand of a wake
	// target while requests come or are in flight; a held request writes at once.
	// Default 1s.
	DemandInterval time.Duration

	// HoldTimeout bounds how long a request waits for its wake target to have a ready
	// endpoint; then it answers 503 with Retry-After. Default 30s.
	HoldTimeout time.Duration

	// MaxHeld bounds the requests held at once per wake target; more answer 503 with
	// Retry-After at once. Default 100.
	MaxHeld int
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
	if o.DemandInterval <= 0 {
		o.DemandInterval = time.Second
	}
	if o.HoldTimeout <= 0 {
		o.HoldTimeout = 30 * time.Second
	}
	if o.MaxHeld <= 0 {
		o.MaxHeld = 100
	}
	if o.Dial == nil {
		d := &net.Dialer{KeepAlive: 30 * time.Second}
		o.Dial = d.DialContext
	}
}
