package ingress

import (
	"context"
	"fmt"
	"net"
	"net/http"
	"net/http/httputil"
	"net/url"
	"time"

	"k8s.io/klog/v2"
)

// target is the endpoint chosen for one request, carried in its context.
type target struct {
	backend  string // namespace/service:port
	endpoint string // ip:port
}

type targetKey struct{}

func targetOf(req *http.Request) *target {
	t, _ := req.Context().Value(targetKey{}).(*target)
	return t
}

// newProxy builds the reverse proxy: to the chosen endpoint over plain HTTP, keeping
// the client's Host header and setting X-Forwarded-For, -Host and -Proto.
func newProxy(opts Options) *httputil.ReverseProxy {
	return &httputil.ReverseProxy{
		Transport: newTransport(opts),
		Rewrite: func(pr *httputil.ProxyRequest) {
			pr.SetURL(&url.URL{Scheme: "http", Host: targetOf(pr.In).endpoint})
			pr.Out.Host = pr.In.Host
			pr.SetXForwarded()
		},
		ErrorHandler: func(w http.ResponseWriter, req *http.Request, err error) {
			t := targetOf(req)
			klog.FromContext(req.Context()).V(1).Info("Endpoint failed", "backend", t.backend, "endpoint", t.endpoint, "err", err.Error())
			http.Error(w, fmt.Sprintf("backend %s: endpoint %s failed: %v", t.backend, t.endpoint, err), http.StatusBadGateway)
		},
	}
}

func newTransport(opts Options) *http.Transport {
	dial := opts.Dial
	return &http.Transport{
		Proxy: nil, // endpoints are reached directly, whatever HTTP_PROXY says
		DialContext: func(ctx context.Context, network, addr string) (net.Conn, error) {
			ctx, cancel := context.WithTimeout(ctx, opts.DialTimeout)
			defer cancel()
			return dial(ctx, network, addr)
		},
		MaxIdleConns:          1024,
		MaxIdleConnsPerHost:   64,
		IdleConnTimeout:       opts.IdleConnTimeout,
		ResponseHeaderTimeout: opts.ResponseHeaderTimeout,
		ExpectContinueTimeout: time.Second,
		DisableCompression:    true, // pass the endpoint's encoding through untouched
	}
}
