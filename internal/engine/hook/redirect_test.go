package hook

import (
	"context"
	"crypto/tls"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"sync/atomic"
	"testing"
)

// TestNoRedirects: a Client with NoRedirects gets a hook's 3xx as a StatusError and
// never sends the request to the Location (for a namespaced controller that would be
// the engine calling where the tenant likes, with the answer quoted in an event);
// without it, a redirect is followed as upstream's client does. Each is checked on
// the shared client, a TokenForHosts in front of it, and an endpoint's own TLS client.
func TestNoRedirects(t *testing.T) {
	var reached atomic.Int32
	target := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		reached.Add(1)
		_, _ = io.WriteString(w, `{"status":{"inside":true}}`)
	}))
	t.Cleanup(target.Close)
	redirect := serve(t, func(w http.ResponseWriter, r *http.Request) {
		http.Redirect(w, r, target.URL+"/secret", http.StatusTemporaryRedirect)
	})
	tlsEndpoint := redirect
	Security{TLS: &tls.Config{MinVersion: tls.VersionTLS12}}.Apply(&tlsEndpoint)
	if tlsEndpoint.HTTP == nil {
		t.Fatal("the endpoint with TLS settings has no client of its own")
	}
	for _, tc := range []struct {
		name string
		http Doer
		ep   Endpoint
	}{
		{"shared client", nil, redirect},
		{"token for hosts", TokenForHosts{Hosts: []string{"127.0.0.1"}, Token: "t"}, redirect},
		{"endpoint's TLS client", nil, tlsEndpoint},
	} {
		t.Run(tc.name, func(t *testing.T) {
			reached.Store(0)
			c := &Client{HTTP: tc.http, NoRedirects: true}
			err := c.Call(context.Background(), tc.ep, CallInfo{Hook: HookSync}, map[string]any{}, &map[string]any{})
			var status *StatusError
			if !errors.As(err, &status) || status.Code != http.StatusTemporaryRedirect {
				t.Errorf("err = %v, want the 307 as a StatusError", err)
			}
			if n := reached.Load(); n != 0 {
				t.Errorf("the redirect was followed (%d requests reached its target)", n)
			}
			c.NoRedirects = false
			var got map[string]any
			if err := c.Call(context.Background(), tc.ep, CallInfo{Hook: HookSync}, map[string]any{}, &got); err != nil {
				t.Fatalf("without NoRedirects: %v", err)
			}
			if reached.Load() != 1 {
				t.Errorf("without NoRedirects the redirect was not followed: %v", got)
			}
		})
	}
}

// TestPrecheckRefusesBeforeSending: an endpoint's Precheck error is the call's, named
// with the URL, and no request is sent.
func TestPrecheckRefusesBeforeSending(t *testing.T) {
	var reached atomic.Int32
	ep := serve(t, func(w http.ResponseWriter, r *http.Request) {
		reached.Add(1)
		_, _ = io.WriteString(w, `{}`)
	})
	refused := errors.New("the Service is now an ExternalName")
	ep.Precheck = func(context.Context) error { return refused }
	c := &Client{}
	err := c.Call(context.Background(), ep, CallInfo{Hook: HookSync}, map[string]any{}, &map[string]any{})
	if !errors.Is(err, refused) {
		t.Errorf("err = %v, want the precheck's", err)
	}
	if reached.Load() != 0 {
		t.Error("the request was sent although the precheck refused it")
	}
	ep.Precheck = func(context.Context) error { return nil }
	if err := c.Call(context.Background(), ep, CallInfo{Hook: HookSync}, map[string]any{}, &map[string]any{}); err != nil || reached.Load() != 1 {
		t.Errorf("with a passing precheck: err = %v, requests %d", err, reached.Load())
	}
}
