package hook

import (
	"cmp"
	"context"
	"crypto/tls"
	"crypto/x509"
	"encoding/base64"
	"errors"
	"fmt"
	"net/http"
	"strings"

	"k8s.io/utils/ptr"

	"github.com/metalambda/metalambda/internal/apis/metacontroller/v1alpha1"
)

// ErrCredentials means a Secret or ConfigMap that a webhook's TLS or auth settings
// name cannot be read, or does not hold what they need. Unlike ErrInvalidHook it can
// go away without the controller changing: the object may be created later.
var ErrCredentials = errors.New("webhook credentials unavailable")

// Credentials reads the Secrets and ConfigMaps that webhook TLS and auth settings
// name.
type Credentials interface {
	Secret(ctx context.Context, namespace, name string) (map[string][]byte, error)
	ConfigMap(ctx context.Context, namespace, name string) (map[string]string, error)
}

// Key names used when a reference leaves them out, as Metacontroller has them.
const (
	DefaultCABundleKey   = "ca.crt"
	DefaultUsernameKey   = "username"
	DefaultPasswordKey   = "password"
	DefaultCertKey       = "tls.crt"
	DefaultPrivateKeyKey = "tls.key"
)

// Security is what a webhook's caBundle, clientTLS, authorization and basicAuth come
// to once their Secrets and ConfigMaps are read.
type Security struct {
	// Authorization is the value of the Authorization header of every call.
	Authorization string
	// TLS is the client TLS configuration, nil for the default.
	TLS *tls.Config
}

// ReadSecurity reads the TLS and auth settings of w through creds; a webhook with
// none gives the zero Security. Spec mistakes wrap ErrInvalidHook; a missing object
// or key, or content that does not parse, wraps ErrCredentials. Every error names
// the field and the object at fault.
func ReadSecurity(ctx context.Context, w *v1alpha1.Webhook, creds Credentials) (Security, error) {
	var s Security
	if w == nil {
		return s, nil
	}
	if w.Authorization != nil && w.BasicAuth != nil {
		return s, invalidHook("webhook sets both authorization and basicAuth; choose one")
	}
	var err error
	switch {
	case w.Authorization != nil:
		s.Authorization, err = bearer(ctx, w.Authorization, creds)
	case w.BasicAuth != nil:
		s.Authorization, err = basic(ctx, w.BasicAuth, creds)
	}
	if err != nil {
		return s, err
	}
	if w.CABundle == nil && w.ClientTLS == nil {
		return s, nil
	}
	s.TLS = &tls.Config{MinVersion: tls.VersionTLS12}
	if w.CABundle != nil {
		if s.TLS.RootCAs, err = caBundle(ctx, w.CABundle, creds); err != nil {
			return s, err
		}
	}
	if w.ClientTLS != nil {
		cert, err := clientCertificate(ctx, w.ClientTLS, creds)
		if err != nil {
			return s, err
		}
		s.TLS.Certificates = []tls.Certificate{cert}
	}
	return s, nil
}

// Apply sets ep's Authorization and, for custom TLS, its own HTTP client.
func (s Security) Apply(ep *Endpoint) {
	ep.Authorization = s.Authorization
	if s.TLS != nil {
		t := newTransport()
		t.TLSClientConfig = s.TLS
		ep.HTTP = &http.Client{Transport: t, CheckRedirect: CheckRedirect}
	}
}

// bearer is "<type> <credential>", the type "Bearer" unless set.
func bearer(ctx context.Context, a *v1alpha1.WebhookAuthorization, creds Credentials) (string, error) {
	kind := "Bearer"
	if a.Type != nil && *a.Type != "" {
		kind = *a.Type
	}
	if strings.EqualFold(kind, "Basic") {
		return "", invalidHook("webhook authorization type Basic is not allowed: use basicAuth")
	}
	if strings.ContainsAny(kind, " \t\r\n") {
		return "", invalidHook("webhook authorization type %q is not one word", kind)
	}
	ref := a.SecretRef
	if ref == nil || ref.Name == "" || ref.Namespace == "" || ref.Key == "" {
		return "", invalidHook("webhook authorization needs secretRef with name, namespace and key")
	}
	data, err := secret(ctx, "authorization", ref, creds)
	if err != nil {
		return "", err
	}
	credential, err := textKey("authorization", "Secret", ref, ref.Key, data)
	if err != nil {
		return "", err
	}
	return kind + " " + credential, nil
}

// basic is "Basic base64(username:password)".
func basic(ctx context.Context, b *v1alpha1.BasicAuth, creds Credentials) (string, error) {
	ref := b.SecretRef
	if ref == nil || ref.Name == "" || ref.Namespace == "" {
		return "", invalidHook("webhook basicAuth needs secretRef with name and namespace")
	}
	data, err := secret(ctx, "basicAuth", ref, creds)
	if err != nil {
		return "", err
	}
	username, err := textKey("basicAuth", "Secret", ref, cmp.Or(ptr.Deref(b.UsernameKey, ""), DefaultUsernameKey), data)
	if err != nil {
		return "", err
	}
	password, err := textKey("basicAuth", "Secret", ref, cmp.Or(ptr.Deref(b.PasswordKey, ""), DefaultPasswordKey), data)
	if err != nil {
		return "", err
	}
	return "Basic " + base64.StdEncoding.EncodeToString([]byte(username+":"+password)), nil
}

// caBundle is a pool of exactly the bundle's certificates: a webhook with a CA
// bundle trusts it, not the system roots, as Kubernetes webhooks do.
func caBundle(ctx context.Context, c *v1alpha1.CABundle, creds Credentials) (*x509.CertPool, error) {
	set := 0
	for _, ok := range []bool{c.Inline != nil, c.SecretRef != nil, c.ConfigMapRef != nil} {
		if ok {
			set++
		}
	}
	if set != 1 {
		return nil, invalidHook("webhook caBundle needs exactly one of inline, secretRef and configMapRef")
	}
	var pem []byte
	source := "caBundle.inline"
	switch {
	case c.Inline != nil:
		pem = []byte(*c.Inline)
	case c.SecretRef != nil:
		data, err := secret(ctx, "caBundle", c.SecretRef, creds)
		if err != nil {
			return nil, err
		}
		key := cmp.Or(c.SecretRef.Key, DefaultCABundleKey)
		if pem = data[key]; len(pem) == 0 {
			return nil, missingKey("caBundle", "Secret", c.SecretRef, key)
		}
		source = fmt.Sprintf("Secret %s/%s key %q", c.SecretRef.Namespace, c.SecretRef.Name, key)
	default:
		ref := c.ConfigMapRef
		if ref.Name == "" || ref.Namespace == "" {
			return nil, invalidHook("webhook caBundle.configMapRef needs name and namespace")
		}
		data, err := creds.ConfigMap(ctx, ref.Namespace, ref.Name)
		if err != nil {
			return nil, fmt.Errorf("%w: webhook caBundle: ConfigMap %s/%s: %v", ErrCredentials, ref.Namespace, ref.Name, err)
		}
		key := cmp.Or(ref.Key, DefaultCABundleKey)
		if pem = []byte(data[key]); len(pem) == 0 {
			return nil, missingKey("caBundle", "ConfigMap", ref, key)
		}
		source = fmt.Sprintf("ConfigMap %s/%s key %q", ref.Namespace, ref.Name, key)
	}
	pool := x509.NewCertPool()
	if !pool.AppendCertsFromPEM(pem) {
		return nil, fmt.Errorf("%w: webhook caBundle: %s holds no PEM certificate", ErrCredentials, source)
	}
	return pool, nil
}

func clientCertificate(ctx context.Context, c *v1alpha1.ClientTLS, creds Credentials) (tls.Certificate, error) {
	ref := c.SecretRef
	if ref == nil || ref.Name == "" || ref.Namespace == "" {
		return tls.Certificate{}, invalidHook("webhook clientTLS needs secretRef with name and namespace")
	}
	data, err := secret(ctx, "clientTLS", ref, creds)
	if err != nil {
		return tls.Certificate{}, err
	}
	certKey, keyKey := cmp.Or(ptr.Deref(c.CertKey, ""), DefaultCertKey), cmp.Or(ptr.Deref(c.PrivateKeyKey, ""), DefaultPrivateKeyKey)
	for _, k := range []string{certKey, keyKey} {
		if len(data[k]) == 0 {
			return tls.Certificate{}, missingKey("clientTLS", "Secret", ref, k)
		}
	}
	cert, err := tls.X509KeyPair(data[certKey], data[keyKey])
	if err != nil {
		return tls.Certificate{}, fmt.Errorf("%w: webhook clientTLS: Secret %s/%s keys %q and %q: %v", ErrCredentials, ref.Namespace, ref.Name, certKey, keyKey, err)
	}
	return cert, nil
}

func secret(ctx context.Context, field string, ref *v1alpha1.KeyReference, creds Credentials) (map[string][]byte, error) {
	if ref.Name == "" || ref.Namespace == "" {
		return nil, invalidHook("webhook %s.secretRef needs name and namespace", field)
	}
	data, err := creds.Secret(ctx, ref.Namespace, ref.Name)
	if err != nil {
		return nil, fmt.Errorf("%w: webhook %s: Secret %s/%s: %v", ErrCredentials, field, ref.Namespace, ref.Name, err)
	}
	return data, nil
}

// textKey is a credential for a header: surrounding white space (the newline that
// files end with) is dropped, and it must be left with no line break.
func textKey(field, kind string, ref *v1alpha1.KeyReference, key string, data map[string][]byte) (string, error) {
	v := strings.TrimSpace(string(data[key]))
	if v == "" {
		return "", missingKey(field, kind, ref, key)
	}
	if strings.ContainsAny(v, "\r\n") {
		return "", fmt.Errorf("%w: webhook %s: %s %s/%s key %q holds a line break", ErrCredentials, field, kind, ref.Namespace, ref.Name, key)
	}
	return v, nil
}

func missingKey(field, kind string, ref *v1alpha1.KeyReference, key string) error {
	return fmt.Errorf("%w: webhook %s: %s %s/%s has no key %q (or it is empty)", ErrCredentials, field, kind, ref.Namespace, ref.Name, key)
}
