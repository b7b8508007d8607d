package ingress

import (
	"context"
	"errors"
	"net"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"k8s.io/client-go/dynamic"

	"github.com/metalambda/metalambda/internal/defaults"
)

// Options configure a Router. Start from Defaults.
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

// Defaults are the options of a router that serves every Ingress; the local platform
// starts from them, and New takes no zero value for one of them.
func Defaults() Options {
	d := &net.Dialer{KeepAlive: 30 * time.Second}
	return Options{
		Dial:                  d.DialContext,
		DialTimeout:           5 * time.Second,
		ResponseHeaderTimeout: 60 * time.Second,
		IdleConnTimeout:       90 * time.Second,
		DemandInterval:        time.Second,
		HoldTimeout:           30 * time.Second,
		MaxHeld:               100,
	}
}

// Validate refuses options that did not start from Defaults.
func (o *Options) Validate() error {
	if o.Dial == nil {
		return errors.New("ingress option Dial must not be nil (start the options from ingress.Defaults())")
	}
	return defaults.Check("ingress", "positive",
		defaults.Option{Name: "DialTimeout", Set: o.DialTimeout > 0},
		defaults.Option{Name: "ResponseHeaderTimeout", Set: o.ResponseHeaderTimeout > 0},
		defaults.Option{Name: "IdleConnTimeout", Set: o.IdleConnTimeout > 0},
		defaults.Option{Name: "DemandInterval", Set: o.DemandInterval > 0},
		defaults.Option{Name: "HoldTimeout", Set: o.HoldTimeout > 0},
		defaults.Option{Name: "MaxHeld", Set: o.MaxHeld > 0},
	)
}
