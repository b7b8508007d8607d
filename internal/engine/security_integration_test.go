//go:build integration

package engine

import (
	"crypto/tls"
	"encoding/pem"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
)

// A hook behind TLS with a private CA and a bearer token: the engine reads the CA
// from a ConfigMap and the token from a Secret. While the Secret is missing the
// controller does not start and says which Secret it waits for; once it exists, the
// controller starts and its calls carry the token.
func TestWebhookCABundleAndAuthorization(t *testing.T) {
	setup(t)
	ns := env.Namespace(t)
	startEngine(t, ns)
	var refused atomic.Int64
	hook := &hookServer{respond: echoChildren("secure")} // served below, over TLS, behind a token check
	srv := httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Header.Get("Authorization") != "Bearer s3cret" {
			refused.Add(1)
			http.Error(w, "bad token", http.StatusUnauthorized)
			return
		}
		hook.serve(w, r)
	}))
	srv.TLS = &tls.Config{MinVersion: tls.VersionTLS12}
	srv.StartTLS()
	t.Cleanup(srv.Close)
	caPEM := pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: srv.Certificate().Raw})

	cm := &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": "v1", "kind": "ConfigMap", "metadata": map[string]any{"name": "hook-ca"},
		"data": map[string]any{"ca.crt": string(caPEM)},
	}}
	if _, err := env.Dynamic.Resource(configMapsGVR).Namespace(ns).Create(t.Context(), cm, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	create(t, ccGVR, "", `
apiVersion: metacontroller.k8s.io/v1alpha1
kind: CompositeController
metadata: {name: %[1]s, labels: {metalambda.dev/test-engine: %[1]s}}
spec:
  generateSelector: true
  parentResource: {apiVersion: test.metalambda.dev/v1, resource: parents, labelSelector: {matchLabels: {metalambda.dev/test-engine: %[1]s}}}
  childResources:
  - {apiVersion: v1, resource: configmaps}
  - {apiVersion: v1, resource: services}
  hooks:
    sync:
      webhook:
        url: "%[2]s/sync"
        caBundle: {configMapRef: {name: hook-ca, namespace: %[1]s}}
        authorization: {secretRef: {name: hook-token, namespace: %[1]s, key: token}}
`, ns, srv.URL)
	cc := env.WaitFor(t, "the controller waits for its Secret", ccGVR, "", ns, func(o *unstructured.Unstructured) error {
		return expectCondition(o, ConditionReady, "False", "HookCredentialsUnavailable")
	})
	if msg := conditionMessage(cc, ConditionReady); !strings.Contains(msg, "Secret "+ns+"/hook-token") {
		t.Errorf("Ready message %q does not name the Secret", msg)
	}

	create(t, secretsGVR, ns, "{apiVersion: v1, kind: Secret, metadata: {name: hook-token}, stringData: {token: \"s3cret\\n\"}}")
	env.WaitFor(t, "the controller starts once the Secret exists", ccGVR, "", ns, func(o *unstructured.Unstructured) error {
		return expectCondition(o, ConditionReady, "True", "Running")
	})
	create(t, parentsGVR, ns, parentManifest, "p", 1)
	env.WaitFor(t, "the hook, reached over TLS with the token, creates the children", configMapsGVR, ns, "p-0", nil)
	if n := refused.Load(); n != 0 {
		t.Errorf("the hook refused %d calls without the token", n)
	}
}
