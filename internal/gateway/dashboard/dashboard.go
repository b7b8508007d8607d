package dashboard

import (
	"errors"
	"fmt"
	"html/template"
	"net/http"
	"time"

	authenticationv1 "k8s.io/api/authentication/v1"
	"k8s.io/client-go/rest"

	"github.com/metalambda/metalambda/internal/engineapi"
	"github.com/metalambda/metalambda/internal/gateway/egress"
	"github.com/metalambda/metalambda/web"
)

// Prefix is the path the gateway serves the dashboard under.
const Prefix = "/ui"

// Authenticator tells who a bearer token belongs to (the gateway answers with a cached
// TokenReview and limits failed attempts per client). It answers an *AuthError when
// the token is refused (401) or the client tried too often (429, with RetryAfter).
type Authenticator func(r *http.Request, token string) (*authenticationv1.UserInfo, error)

// AuthError is a refused login: Status is the HTTP status to answer, Message says why,
// RetryAfter (seconds, when positive) when to try again, as a Retry-After header.
type AuthError struct {
	Status     int
	Message    string
	RetryAfter int
}

func (e *AuthError) Error() string { return e.Message }

// Options configure the dashboard.
type Options struct {
	// Config reaches the Kubernetes API; its credentials are replaced by each user's
	// token.
	Config *rest.Config
	// Authenticate checks a token at login.
	Authenticate Authenticator
	// EngineURL is the engine's API address (controllers, hook calls, parents); empty
	// leaves those pages saying so.
	EngineURL string
	// IngressAddress is where the ingress router listens (host:port); PythonLambdas'
	// "try it" goes through it. Empty turns "try it" off.
	IngressAddress string
	// EgressDeny are destinations "try it" never connects to, besides loopback,
	// link-local, unspecified and multicast addresses: the platform's control plane.
	// IngressAddress is reached even so.
	EgressDeny []egress.Destination
	// FunctionRates are a Function's recent call and error rates (the gateway's
	// counters); false when the gateway has not loaded it. Nil shows no rates.
	FunctionRates func(namespace, name string) (Rates, bool)
	// FunctionsAPI is the gateway's management API of Functions
	// (/v1/namespaces/{namespace}/functions/...): the Functions pages call it in
	// process with the session's token, so that it checks what they do as it checks
	// any request (RBAC, compile errors with their position) and writes as the user.
	// Nil leaves the Functions pages unable to change anything.
	FunctionsAPI http.Handler
	// SessionTTL is how long a session lasts. Default 8h.
	SessionTTL time.Duration
	// LiveInterval is how often a live page is rendered again. Default 2s.
	LiveInterval time.Duration
	// SecureCookies marks the session cookie Secure even for plain-HTTP requests (for
	// a gateway behind a TLS-terminating proxy); requests over TLS always get it.
	SecureCookies bool
	// TraceURLTemplate links the trace ID of a hook call or invocation to a tracing
	// UI: the ID replaces {traceID} (http://jaeger:16686/trace/{traceID}, say).
	// Empty shows the IDs as text.
	TraceURLTemplate string
	// Now is the clock; default time.Now.
	Now func() time.Time
}

// Defaults are the options of a dashboard besides the ones its gateway gives it
// (Config, Authenticate and the rest): gateway.Defaults starts from them, and New
// takes no zero value for one of them.
func Defaults() Options {
	return Options{SessionTTL: 8 * time.Hour, LiveInterval: 2 * time.Second, Now: time.Now}
}

// validate refuses options that did not start from Defaults.
func (o *Options) validate() error {
	switch {
	case o.Config == nil || o.Authenticate == nil:
		return errors.New("dashboard: a Kubernetes config and an authenticator are required")
	case o.SessionTTL <= 0:
		return fmt.Errorf("dashboard option SessionTTL must be positive, got %s (start the options from dashboard.Defaults())", o.SessionTTL)
	case o.LiveInterval <= 0:
		return fmt.Errorf("dashboard option LiveInterval must be positive, got %s (start the options from dashboard.Defaults())", o.LiveInterval)
	case o.Now == nil:
		return errors.New("dashboard option Now must not be nil (start the options from dashboard.Defaults())")
	}
	return ValidateTraceURLTemplate(o.TraceURLTemplate)
}

// Rates are a function's calls and failed calls per minute over the last Window.
type Rates struct {
	CallsPerMinute, ErrorsPerMinute float64
	Window                          time.Duration
}

// Dashboard serves the pages.
type Dashboard struct {
	opts     Options
	sessions *sessions
	pages    map[string]*template.Template
	engine   *engineapi.Client
	// try sends "try it" requests: to the ingress alone, and following no redirect.
	try *http.Client
	// loopback carries the Functions pages' calls of the gateway's API.
	loopback apiLoopback
}

// New builds a dashboard.
func New(opts Options) (*Dashboard, error) {
	if err := opts.validate(); err != nil {
		return nil, err
	}
	pages, err := parsePages(web.Templates(), opts.TraceURLTemplate)
	if err != nil {
		return nil, err
	}
	d := &Dashboard{opts: opts, sessions: newSessions(opts.SessionTTL, opts.Now), pages: pages}
	if opts.EngineURL != "" {
		d.engine = &engineapi.Client{BaseURL: opts.EngineURL, HTTP: &http.Client{Timeout: 10 * time.Second}}
	}
	if opts.IngressAddress != "" {
		if d.try, err = tryClient(opts.IngressAddress, opts.EgressDeny); err != nil {
			return nil, fmt.Errorf("dashboard: %w", err)
		}
	}
	return d, nil
}

// Handler serves the dashboard; mount it at Prefix.
func (d *Dashboard) Handler() http.Handler { return d.routes() }
