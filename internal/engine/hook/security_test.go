package hook

import (
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"errors"
	"fmt"
	"math/big"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"k8s.io/utils/ptr"

	"github.com/metalambda/metalambda/internal/apis/metacontroller/v1alpha1"
)

// fakeCredentials serves Secrets and ConfigMaps from maps keyed "namespace/name".
type fakeCredentials struct {
	secrets    map[string]map[string][]byte
	configMaps map[string]map[string]string
}

func (f fakeCredentials) Secret(_ context.Context, namespace, name string) (map[string][]byte, error) {
	if d, ok := f.secrets[namespace+"/"+name]; ok {
		return d, nil
	}
	return nil, fmt.Errorf("secrets %q not found", name)
}

func (f fakeCredentials) ConfigMap(_ context.Context, namespace, name string) (map[string]string, error) {
	if d, ok := f.configMaps[namespace+"/"+name]; ok {
		return d, nil
	}
	return nil, fmt.Errorf("configmaps %q not found", name)
}

func ref(name, key string) *v1alpha1.KeyReference {
	return &v1alpha1.KeyReference{Namespace: "ns", Name: name, Key: key}
}

// headerEcho answers {"authorization": <the header>} to every call.
func headerEcho() *httptest.Server {
	return httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		fmt.Fprintf(w, `{"authorization": %q}`, r.Header.Get("Authorization"))
	}))
}

// callWith resolves w's security, applies it to an endpoint at url and calls it.
func callWith(t *testing.T, w *v1alpha1.Webhook, creds Credentials, url string) (string, error) {
	t.Helper()
	sec, err := ReadSecurity(context.Background(), w, creds)
	if err != nil {
		return "", err
	}
	ep := Endpoint{URL: url, Timeout: 5 * time.Second}
	sec.Apply(&ep)
	var got struct {
		Authorization string `json:"authorization"`
	}
	err = (&Client{}).Call(context.Background(), ep, CallInfo{Controller: "test", Hook: HookSync}, map[string]any{}, &got)
	return got.Authorization, err
}

func TestAuthorizationHeaders(t *testing.T) {
	srv := headerEcho()
	defer srv.Close()
	creds := fakeCredentials{secrets: map[string]map[string][]byte{
		"ns/token": {"token": []byte("s3cret\n")},
		"ns/basic": {"username": []byte("ann"), "password": []byte("pw"), "user": []byte("bob"), "pass": []byte("x")},
	}}
	tests := []struct {
		name string
		w    v1alpha1.Webhook
		want string
	}{
		{"none", v1alpha1.Webhook{}, ""},
		{"bearer by default, trailing newline dropped", v1alpha1.Webhook{Authorization: &v1alpha1.WebhookAuthorization{SecretRef: ref("token", "token")}}, "Bearer s3cret"},
		{"another type", v1alpha1.Webhook{Authorization: &v1alpha1.WebhookAuthorization{Type: ptr.To("Token"), SecretRef: ref("token", "token")}}, "Token s3cret"},
		{"basic, default keys", v1alpha1.Webhook{BasicAuth: &v1alpha1.BasicAuth{SecretRef: ref("basic", "")}}, "Basic YW5uOnB3"},
		{"basic, own keys", v1alpha1.Webhook{BasicAuth: &v1alpha1.BasicAuth{SecretRef: ref("basic", ""), UsernameKey: ptr.To("user"), PasswordKey: ptr.To("pass")}}, "Basic Ym9iOng="},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := callWith(t, &tt.w, creds, srv.URL)
			if err != nil || got != tt.want {
				t.Fatalf("Authorization = %q, %v; want %q", got, err, tt.want)
			}
		})
	}
}

func TestSecurityErrors(t *testing.T) {
	creds := fakeCredentials{
		secrets:    map[string]map[string][]byte{"ns/token": {"token": []byte("a\nb")}, "ns/empty": {}},
		configMaps: map[string]map[string]string{"ns/ca": {"ca.crt": "not a certificate"}},
	}
	authz := func(a v1alpha1.WebhookAuthorization) v1alpha1.Webhook { return v1alpha1.Webhook{Authorization: &a} }
	tests := []struct {
		name     string
		w        v1alpha1.Webhook
		class    error
		contains string
	}{
		{"basic as authorization type", authz(v1alpha1.WebhookAuthorization{Type: ptr.To("basic"), SecretRef: ref("token", "token")}), ErrInvalidHook, "use basicAuth"},
		{"no key", authz(v1alpha1.WebhookAuthorization{SecretRef: ref("token", "")}), ErrInvalidHook, "name, namespace and key"},
		{"both kinds of auth", v1alpha1.Webhook{Authorization: &v1alpha1.WebhookAuthorization{SecretRef: ref("token", "token")}, BasicAuth: &v1alpha1.BasicAuth{SecretRef: ref("token", "")}}, ErrInvalidHook, "both authorization and basicAuth"},
		{"missing secret", authz(v1alpha1.WebhookAuthorization{SecretRef: ref("nope", "token")}), ErrCredentials, "Secret ns/nope"},
		{"missing key", authz(v1alpha1.WebhookAuthorization{SecretRef: ref("empty", "token")}), ErrCredentials, `ns/empty has no key "token"`},
		{"line break", authz(v1alpha1.WebhookAuthorization{SecretRef: ref("token", "token")}), ErrCredentials, "line break"},
		{"basic without password", v1alpha1.Webhook{BasicAuth: &v1alpha1.BasicAuth{SecretRef: ref("empty", "")}}, ErrCredentials, `no key "username"`},
		{"two CA sources", v1alpha1.Webhook{CABundle: &v1alpha1.CABundle{Inline: ptr.To("x"), ConfigMapRef: ref("ca", "")}}, ErrInvalidHook, "exactly one"},
		{"CA not PEM", v1alpha1.Webhook{CABundle: &v1alpha1.CABundle{ConfigMapRef: ref("ca", "")}}, ErrCredentials, `ConfigMap ns/ca key "ca.crt" holds no PEM certificate`},
		{"client TLS missing key", v1alpha1.Webhook{ClientTLS: &v1alpha1.ClientTLS{SecretRef: ref("empty", "")}}, ErrCredentials, `no key "tls.crt"`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := ReadSecurity(context.Background(), &tt.w, creds)
			if !errors.Is(err, tt.class) || !strings.Contains(err.Error(), tt.contains) {
				t.Fatalf("error = %v, want %v containing %q", err, tt.class, tt.contains)
			}
		})
	}
}

// A CA bundle, from each of its three sources, makes a server with a private
// certificate trusted; without it the call fails.
func TestCABundle(t *testing.T) {
	srv := httptest.NewTLSServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) { _, _ = w.Write([]byte(`{}`)) }))
	defer srv.Close()
	caPEM := string(pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: srv.Certificate().Raw}))
	creds := fakeCredentials{
		secrets:    map[string]map[string][]byte{"ns/ca": {"ca.crt": []byte(caPEM)}},
		configMaps: map[string]map[string]string{"ns/ca": {"bundle.pem": caPEM}},
	}
	if _, err := callWith(t, &v1alpha1.Webhook{}, creds, srv.URL); err == nil || !strings.Contains(err.Error(), "certificate") {
		t.Fatalf("without a CA bundle: %v, want a certificate error", err)
	}
	for name, bundle := range map[string]v1alpha1.CABundle{
		"inline":       {Inline: &caPEM},
		"secretRef":    {SecretRef: ref("ca", "")},
		"configMapRef": {ConfigMapRef: ref("ca", "bundle.pem")},
	} {
		if _, err := callWith(t, &v1alpha1.Webhook{CABundle: &bundle}, creds, srv.URL); err != nil {
			t.Errorf("caBundle %s: %v", name, err)
		}
	}
}

// A server that requires a client certificate accepts the one from clientTLS.
func TestClientTLS(t *testing.T) {
	certPEM, keyPEM, cert := selfSigned(t)
	clients := x509.NewCertPool()
	clients.AddCert(cert)
	srv := httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		fmt.Fprintf(w, `{"authorization": %q}`, r.TLS.PeerCertificates[0].Subject.CommonName)
	}))
	srv.TLS = &tls.Config{ClientAuth: tls.RequireAndVerifyClientCert, ClientCAs: clients}
	srv.StartTLS()
	defer srv.Close()
	caPEM := string(pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: srv.Certificate().Raw}))
	creds := fakeCredentials{secrets: map[string]map[string][]byte{"ns/client": {"tls.crt": certPEM, "tls.key": keyPEM}}}
	w := &v1alpha1.Webhook{CABundle: &v1alpha1.CABundle{Inline: &caPEM}}
	if _, err := callWith(t, w, creds, srv.URL); err == nil {
		t.Fatal("without a client certificate the call succeeded")
	}
	w.ClientTLS = &v1alpha1.ClientTLS{SecretRef: ref("client", "")}
	got, err := callWith(t, w, creds, srv.URL)
	if err != nil || got != "metalambda-test-client" {
		t.Fatalf("with clientTLS: %q, %v", got, err)
	}
}

func selfSigned(t *testing.T) (certPEM, keyPEM []byte, cert *x509.Certificate) {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	tmpl := &x509.Certificate{
		SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: "metalambda-test-client"},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(time.Hour),
		KeyUsage: x509.KeyUsageDigitalSignature, ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageClientAuth},
		BasicConstraintsValid: true, IsCA: true,
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		t.Fatal(err)
	}
	if cert, err = x509.ParseCertificate(der); err != nil {
		t.Fatal(err)
	}
	keyDER, err := x509.MarshalECPrivateKey(key)
	if err != nil {
		t.Fatal(err)
	}
	return pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}), pem.EncodeToMemory(&pem.Block{Type: "EC PRIVATE KEY", Bytes: keyDER}), cert
}
