//go:build integration

package platform

import (
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/json"
	"encoding/pem"
	"fmt"
	"math/big"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"

	"github.com/metalambda/metalambda/internal/kubetest"
)

// testWebhookAuth mirrors examples/webhook-auth: the hooks are served over TLS by a
// server whose certificate a private CA signed, which asks for a client certificate
// of the same CA and for a bearer token. A controller whose endpointConfigs give the
// CA bundle, the client certificate and the right token propagates a Secret to the
// namespaces its parent selects; one given a wrong token reports a SyncError and
// propagates nothing. The hook is a Go handler here: the gateway serves plain HTTP.
func testWebhookAuth(t *testing.T, e *examples) {
	const ns = "webhook-auth"
	const token = "webhook-auth-bearer-token"
	ca := newTestCA(t)
	srv := httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Header.Get("Authorization") != "Bearer "+token {
			http.Error(w, "unauthorized", http.StatusUnauthorized)
			return
		}
		serveSecretPropagation(w, r)
	}))
	srv.TLS = &tls.Config{
		MinVersion: tls.VersionTLS12, ClientAuth: tls.RequireAndVerifyClientCert, ClientCAs: ca.pool,
		Certificates: []tls.Certificate{ca.issue(t, "webhook-auth-controller", x509.ExtKeyUsageServerAuth)},
	}
	srv.StartTLS()
	t.Cleanup(srv.Close)
	client := ca.issue(t, "metacontroller", x509.ExtKeyUsageClientAuth)
	host := strings.TrimPrefix(srv.URL, "https://")

	e.applyf(t, `apiVersion: v1
kind: Namespace
metadata: {name: %[1]s}
---
apiVersion: v1
kind: ConfigMap
metadata: {name: webhook-auth-ca, namespace: %[1]s}
data: {ca.crt: %[2]q}
---
apiVersion: v1
kind: Secret
metadata: {name: webhook-auth-client, namespace: %[1]s}
stringData: {tls.crt: %[3]q, tls.key: %[4]q}
---
apiVersion: v1
kind: Secret
metadata: {name: webhook-auth-token, namespace: %[1]s}
stringData: {token: %[5]s}
---
apiVersion: v1
kind: Secret
metadata: {name: webhook-auth-wrong-token, namespace: %[1]s}
stringData: {token: not-the-token}
`, ns, ca.pem, certPEM(client), keyPEM(t, client), token)
	t.Cleanup(func() { e.dumpOnFailure(t, ns) })
	e.apply(t, exampleCRD(examplesGroup, "SecureSecretPropagation", "securesecretpropagations", "Cluster"))
	for _, c := range []struct{ name, auth, tokenSecret string }{
		{"webhook-auth-controller", "valid", "webhook-auth-token"},
		{"webhook-auth-controller-wrong-token", "invalid", "webhook-auth-wrong-token"},
	} {
		e.applyf(t, `apiVersion: metacontroller.k8s.io/v1alpha1
kind: CompositeController
metadata: {name: %[1]s}
spec:
  generateSelector: true
  parentResource:
    apiVersion: %[2]s/v1
    resource: securesecretpropagations
    labelSelector: {matchLabels: {auth: %[3]s}}
  childResources:
  - {apiVersion: v1, resource: secrets, updateStrategy: {method: InPlace}}
  endpointConfigs:
  - host: %[4]q
    caBundle: {configMapRef: {name: webhook-auth-ca, namespace: %[5]s, key: ca.crt}}
    authorization: {type: Bearer, secretRef: {name: %[6]s, namespace: %[5]s, key: token}}
    clientTLS: {secretRef: {name: webhook-auth-client, namespace: %[5]s}, certKey: tls.crt, privateKeyKey: tls.key}
  hooks:
    sync:
      webhook: {url: "https://%[4]s/sync"}
    customize:
      webhook: {url: "https://%[4]s/customize"}
`, c.name, examplesGroup, c.auth, host, ns, c.tokenSecret)
	}
	e.apply(t, propagationNamespaces("secure-", "secure-omega", "shareable"))
	e.applyf(t, `apiVersion: v1
kind: Secret
metadata: {name: shareable-invalid, namespace: secure-omega}
data: {some: dmFsdWUK}
---
apiVersion: %[1]s/v1
kind: SecureSecretPropagation
metadata: {name: secure-secret-propagation, labels: {auth: valid}}
spec:
  sourceName: shareable
  sourceNamespace: secure-omega
  targetNamespaceLabelSelector: {matchLabels: {secure-propagate: "true"}}
`, examplesGroup)
	for _, target := range []string{"secure-alpha", "secure-beta"} {
		e.waitField(t, secretsGVR, target, "shareable", "shareable", "metadata", "name")
	}
	ctx := kubetest.Context(t)
	if _, err := e.Kube.CoreV1().Secrets("secure-gamma").Get(ctx, "shareable", metav1.GetOptions{}); !apierrors.IsNotFound(err) {
		t.Errorf("the Secret was propagated to secure-gamma, which has no matching label (get: %v)", err)
	}
	propagations := schema.GroupVersionResource{Group: examplesGroup, Version: "v1", Resource: "securesecretpropagations"}
	e.waitField(t, propagations, "", "secure-secret-propagation", "fine", "status", "working")

	e.applyf(t, `apiVersion: %[1]s/v1
kind: SecureSecretPropagation
metadata: {name: secure-secret-propagation-invalid, labels: {auth: invalid}}
spec:
  sourceName: shareable-invalid
  sourceNamespace: secure-omega
  targetNamespaceLabelSelector: {matchLabels: {secure-propagate: "true"}}
`, examplesGroup)
	kubetest.Eventually(t, 2*time.Minute, "a SyncError is reported for the parent whose controller has a wrong token", func(ctx context.Context) (bool, error) {
		events, err := e.Kube.CoreV1().Events(metav1.NamespaceAll).List(ctx, metav1.ListOptions{FieldSelector: "involvedObject.name=secure-secret-propagation-invalid"})
		if err != nil {
			return false, err
		}
		for _, ev := range events.Items {
			if ev.Reason == "SyncError" {
				return true, nil
			}
		}
		return false, fmt.Errorf("%d events, none a SyncError", len(events.Items))
	})
	if _, err := e.Kube.CoreV1().Secrets("secure-alpha").Get(ctx, "shareable-invalid", metav1.GetOptions{}); !apierrors.IsNotFound(err) {
		t.Errorf("shareable-invalid was propagated despite a wrong bearer token (get: %v)", err)
	}
}

// serveSecretPropagation answers the customize and sync hooks of a Secret
// propagation: the source Secret and the namespaces the parent selects are related
// objects, and each selected namespace gets a copy.
func serveSecretPropagation(w http.ResponseWriter, r *http.Request) {
	var req struct {
		Parent struct {
			Spec struct {
				SourceName, SourceNamespace  string
				TargetNamespaceLabelSelector map[string]any
			}
		}
		Related map[string]map[string]corev1.Secret
	}
	if err := json.NewDecoder(r.Body).Decode(&req); err != nil {
		http.Error(w, err.Error(), http.StatusBadRequest)
		return
	}
	spec := req.Parent.Spec
	var resp map[string]any
	switch r.URL.Path {
	case "/customize":
		resp = map[string]any{"relatedResources": []any{
			map[string]any{"apiVersion": "v1", "resource": "secrets", "namespace": spec.SourceNamespace, "names": []string{spec.SourceName}},
			map[string]any{"apiVersion": "v1", "resource": "namespaces", "labelSelector": spec.TargetNamespaceLabelSelector},
		}}
	case "/sync":
		children := []any{}
		if source, ok := req.Related["Secret.v1"][spec.SourceNamespace+"/"+spec.SourceName]; ok {
			for _, target := range req.Related["Namespace.v1"] {
				if target.Name != spec.SourceNamespace {
					children = append(children, map[string]any{"apiVersion": "v1", "kind": "Secret",
						"metadata": map[string]any{"name": spec.SourceName, "namespace": target.Name}, "data": source.Data})
				}
			}
		}
		resp = map[string]any{"status": map[string]any{"working": "fine"}, "children": children}
	default:
		http.NotFound(w, r)
		return
	}
	w.Header().Set("Content-Type", "application/json")
	_ = json.NewEncoder(w).Encode(resp)
}

// testCA is a private certificate authority for one test.
type testCA struct {
	cert *x509.Certificate
	key  *ecdsa.PrivateKey
	pool *x509.CertPool
	pem  string
}

func newTestCA(t *testing.T) *testCA {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	tmpl := &x509.Certificate{
		SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: "webhook-auth-test-ca"},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(24 * time.Hour),
		IsCA: true, BasicConstraintsValid: true, KeyUsage: x509.KeyUsageCertSign,
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		t.Fatal(err)
	}
	cert, _ := x509.ParseCertificate(der)
	pool := x509.NewCertPool()
	pool.AddCert(cert)
	return &testCA{cert: cert, key: key, pool: pool, pem: string(pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}))}
}

// issue signs a certificate for 127.0.0.1 with the given use.
func (ca *testCA) issue(t *testing.T, name string, use x509.ExtKeyUsage) tls.Certificate {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	serial, _ := rand.Int(rand.Reader, big.NewInt(1<<62))
	tmpl := &x509.Certificate{
		SerialNumber: serial, Subject: pkix.Name{CommonName: name},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(24 * time.Hour),
		KeyUsage: x509.KeyUsageDigitalSignature, ExtKeyUsage: []x509.ExtKeyUsage{use},
		IPAddresses: []net.IP{net.ParseIP("127.0.0.1")},
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, ca.cert, &key.PublicKey, ca.key)
	if err != nil {
		t.Fatal(err)
	}
	return tls.Certificate{Certificate: [][]byte{der}, PrivateKey: key}
}

func certPEM(c tls.Certificate) string {
	return string(pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: c.Certificate[0]}))
}

func keyPEM(t *testing.T, c tls.Certificate) string {
	der, err := x509.MarshalECPrivateKey(c.PrivateKey.(*ecdsa.PrivateKey))
	if err != nil {
		t.Fatal(err)
	}
	return string(pem.EncodeToMemory(&pem.Block{Type: "EC PRIVATE KEY", Bytes: der}))
}
