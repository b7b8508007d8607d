package gateway

import (
	"context"
	"net/http"

	authenticationv1 "k8s.io/api/authentication/v1"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/transport"
)

// callerKey is the context key of the user a management request was authorized for.
type callerKey struct{}

// withCaller marks ctx as acting for u: the gateway's Kubernetes calls made with it
// impersonate u.
func withCaller(ctx context.Context, u *authenticationv1.UserInfo) context.Context {
	return context.WithValue(ctx, callerKey{}, u)
}

func callerFrom(ctx context.Context) *authenticationv1.UserInfo {
	u, _ := ctx.Value(callerKey{}).(*authenticationv1.UserInfo)
	return u
}

// actAsCaller returns a copy of cfg whose requests impersonate the user in their
// context (client-go impersonation: Impersonate-User, -Group, -Uid and -Extra-*
// headers), so that the API server authorizes each write as that user and its audit
// log names them. Requests without a user in their context (the gateway's own watch
// and status writes) go as the gateway.
func actAsCaller(cfg *rest.Config) *rest.Config {
	c := rest.CopyConfig(cfg)
	c.Wrap(func(next http.RoundTripper) http.RoundTripper { return callerTransport{next: next} })
	return c
}

type callerTransport struct{ next http.RoundTripper }

func (t callerTransport) RoundTrip(req *http.Request) (*http.Response, error) {
	u := callerFrom(req.Context())
	if u == nil {
		return t.next.RoundTrip(req)
	}
	extra := make(map[string][]string, len(u.Extra))
	for k, v := range u.Extra {
		extra[k] = v
	}
	as := transport.ImpersonationConfig{UserName: u.Username, UID: u.UID, Groups: u.Groups, Extra: extra}
	return transport.NewImpersonatingRoundTripper(as, t.next).RoundTrip(req)
}
