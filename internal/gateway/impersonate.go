package gateway

import (
	"net/http"

	"k8s.io/client-go/rest"

	"github.com/metalambda/metalambda/internal/httpapi"
)

// callerHTTPClient is an HTTP client for cfg's API server whose requests carry the
// bearer token of the caller in their context (httpapi.CallerFrom), so that the API server authenticates
// and authorizes each write as that user and its audit log names them. The gateway
// passes on the token it was given instead of impersonating: impersonation would need
// the right to act as any user, which makes the gateway's own account as strong as an
// administrator's. Requests for a caller go without the gateway's own credentials (no
// client certificate, no token of its own: rest.AnonymousClientConfig), since the API
// server would authenticate a client certificate before the bearer token. Requests
// without a caller in their context (the gateway's own watch and status writes) go as
// the gateway.
func callerHTTPClient(cfg *rest.Config) (*http.Client, error) {
	own, err := rest.HTTPClientFor(cfg)
	if err != nil {
		return nil, err
	}
	anon := rest.AnonymousClientConfig(cfg)
	anon.Wrap(func(next http.RoundTripper) http.RoundTripper { return bearerTransport{next: next} })
	asCaller, err := rest.HTTPClientFor(anon)
	if err != nil {
		return nil, err
	}
	return &http.Client{Transport: callerTransport{own: own.Transport, caller: asCaller.Transport}, Timeout: cfg.Timeout}, nil
}

// callerTransport sends a request with a caller in its context through caller, others
// through own.
type callerTransport struct{ own, caller http.RoundTripper }

func (t callerTransport) RoundTrip(req *http.Request) (*http.Response, error) {
	if httpapi.CallerFrom(req.Context()) != nil {
		return t.caller.RoundTrip(req)
	}
	return t.own.RoundTrip(req)
}

// bearerTransport sets the caller's token as the request's bearer token.
type bearerTransport struct{ next http.RoundTripper }

func (t bearerTransport) RoundTrip(req *http.Request) (*http.Response, error) {
	c := httpapi.CallerFrom(req.Context())
	req = req.Clone(req.Context())
	req.Header.Set("Authorization", "Bearer "+c.Token)
	return t.next.RoundTrip(req)
}
