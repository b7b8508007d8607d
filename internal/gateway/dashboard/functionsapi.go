package dashboard

import (
	"context"
	"net/http"
	"sync"

	"github.com/metalambda/metalambda/internal/gatewayapi"
	"github.com/metalambda/metalambda/internal/httpapi"
)

// The Functions pages act through the gateway's management API (Options.FunctionsAPI)
// with the gatewayapi client, over an in-process loopback, with the session's token:
// what they do is checked exactly as the API checks it (RBAC through
// SubjectAccessReview, compile errors with their position) and writes are made as
// the user.

// The wire types of the gateway's API, as the pages show them.
type (
	Invocation   = gatewayapi.Invocation
	ReplayedCall = gatewayapi.ReplayedCall
	CallOutcome  = gatewayapi.CallOutcome
)

// functionsPath is the API path of a namespace's functions, with more segments.
func functionsPath(namespace string, segments ...string) string {
	return gatewayapi.FunctionsPath(namespace, segments...)
}

// apiLoopback is the loopback to Options.FunctionsAPI, started at the first call.
type apiLoopback struct {
	once sync.Once
	lb   *gatewayapi.Loopback
}

// api is a client of the gateway's API acting as the session's user of r, from r's
// client address (the API limits failed logins per client).
func (d *Dashboard) api(r *http.Request) (*gatewayapi.Client, context.Context, error) {
	if d.opts.FunctionsAPI == nil {
		return nil, nil, httpapi.NewError(http.StatusServiceUnavailable, "no_api", "this dashboard has no functions API")
	}
	d.loopback.once.Do(func() { d.loopback.lb = gatewayapi.NewLoopback(d.opts.FunctionsAPI) })
	if d.loopback.lb == nil {
		return nil, nil, httpapi.NewError(http.StatusServiceUnavailable, "closed", "this dashboard is closed")
	}
	c := &gatewayapi.Client{BaseURL: gatewayapi.BaseURL, Token: SessionFrom(r.Context()).Token, HTTP: d.loopback.lb.Client()}
	return c, gatewayapi.WithClientAddress(r.Context(), r.RemoteAddr), nil
}

// callAPI sends one request to the gateway's API as the session's user and decodes a
// success into out (when out is not nil); an error answer is an *httpapi.Error.
func (d *Dashboard) callAPI(r *http.Request, method, path string, body, out any) error {
	c, ctx, err := d.api(r)
	if err != nil {
		return err
	}
	_, err = c.Do(ctx, method, path, body, out)
	return err
}

// Close stops the loopback the Functions pages call the API through, if one started;
// none starts after.
func (d *Dashboard) Close() error {
	d.loopback.once.Do(func() {})
	if d.loopback.lb == nil {
		return nil
	}
	return d.loopback.lb.Close()
}
