package kubeclient

import (
	"context"
	"fmt"
	"net/http"
	"strings"

	flowcontrolv1 "k8s.io/api/flowcontrol/v1"
	"k8s.io/client-go/rest"
)

// ServerFlowControl reports whether the API server of cfg paces its clients with API
// Priority and Fairness: it asks /livez/ping and looks for the header such a server
// puts on every answer. A server that does queues and rejects (429 with Retry-After,
// which client-go retries) the requests it cannot take, so a client-side rate limit
// only slows the client down.
func ServerFlowControl(ctx context.Context, cfg *rest.Config) (bool, error) {
	client, err := rest.HTTPClientFor(cfg)
	if err != nil {
		return false, err
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, strings.TrimRight(cfg.Host, "/")+"/livez/ping", nil)
	if err != nil {
		return false, err
	}
	resp, err := client.Do(req)
	if err != nil {
		return false, fmt.Errorf("probe API Priority and Fairness: %w", err)
	}
	defer resp.Body.Close()
	return resp.Header.Get(flowcontrolv1.ResponseHeaderMatchedFlowSchemaUID) != "", nil
}

// Unlimited removes cfg's client-side rate limit (client-go's meaning of a negative QPS).
func Unlimited(cfg *rest.Config) {
	cfg.QPS, cfg.Burst, cfg.RateLimiter = -1, 0, nil
}
