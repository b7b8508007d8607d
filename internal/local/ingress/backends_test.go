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

	"k8s.io/client-go/kubernetes"
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

// newTestRouter builds a router of Defaults() changed by change.
func newTestRouter(t *testing.T, client kubernetes.Interface, change func(*Options)) *Router {
	t.Helper()
	opts := Defaults()
	change(&opts)
	r, err := New(client, opts)
	if err != nil {
		t.Fatal(err)
	}
	return r
}

// TestNewRefusesOptionsNotFromDefaults: a zero default is an error naming the
// option, not filled in.
func TestNewRefusesOptionsNotFromDefaults(t *testing.T) {
	for field, change := range map[string]func(*Options){
		"Dial":                  func(o *Options) { o.Dial = nil },
		"DialTimeout":           func(o *Options) { o.DialTimeout = 0 },
		"ResponseHeaderTimeout": func(o *Options) { o.ResponseHeaderTimeout = 0 },
		"IdleConnTimeout":       func(o *Options) { o.IdleConnTimeout = 0 },
		"DemandInterval":        func(o *Options) { o.DemandInterval = 0 },
		"HoldTimeout":           func(o *Options) { o.HoldTimeout = 0 },
		"MaxHeld":               func(o *Options) { o.MaxHeld = 0 },
	} {
		opts := Defaults()
		change(&opts)
		if _, err := New(nil, opts); err == nil || !strings.Contains(err.Error(), field) {
			t.Errorf("without %s: New = %v, want an error naming it", field, err)
		}
	}
}
