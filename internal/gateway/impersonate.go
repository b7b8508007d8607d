package gateway

import (
	"context"
	"net/http"

	authenticationv1 "k8s.io/api/authentication/v1"
	"k8s.io/client-go/rest"
)

// callerKey is the context key of the caller a management request was authorized for.
type callerKey struct{}

// caller is who a management request acts for: the user the API server named for the
// bearer token (TokenReview), and that token.
type caller struct {
	user  *authenticationv1.UserInfo
	token string
}

// withCaller marks ctx as acting for user, whose bearer token is token: the gateway's
// Kubernetes calls made with it carry that token.
func withCaller(ctx context.Context, user *authenticationv1.UserInfo, token string) context.Context {
	return context.WithValue(ctx, callerKey{}, caller{user: user, token: token})
}

func callerFrom(ctx context.Context) *authenticationv1.UserInfo {
	c, _ := ctx.Value(callerKey{}).(caller)
	return c.user
}

// callerHTTPClient is an HTTP client for cfg's API server whose requests carry the
// bearer token of the caller in their context, so that the API server authenticates
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
	if _, ok := req.Context().Value(callerKey{}).(caller); ok {
		return t.caller.RoundTrip(req)
	}
	return t.own.RoundTrip(req)
}

// bearerTransport sets the caller's token as the request's bearer token.
type bearerTransport struct{ next http.RoundTripper }

func (t bearerTransport) RoundTrip(req *http.Request) (*http.Response, error) {
	c, _ := req.Context().Value(callerKey{}).(caller)
	req = req.Clone(req.Context())
	req.Header.Set("Authorization", "Bearer "+c.token)
	return t.next.RoundTrip(req)
}
