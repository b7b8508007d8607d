//go:build integration

package main

import (
	"context"
	"fmt"
	"io"
	"net"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/metalambda/metalambda/crds"
	"github.com/metalambda/metalambda/internal/kubetest"
	"github.com/metalambda/metalambda/internal/localcluster"
)

var env *kubetest.Env

func TestMain(m *testing.M) {
	kubetest.Main(m, &env, localcluster.Options{Components: []localcluster.Component{}})
}

// TestEngineServesHealthAndMetrics runs the engine's main path against the cluster.
func TestEngineServesHealthAndMetrics(t *testing.T) {
	all, err := crds.All()
	if err != nil {
		t.Fatal(err)
	}
	if err := crds.Install(kubetest.Context(t), env.Extensions, all...); err != nil {
		t.Fatal(err)
	}
	o := defaultOptions()
	o.kubeconfig = env.Cluster.KubeconfigPath
	o.metricsAddress, o.healthProbeAddress = freeAddr(t), freeAddr(t)
	if err := o.validate(); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- run(ctx, o) }()
	defer func() {
		cancel()
		if err := <-done; err != nil {
			t.Errorf("run returned %v", err)
		}
	}()
	kubetest.Eventually(t, 30*time.Second, "/readyz answers 200", func(context.Context) (bool, error) {
		code, body, err := httpGet("http://" + o.healthProbeAddress + "/readyz")
		return code == 200, fmt.Errorf("%d %s %v", code, body, err)
	})
	if code, _, _ := httpGet("http://" + o.healthProbeAddress + "/healthz"); code != 200 {
		t.Errorf("/healthz = %d", code)
	}
	_, metrics, err := httpGet("http://" + o.metricsAddress + "/metrics")
	if err != nil {
		t.Fatal(err)
	}
	for _, name := range []string{"metalambda_engine_api_requests_total", "go_goroutines", "process_resident_memory_bytes"} {
		if !strings.Contains(metrics, name) {
			t.Errorf("/metrics lacks %s", name)
		}
	}
}

func httpGet(url string) (int, string, error) {
	resp, err := http.Get(url)
	if err != nil {
		return 0, "", err
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	return resp.StatusCode, string(body), err
}

func freeAddr(t *testing.T) string {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	return l.Addr().String()
}
