// Package benchkit is what the gateway's benchmarks share: a control plane with
// the project's CRDs, an in-process gateway on it, and a client that posts a hook
// request.
package benchkit

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"net/http"
	"time"

	apiextensionsclient "k8s.io/apiextensions-apiserver/pkg/client/clientset/clientset"

	"github.com/metalambda/metalambda/crds"
	"github.com/metalambda/metalambda/internal/gateway"
	"github.com/metalambda/metalambda/internal/gateway/lambda"
	"github.com/metalambda/metalambda/internal/httpapi"
	"github.com/metalambda/metalambda/internal/kubetest/start"
	"github.com/metalambda/metalambda/internal/local/cluster"
)

// StartControlPlane starts etcd and an API server alone, with the project's CRDs
// installed.
func StartControlPlane(ctx context.Context) (*cluster.Cluster, error) {
	opts := cluster.Defaults()
	opts.EtcdNoFsync, opts.Components = true, nil
	cluster, err := cluster.Start(ctx, opts)
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
// PublicURL is set to it) until stop is called, as the tests start theirs
// (package kubetest/start).
func StartGateway(cluster *cluster.Cluster, opts gateway.Options) (base string, gw *gateway.Gateway, stop func(), err error) {
	g, err := start.ServeGateway(cluster.Config, opts)
	if err != nil {
		return "", nil, nil, err
	}
	return g.URL, g.Gateway, g.Stop, nil
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

// Hooks are the benchmarks' trivial sync hooks, by runtime: one ConfigMap child
// named after the parent.
var Hooks = map[string]string{
	lambda.JavaScript: `function sync(request) {
  return {children: [{apiVersion: "v1", kind: "ConfigMap", metadata: {name: request.parent.metadata.name}, data: {hello: "world"}}]};
}`,
	lambda.Python: `def sync(request):
    return {"children": [{"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": request["parent"]["metadata"]["name"]}, "data": {"hello": "world"}}]}
`,
	lambda.Jsonnet: `function(request) {
  children: [{apiVersion: "v1", kind: "ConfigMap", metadata: {name: request.parent.metadata.name}, data: {hello: "world"}}],
}`,
}

// Runtimes are the runtimes of Hooks, in the order the benchmarks cycle through.
var Runtimes = []string{lambda.JavaScript, lambda.Python, lambda.Jsonnet}
