//go:build integration

package gateway

import (
	"bytes"
	"context"
	"encoding/json"
	"encoding/pem"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"net/http/httputil"
	"net/url"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/getkin/kin-openapi/openapi3"
	"github.com/getkin/kin-openapi/openapi3filter"
	"github.com/getkin/kin-openapi/routers"
	"github.com/getkin/kin-openapi/routers/legacy"
	"github.com/google/go-cmp/cmp"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/util/retry"

	"github.com/metalambda/metalambda/internal/kubetest"
)

// checker sends requests to a gateway and validates each request and response against
// the gateway's own /openapi.json.
type checker struct {
	g      *testGateway
	router routers.Router
	checks int
}

func newChecker(t *testing.T, g *testGateway) *checker {
	t.Helper()
	served := g.do(t, "GET", "/openapi.json", "", nil)
	doc, err := openapi3.NewLoader().LoadFromData([]byte(served.raw))
	if err != nil {
		t.Fatal(err)
	}
	router, err := legacy.NewRouter(doc)
	if err != nil {
		t.Fatal(err)
	}
	return &checker{g: g, router: router}
}

// do sends a request and checks the exchange: the request only when validRequest (bad
// input is sent on purpose too), the response always.
func (c *checker) do(t *testing.T, method, path, token string, body any, header http.Header, validRequest bool) reply {
	t.Helper()
	var data []byte
	switch b := body.(type) {
	case nil:
	case string:
		data = []byte(b)
	default:
		data, _ = json.Marshal(b)
	}
	req, _ := http.NewRequest(method, c.g.url+path, bytes.NewReader(data))
	for k, v := range header {
		req.Header[k] = v
	}
	if token != "" {
		req.Header.Set("Authorization", "Bearer "+token)
	}
	if data != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	respBody, _ := io.ReadAll(resp.Body)
	out := reply{status: resp.StatusCode, raw: string(respBody)}
	_ = json.Unmarshal(respBody, &out.body)

	route, params, err := c.router.FindRoute(req)
	if err != nil {
		t.Errorf("%s %s: not in /openapi.json: %v", method, path, err)
		return out
	}
	req.Body = io.NopCloser(bytes.NewReader(data))
	in := &openapi3filter.RequestValidationInput{Request: req, PathParams: params, Route: route,
		Options: &openapi3filter.Options{AuthenticationFunc: openapi3filter.NoopAuthenticationFunc, IncludeResponseStatus: true, MultiError: true}}
	if validRequest {
		if err := openapi3filter.ValidateRequest(context.Background(), in); err != nil {
			t.Errorf("%s %s: the request does not match /openapi.json: %v", method, path, err)
		}
	}
	check := &openapi3filter.ResponseValidationInput{RequestValidationInput: in, Status: resp.StatusCode, Header: resp.Header, Options: in.Options}
	check.SetBodyBytes(respBody)
	if err := openapi3filter.ValidateResponse(context.Background(), check); err != nil {
		t.Errorf("%s %s: the response %d %.300s does not match /openapi.json: %v", method, path, resp.StatusCode, respBody, err)
	}
	c.checks++
	return out
}

const secretJS = `function sync(request) {
  return {children: [{apiVersion: "v1", kind: "Secret", metadata: {name: request.parent.metadata.name}, stringData: {password: request.parent.stringData.password}}]};
}`

// TestAPIMatchesItsOpenAPI drives every route of the API, with good and bad input,
// and checks each real request and response against the served document. It also
// checks what the API promises: PUT's 201 and 200, labels and annotations kept, the
// flat body form, Kubernetes' errors kept, and the invocation history redacted or off.
func TestAPIMatchesItsOpenAPI(t *testing.T) {
	g := startGateway(t)
	c := newChecker(t, g)
	ns := env.Namespace(t)
	base := "/v1/namespaces/" + ns + "/functions"
	tok := g.token
	expect := func(r reply, status int, code string) {
		t.Helper()
		if r.status != status || (code != "" && r.body["error"] != code) {
			t.Errorf("got %d %.300s, want %d %s", r.status, r.raw, status, code)
		}
	}
	for _, path := range []string{"/healthz", "/readyz", "/openapi.json"} {
		expect(c.do(t, "GET", path, "", nil, nil, true), 200, "")
	}
	expect(c.do(t, "GET", "/metrics", tok, nil, nil, true), 200, "")
	expect(c.do(t, "GET", "/metrics", "", nil, nil, true), 401, "unauthorized")

	// Create in both body forms; PUT creates (201) and replaces (200).
	echo := map[string]any{"metadata": map[string]any{"name": "echo", "labels": map[string]any{"team": "a"}, "annotations": map[string]any{"note": "x"}},
		"spec": map[string]any{"runtime": "javascript", "source": fmt.Sprintf(echoJS, "v1")}}
	expect(c.do(t, "POST", base, tok, echo, nil, true), 201, "")
	expect(c.do(t, "POST", base, tok, map[string]any{"name": "echo", "runtime": "javascript", "source": fmt.Sprintf(echoJS, "v1")}, nil, true), 409, "already_exists")
	expect(c.do(t, "PUT", base+"/made-by-put", tok, map[string]any{"runtime": "jsonnet", "source": "function(request) {}"}, nil, true), 201, "")
	expect(c.do(t, "PUT", base+"/echo", tok, map[string]any{"runtime": "javascript", "source": fmt.Sprintf(echoJS, "v2")}, nil, true), 200, "")
	if got := function(t, ns, "echo"); !cmp.Equal(got.Labels, map[string]string{"team": "a"}) || !cmp.Equal(got.Annotations, map[string]string{"note": "x"}) {
		t.Errorf("a flat PUT lost labels or annotations: %v %v", got.Labels, got.Annotations)
	}
	echo["metadata"] = map[string]any{"labels": map[string]any{"team": "b"}, "annotations": map[string]any{"note": "y", "more": "z"}}
	expect(c.do(t, "PUT", base+"/echo", tok, echo, nil, true), 200, "")
	if got := function(t, ns, "echo"); !cmp.Equal(got.Labels, map[string]string{"team": "b"}) || !cmp.Equal(got.Annotations, map[string]string{"note": "y", "more": "z"}) {
		t.Errorf("PUT did not write labels and annotations: %v %v", got.Labels, got.Annotations)
	}
	expect(c.do(t, "GET", base+"/echo", tok, nil, nil, true), 200, "")
	expect(c.do(t, "GET", base, tok, nil, nil, true), 200, "")

	// Errors: Kubernetes' own keep their status and message; the gateway's have theirs.
	badLabel := map[string]any{"metadata": map[string]any{"name": "bad-label", "labels": map[string]any{"not a label!": "x"}},
		"spec": map[string]any{"runtime": "javascript", "source": "function sync(r) { return {} }"}}
	r := c.do(t, "POST", base, tok, badLabel, nil, true)
	expect(r, 422, "invalid")
	if msg, _ := r.body["message"].(string); !strings.Contains(msg, "metadata.labels") {
		t.Errorf("the Kubernetes message is lost: %q", msg)
	}
	expect(c.do(t, "POST", base, tok, map[string]any{"name": "bad", "runtime": "javascript", "source": "function sync( {"}, nil, true), 422, "compile_error")
	expect(c.do(t, "POST", base, tok, "{nope", nil, false), 400, "bad_request")
	expect(c.do(t, "POST", base, tok, map[string]any{"name": "f", "runtime": "cobol", "source": "x"}, nil, false), 422, "invalid_runtime")
	expect(c.do(t, "GET", base+"/missing", tok, nil, nil, true), 404, "not_found")
	expect(c.do(t, "GET", base, "", nil, nil, true), 401, "")
	expect(c.do(t, "POST", base+"/missing/invoke", tok, map[string]any{}, nil, true), 404, "not_found")

	// Calls, and what the history keeps of them.
	expect(c.do(t, "POST", base, tok, map[string]any{"name": "secrets", "runtime": "javascript", "source": secretJS}, nil, true), 201, "")
	expect(c.do(t, "POST", base, tok, map[string]any{"name": "quiet", "runtime": "javascript", "source": fmt.Sprintf(echoJS, "q"), "history": map[string]any{"enabled": false}}, nil, true), 201, "")
	parent := map[string]any{"parent": map[string]any{"apiVersion": "v1", "kind": "Secret", "metadata": map[string]any{"name": "p"}, "stringData": map[string]any{"password": "hunter2"}}}
	kubetest.Eventually(t, 30*time.Second, "the functions are loaded", func(context.Context) (bool, error) {
		a := c.do(t, "POST", "/hooks/"+ns+"/secrets", "", parent, http.Header{"Authorization": {"Bearer hook-secret"}}, true)
		b := c.do(t, "POST", "/hooks/"+ns+"/quiet", "", hookRequest("p"), nil, true)
		return a.status == 200 && b.status == 200, fmt.Errorf("%d %s / %d %s", a.status, a.raw, b.status, b.raw)
	})
	expect(c.do(t, "POST", base+"/secrets/invoke", tok, parent, nil, true), 200, "")
	expect(c.do(t, "POST", "/hooks/"+ns+"/secrets", "", "{nope", nil, false), 400, "bad_request")
	hist := c.do(t, "GET", base+"/secrets/invocations", tok, nil, nil, true)
	if items, _ := hist.body["items"].([]any); len(items) < 2 || hist.body["enabled"] != true {
		t.Errorf("invocations of secrets = %.500s", hist.raw)
	}
	for _, leaked := range []string{"hunter2", "hook-secret"} {
		if strings.Contains(hist.raw, leaked) {
			t.Errorf("the history shows %q: %.1000s", leaked, hist.raw)
		}
	}
	if !strings.Contains(hist.raw, redacted) {
		t.Errorf("the history shows no redaction: %.1000s", hist.raw)
	}
	quiet := c.do(t, "GET", base+"/quiet/invocations", tok, nil, nil, true)
	if items, _ := quiet.body["items"].([]any); len(items) != 0 || quiet.body["enabled"] != false {
		t.Errorf("a Function with history off shows %.500s", quiet.raw)
	}

	// Rollout controls: refused without a policy, an unknown action, no such function
	// (a 200 is TestRolloutControls').
	expect(c.do(t, "POST", base+"/echo/rollout/pause", tok, nil, nil, true), 409, "no_rollout_policy")
	expect(c.do(t, "POST", base+"/echo/rollout/restart", tok, nil, nil, false), 400, "unknown_action")
	expect(c.do(t, "POST", base+"/missing/rollout/abort", tok, nil, nil, true), 404, "not_found")

	// Delete: 204, then 404.
	expect(c.do(t, "DELETE", base+"/echo", tok, nil, nil, true), 204, "")
	expect(c.do(t, "DELETE", base+"/echo", tok, nil, nil, true), 404, "not_found")
	t.Logf("%d exchanges checked against /openapi.json", c.checks)
}

type functionMeta struct{ Labels, Annotations map[string]string }

func function(t *testing.T, ns, name string) functionMeta {
	t.Helper()
	u, err := env.Dynamic.Resource(FunctionsGVR).Namespace(ns).Get(kubetest.Context(t), name, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	return functionMeta{Labels: u.GetLabels(), Annotations: u.GetAnnotations()}
}

// A PUT carries no resourceVersion, so it replaces whatever is stored: a write by
// someone else between the gateway's read and its update (the gateway's own status
// write after a load, the rollout driver, kubectl) is no error for the caller. The
// gateway here reaches the API server through a proxy that writes the Function
// itself just before passing on each of the gateway's first three updates of it,
// so each of those conflicts in the API server.
func TestPutReplacesWhileOthersWrite(t *testing.T) {
	const raced = 3
	ctx := kubetest.Context(t)
	ns := env.Namespace(t)
	functions := env.Dynamic.Resource(FunctionsGVR).Namespace(ns)
	var mu sync.Mutex
	updates, wroteBefore := 0, 0
	cfg := proxiedConfig(t, func(req *http.Request) {
		if req.Method != http.MethodPut || !strings.HasSuffix(req.URL.Path, "/namespaces/"+ns+"/functions/raced") {
			return
		}
		mu.Lock()
		defer mu.Unlock()
		updates++
		if updates > raced {
			return
		}
		// The gateway's own status write may race this writer too.
		err := retry.RetryOnConflict(retry.DefaultRetry, func() error {
			u, err := functions.Get(req.Context(), "raced", metav1.GetOptions{})
			if err != nil {
				return err
			}
			u.SetAnnotations(map[string]string{"racer": fmt.Sprint(updates)})
			_, err = functions.Update(req.Context(), u, metav1.UpdateOptions{})
			return err
		})
		if err != nil {
			t.Errorf("the other writer: %v", err)
			return
		}
		wroteBefore++
	})
	g := startGatewayWith(t, cfg)
	base := "/v1/namespaces/" + ns + "/functions/raced"
	source := func(v string) string { return fmt.Sprintf(echoJS, v) }
	if r := g.do(t, "PUT", base, g.token, map[string]any{"runtime": "javascript", "source": source("v1")}); r.status != http.StatusCreated {
		t.Fatalf("PUT to create: %d %.300s", r.status, r.raw)
	}
	r := g.do(t, "PUT", base, g.token, map[string]any{"runtime": "javascript", "source": source("v2")})
	if r.status != http.StatusOK {
		t.Errorf("PUT while another writer writes: %d %.300s", r.status, r.raw)
	}
	mu.Lock()
	t.Logf("the gateway's updates: %d, the first %d each after another write", updates, wroteBefore)
	// The gateway's own status write may add a conflict of its own.
	if wroteBefore != raced || updates < raced+1 {
		t.Errorf("%d updates, %d after another write; want at least %d, and %d", updates, wroteBefore, raced+1, raced)
	}
	mu.Unlock()
	u, err := functions.Get(ctx, "raced", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if src, _, _ := unstructured.NestedString(u.Object, "spec", "source"); src != source("v2") {
		t.Errorf("the stored source is not the PUT's: %.200s", src)
	}
	if got := u.GetAnnotations()["racer"]; got != fmt.Sprint(raced) {
		t.Errorf("the other writer's last annotation is %q, want %d: the PUT wrote over it", got, raced)
	}
}

// proxiedConfig is the test's client configuration with the API server behind a
// TLS proxy that calls before on each request before passing it on, headers and all.
func proxiedConfig(t *testing.T, before func(*http.Request)) *rest.Config {
	t.Helper()
	target, err := url.Parse(env.Config.Host)
	if err != nil {
		t.Fatal(err)
	}
	upstream, err := rest.TransportFor(rest.AnonymousClientConfig(env.Config))
	if err != nil {
		t.Fatal(err)
	}
	proxy := httputil.NewSingleHostReverseProxy(target)
	proxy.Transport = upstream
	srv := httptest.NewTLSServer(http.HandlerFunc(func(w http.ResponseWriter, req *http.Request) {
		before(req)
		proxy.ServeHTTP(w, req)
	}))
	t.Cleanup(srv.Close)
	cfg := rest.CopyConfig(env.Config)
	cfg.Host = srv.URL
	cfg.TLSClientConfig = rest.TLSClientConfig{CAData: pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: srv.Certificate().Raw})}
	return cfg
}
