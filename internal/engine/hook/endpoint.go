package hook

import (
	"context"
	"net/url"
	"strconv"
	"strings"
	"time"

	"github.com/metalambda/metalambda/internal/apis/metacontroller/v1alpha1"
)

// DefaultTimeout is the timeout of a webhook that does not set one.
const DefaultTimeout = 10 * time.Second

// Response decoding modes of webhook.responseUnMarshallMode.
const (
	ModeStrict = "strict"
	ModeLoose  = "loose"
)

// Endpoint is a resolved webhook: everything Client.Call needs to reach it.
type Endpoint struct {
	URL     string
	Timeout time.Duration
	// Strict rejects responses with unknown or duplicate fields.
	Strict  bool
	Version v1alpha1.HookVersion
	// Authorization is the Authorization header of every call, "" for none (see
	// ReadSecurity).
	Authorization string
	// HTTP sends this endpoint's calls when it needs TLS settings of its own (a CA
	// bundle, a client certificate); nil means the Client's.
	HTTP Doer
	// ETags caches responses for If-None-Match (webhook.etag); nil when off.
	ETags *ETagCache
	// Precheck, when set, runs before every call; its error is the call's, and no
	// request is sent. A namespaced controller's Service hook checks there that the
	// Service still is one the engine may call (not turned into an ExternalName).
	Precheck func(context.Context) error
}

// ServiceResolver maps a webhook's service reference to a base URL
// ("scheme://host:port", no path) when the caller knows a better route than cluster
// DNS, for example from outside the cluster. It returns ok false to fall back to DNS.
type ServiceResolver func(ref v1alpha1.ServiceReference) (baseURL string, ok bool)

// ResolveEndpoint validates h and resolves it into an Endpoint. The defaults follow
// Metacontroller: version v1, timeout 10s, loose decoding for v1 and strict for v2,
// a service on port 80 over http, and no ETag caching. webhook.url wins over service and path.
// resolve may be nil. Errors wrap ErrInvalidHook.
func ResolveEndpoint(h *v1alpha1.Hook, resolve ServiceResolver) (Endpoint, error) {
	if h == nil {
		return Endpoint{}, invalidHook("no hook given")
	}
	if h.Webhook == nil {
		return Endpoint{}, invalidHook("hook has no webhook")
	}
	version, err := hookVersion(h.Version)
	if err != nil {
		return Endpoint{}, err
	}
	u, err := webhookURL(h.Webhook, resolve)
	if err != nil {
		return Endpoint{}, err
	}
	timeout, err := webhookTimeout(h.Webhook)
	if err != nil {
		return Endpoint{}, err
	}
	strict, err := strictDecoding(h.Webhook.ResponseUnMarshallMode, version)
	if err != nil {
		return Endpoint{}, err
	}
	etags, err := etagCache(h.Webhook.Etag)
	if err != nil {
		return Endpoint{}, err
	}
	return Endpoint{URL: u, Timeout: timeout, Strict: strict, Version: version, ETags: etags}, nil
}

func hookVersion(v *v1alpha1.HookVersion) (v1alpha1.HookVersion, error) {
	if v == nil || *v == "" {
		return v1alpha1.HookVersionV1, nil
	}
	switch *v {
	case v1alpha1.HookVersionV1, v1alpha1.HookVersionV2:
		return *v, nil
	}
	return "", invalidHook("hook version %q is not v1 or v2", *v)
}

func webhookURL(w *v1alpha1.Webhook, resolve ServiceResolver) (string, error) {
	if w.URL != nil && *w.URL != "" {
		return checkURL(*w.URL)
	}
	if w.Service == nil {
		return "", invalidHook("webhook needs url or service")
	}
	base, err := serviceBase(*w.Service, resolve)
	if err != nil {
		return "", err
	}
	return checkURL(strings.TrimSuffix(base, "/") + webhookPath(w.Path))
}

// checkURL accepts absolute http and https URLs.
func checkURL(raw string) (string, error) {
	u, err := url.Parse(raw)
	if err != nil {
		return "", invalidHook("webhook url %q does not parse: %v", raw, err)
	}
	if u.Scheme != "http" && u.Scheme != "https" {
		return "", invalidHook("webhook url %q must start with http:// or https://", raw)
	}
	if u.Host == "" {
		return "", invalidHook("webhook url %q has no host", raw)
	}
	return raw, nil
}

// serviceBase is "<protocol>://<name>.<namespace>:<port>" unless resolve knows better.
func serviceBase(ref v1alpha1.ServiceReference, resolve ServiceResolver) (string, error) {
	if ref.Name == "" || ref.Namespace == "" {
		return "", invalidHook("webhook service needs name and namespace")
	}
	if resolve != nil {
		if base, ok := resolve(ref); ok {
			return base, nil
		}
	}
	return dnsBase(ref)
}

// dnsBase is the cluster DNS form of ref, with protocol http and port 80 by default.
func dnsBase(ref v1alpha1.ServiceReference) (string, error) {
	protocol := "http"
	if ref.Protocol != nil && *ref.Protocol != "" {
		protocol = *ref.Protocol
	}
	if protocol != "http" && protocol != "https" {
		return "", invalidHook("webhook service protocol %q is not http or https", protocol)
	}
	port := int32(80)
	if ref.Port != nil {
		port = *ref.Port
	}
	if port < 1 || port > 65535 {
		return "", invalidHook("webhook service port %d is not between 1 and 65535", port)
	}
	return protocol + "://" + ref.Name + "." + ref.Namespace + ":" + strconv.Itoa(int(port)), nil
}

func webhookPath(p *string) string {
	switch {
	case p == nil:
		return ""
	case *p == "" || strings.HasPrefix(*p, "/"):
		return *p
	}
	return "/" + *p
}

func webhookTimeout(w *v1alpha1.Webhook) (time.Duration, error) {
	if w.Timeout == nil {
		return DefaultTimeout, nil
	}
	if w.Timeout.Duration <= 0 {
		return 0, invalidHook("webhook timeout must be positive, got %s", w.Timeout.Duration)
	}
	return w.Timeout.Duration, nil
}

func strictDecoding(mode *string, version v1alpha1.HookVersion) (bool, error) {
	if mode == nil || *mode == "" {
		return version == v1alpha1.HookVersionV2, nil
	}
	switch *mode {
	case ModeStrict:
		return true, nil
	case ModeLoose:
		return false, nil
	}
	return false, invalidHook("webhook responseUnMarshallMode %q is not %q or %q", *mode, ModeStrict, ModeLoose)
}
