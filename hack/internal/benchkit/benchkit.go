// Package benchkit is what the gateway's benchmarks share: a control plane with
// the project's CRDs, an in-process gateway on it, and a client that posts a hook
// request.
package benchkit

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promhttp"
	apiextensionsclient "k8s.io/apiextensions-apiserver/pkg/client/clientset/clientset"

	"github.com/metalambda/metalambda/crds"
	"github.com/metalambda/metalambda/internal/gateway"
	"github.com/metalambda/metalambda/internal/httpapi"
	"github.com/metalambda/metalambda/internal/local/cluster"
)

// StartControlPlane starts etcd and an API server alone, with the project's CRDs
// installed.
func StartControlPlane(ctx context.Context) (*cluster.Cluster, error) {
	cluster, err := cluster.Start(ctx, cluster.Options{EtcdNoFsync: true, Components: []cluster.Component{}})
	if err != nil {
		return nil, err
	}
	ext, err := apiextensionsclient.NewForConfig(cluster.Config)
	if err == nil {
		all, allErr := crds.All()
		if err = allErr; err == nil {
			err = crds.Install(ctx, ext, all...)
		}
	}
	if err != nil {
		cluster.Stop()
		return nil, err
	}
	return cluster, nil
}

// StartGateway serves a gateway of opts on cluster at a loopback address (its
// PublicURL is set to it) until stop is called.
func StartGateway(cluster *cluster.Cluster, opts gateway.Options) (base string, gw *gateway.Gateway, stop func(), err error) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return "", nil, nil, err
	}
	base = "http://" + l.Addr().String()
	opts.PublicURL = base
	reg := prometheus.NewRegistry()
	if gw, err = gateway.New(cluster.Config, opts, reg); err != nil {
		l.Close()
		return "", nil, nil, err
	}
	srv := &httptest.Server{Listener: l, Config: &http.Server{Handler: gw.Handler(promhttp.HandlerFor(reg, promhttp.HandlerOpts{}))}}
	srv.Start()
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { defer close(done); gw.Run(ctx) }()
	return base, gw, func() { srv.Close(); cancel(); <-done }, nil
}

var client = &http.Client{Transport: &http.Transport{MaxIdleConnsPerHost: 64}, Timeout: 30 * time.Second}

// Post posts body to url as JSON and fails unless the answer is 200; a failure says
// the gateway's error.
func Post(url string, body []byte) error {
	resp, err := client.Post(url, "application/json", bytes.NewReader(body))
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	if err := httpapi.ResponseError(resp); err != nil {
		return fmt.Errorf("HTTP %d: %w", resp.StatusCode, err)
	}
	_, _ = io.Copy(io.Discard, resp.Body)
	if resp.StatusCode != 200 {
		return fmt.Errorf("HTTP %d", resp.StatusCode)
	}
	return nil
}
