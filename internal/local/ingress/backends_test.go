package ingress

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
)

// echo is what a test backend answers: its name and what it received.
type echo struct {
	Backend        string
	Host           string
	Path           string
	RawPath        string
	ForwardedFor   string
	ForwardedHost  string
	ForwardedProto string
}

// startBackends starts one HTTP server per endpoint ("ip:port" → backend name) and
// returns an Options.Dial that connects each endpoint to its server. Endpoints without
// a server refuse connections.
func startBackends(t *testing.T, endpoints map[string]string) func(ctx context.Context, network, addr string) (net.Conn, error) {
	t.Helper()
	listeners := map[string]string{}
	for endpoint, name := range endpoints {
		srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			w.Header().Set("Content-Type", "application/json")
			_ = json.NewEncoder(w).Encode(echo{
				Backend: name, Host: r.Host, Path: r.URL.Path, RawPath: r.URL.RawPath,
				ForwardedFor: r.Header.Get("X-Forwarded-For"), ForwardedHost: r.Header.Get("X-Forwarded-Host"), ForwardedProto: r.Header.Get("X-Forwarded-Proto"),
			})
		}))
		t.Cleanup(srv.Close)
		listeners[endpoint] = srv.Listener.Addr().String()
	}
	return func(ctx context.Context, network, addr string) (net.Conn, error) {
		real, ok := listeners[addr]
		if !ok {
			return nil, fmt.Errorf("dial %s %s: connection refused (no test server)", network, addr)
		}
		var d net.Dialer
		return d.DialContext(ctx, network, real)
	}
}

// response is what the router answered to one request.
type response struct {
	code int
	body string
	echo echo // when a backend answered
}

// get sends GET url with the Host header host.
func get(ctx context.Context, url, host string) (response, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	if err != nil {
		return response{}, err
	}
	req.Host = host
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return response{}, err
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	if err != nil {
		return response{}, err
	}
	r := response{code: resp.StatusCode, body: strings.TrimSpace(string(body))}
	if strings.HasPrefix(resp.Header.Get("Content-Type"), "application/json") {
		if err := json.Unmarshal(body, &r.echo); err != nil {
			return r, fmt.Errorf("decode backend answer %q: %w", body, err)
		}
	}
	return r, nil
}
