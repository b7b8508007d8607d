//go:build integration

package gateway

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	"github.com/metalambda/metalambda/internal/gateway/lambda"
	"github.com/metalambda/metalambda/internal/kubetest"
	"github.com/metalambda/metalambda/internal/local/cluster"
)

var env *kubetest.Env

func TestMain(m *testing.M) {
	lambda.ServeWorker() // the gateways' sandboxes start this binary as their launcher and workers
	kubetest.Main(m, &env, cluster.Defaults())
}

type testGateway struct {
	gw    *Gateway
	url   string
	token string // the admin token
	reg   *prometheus.Registry
}

// startGateway runs a gateway for one test on an httptest server, as the admin.
func startGateway(t *testing.T, tweak ...func(*Options)) *testGateway {
	t.Helper()
	return startGatewayWith(t, env.Config, tweak...)
}

type reply struct {
	status int
	body   map[string]any
	raw    string
}

func (g *testGateway) do(t *testing.T, method, path, token string, body any) reply {
	t.Helper()
	var r io.Reader
	switch b := body.(type) {
	case nil:
	case string:
		r = strings.NewReader(b)
	default:
		data, _ := json.Marshal(b)
		r = bytes.NewReader(data)
	}
	req, _ := http.NewRequest(method, g.url+path, r)
	if token != "" {
		req.Header.Set("Authorization", "Bearer "+token)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	data, _ := io.ReadAll(resp.Body)
	out := reply{status: resp.StatusCode, raw: string(data)}
	_ = json.Unmarshal(data, &out.body)
	return out
}

const echoJS = `function sync(request) {
  console.log("syncing", request.parent.metadata.name);
  return {children: [{apiVersion: "v1", kind: "ConfigMap", metadata: {name: request.parent.metadata.name + "-%s"}, data: {from: "js"}}]};
}`

func hookRequest(name string) map[string]any {
	return map[string]any{"parent": map[string]any{"metadata": map[string]any{"name": name}}, "children": map[string]any{}}
}

// childName returns the name of the first child in a hook response.
func childName(r reply) string {
	children, _ := r.body["children"].([]any)
	if len(children) == 0 {
		return ""
	}
	name, _ := children[0].(map[string]any)["metadata"].(map[string]any)["name"].(string)
	return name
}

func (g *testGateway) waitHook(t *testing.T, ns, name, wantChild string) reply {
	t.Helper()
	var last reply
	kubetest.Eventually(t, 30*time.Second, "the hook answers with child "+wantChild, func(context.Context) (bool, error) {
		last = g.do(t, "POST", "/hooks/"+ns+"/"+name, "", hookRequest("p"))
		return last.status == 200 && childName(last) == wantChild, fmt.Errorf("%d %s", last.status, last.raw)
	})
	return last
}

func TestRegisterCallUpdateDelete(t *testing.T) {
	g := startGateway(t)
	ns := env.Namespace(t)
	base := "/v1/namespaces/" + ns + "/functions"
	created := g.do(t, "POST", base, g.token, map[string]any{"metadata": map[string]any{"name": "echo"}, "spec": map[string]any{"runtime": "javascript", "source": fmt.Sprintf(echoJS, "v1")}})
	if created.status != http.StatusCreated {
		t.Fatalf("create = %d %s", created.status, created.raw)
	}
	if again := g.do(t, "POST", base, g.token, map[string]any{"name": "echo", "runtime": "javascript", "source": fmt.Sprintf(echoJS, "v1")}); again.status != http.StatusConflict || again.body["error"] != "already_exists" {
		t.Errorf("second create = %d %s, want 409 already_exists", again.status, again.raw)
	}
	g.waitHook(t, ns, "echo", "p-v1")
	fn := waitFunction(t, ns, "echo", func(o *unstructured.Unstructured) error {
		return readyIs(o, "True", "Compiled")
	})
	if url, _, _ := unstructured.NestedString(fn.Object, "status", "url"); url != g.url+"/hooks/"+ns+"/echo" {
		t.Errorf("status.url = %q", url)
	}
	if hash, _, _ := unstructured.NestedString(fn.Object, "status", "sourceHash"); len(hash) != 64 {
		t.Errorf("status.sourceHash = %q", hash)
	}

	// PUT replaces the source, and the hook follows.
	put := g.do(t, "PUT", base+"/echo", g.token, map[string]any{"runtime": "javascript", "source": fmt.Sprintf(echoJS, "v2")})
	if put.status != http.StatusOK {
		t.Fatalf("put = %d %s", put.status, put.raw)
	}
	g.waitHook(t, ns, "echo", "p-v2")

	// A test call shows the response and the logs; calls are recorded.
	inv := g.do(t, "POST", base+"/echo/invoke", g.token, hookRequest("q"))
	if inv.status != 200 || !strings.Contains(inv.body["logs"].(string), "syncing q") {
		t.Fatalf("invoke = %d %s", inv.status, inv.raw)
	}
	history := g.do(t, "GET", base+"/echo/invocations", g.token, nil)
	if items, _ := history.body["items"].([]any); len(items) < 2 {
		t.Fatalf("invocations = %s", history.raw)
	}
	if list := g.do(t, "GET", base, g.token, nil); len(list.body["items"].([]any)) != 1 {
		t.Errorf("list = %s", list.raw)
	}

	series := `gateway_function_invocation_total{code="200",function_name="echo.` + ns + `"}`
	if metrics := g.do(t, "GET", "/metrics", g.token, nil); !strings.Contains(metrics.raw, series) {
		t.Errorf("metrics lack the invocation counter")
	}
	if del := g.do(t, "DELETE", base+"/echo", g.token, nil); del.status != http.StatusNoContent {
		t.Fatalf("delete = %d %s", del.status, del.raw)
	}
	kubetest.Eventually(t, 30*time.Second, "the deleted function's hook answers 404", func(context.Context) (bool, error) {
		r := g.do(t, "POST", "/hooks/"+ns+"/echo", "", hookRequest("p"))
		return r.status == 404, fmt.Errorf("%d %s", r.status, r.raw)
	})
	kubetest.Eventually(t, 30*time.Second, "the deleted function's series are gone", func(context.Context) (bool, error) {
		metrics := g.do(t, "GET", "/metrics", g.token, nil)
		return !strings.Contains(metrics.raw, `function_name="echo.`+ns+`"`), nil
	})
}

// TestKubectlIsAnEqualDoor registers functions by creating Function objects directly.
func TestKubectlIsAnEqualDoor(t *testing.T) {
	g := startGateway(t)
	ns := env.Namespace(t)
	for _, tt := range []struct{ name, runtime, source, want string }{
		{"py", "python", "def sync(request):\n    print('hello from python')\n    return {'children': [{'apiVersion': 'v1', 'kind': 'ConfigMap', 'metadata': {'name': request['parent']['metadata']['name'] + '-py'}}]}\n", "p-py"},
		{"jn", "jsonnet", "function(request) { children: [{apiVersion: 'v1', kind: 'ConfigMap', metadata: {name: request.parent.metadata.name + '-jn'}}] }", "p-jn"},
		{"fission", "javascript", "module.exports = async function(context) { const req = context.request.body; return {status: 200, body: {children: [{apiVersion: 'v1', kind: 'ConfigMap', metadata: {name: req.parent.metadata.name + '-fission'}}]}}; }", "p-fission"},
	} {
		createFunction(t, ns, tt.name, tt.runtime, tt.source, 0)
		g.waitHook(t, ns, tt.name, tt.want)
	}
	got := g.do(t, "GET", "/v1/namespaces/"+ns+"/functions/py", g.token, nil)
	if got.status != 200 {
		t.Fatalf("GET a kubectl-made function = %d %s", got.status, got.raw)
	}
}

func TestCompileErrorsAreRefusedWithPosition(t *testing.T) {
	g := startGateway(t)
	ns := env.Namespace(t)
	base := "/v1/namespaces/" + ns + "/functions"
	for _, tt := range []struct{ runtime, source string }{
		{"javascript", "function sync(request) {\n  return {;\n}"},
		{"python", "def sync(request):\n    return {\n"},
		{"jsonnet", "function(request) {\n  children: [\n}"},
	} {
		r := g.do(t, "POST", base, g.token, map[string]any{"name": "bad-" + tt.runtime, "runtime": tt.runtime, "source": tt.source})
		if r.status != http.StatusUnprocessableEntity || r.body["error"] != "compile_error" || r.body["line"] == nil || r.body["line"].(float64) < 1 {
			t.Errorf("%s: create = %d %s, want 422 compile_error with a line", tt.runtime, r.status, r.raw)
		}
		if got := g.do(t, "GET", base+"/bad-"+tt.runtime, g.token, nil); got.status != http.StatusNotFound {
			t.Errorf("%s: a function that does not compile was stored (%d)", tt.runtime, got.status)
		}
	}
	// Through kubectl nothing refuses it; the status says why it is not served.
	createFunction(t, ns, "broken", "javascript", "function sync( {", 0)
	fn := waitFunction(t, ns, "broken", func(o *unstructured.Unstructured) error { return readyIs(o, "False", "CompileError") })
	if msg := readyMessage(fn); !strings.Contains(msg, "line 1") {
		t.Errorf("Ready message %q lacks the position", msg)
	}
	if r := g.do(t, "POST", "/hooks/"+ns+"/broken", "", hookRequest("p")); r.status != http.StatusServiceUnavailable {
		t.Errorf("hook of a broken function = %d %s, want 503", r.status, r.raw)
	}
}

func TestValidation(t *testing.T) {
	g := startGateway(t)
	ns := env.Namespace(t)
	base := "/v1/namespaces/" + ns + "/functions"
	ok := map[string]any{"runtime": "javascript", "source": "function sync(r) { return {} }"}
	with := func(k string, v any) map[string]any {
		m := map[string]any{"name": "f"}
		for key, val := range ok {
			m[key] = val
		}
		m[k] = v
		return m
	}
	for _, tt := range []struct {
		name   string
		body   any
		status int
		code   string
	}{
		{"bad name", with("name", "Not_A_Name"), 422, "invalid_name"},
		{"unknown runtime", with("runtime", "cobol"), 422, "invalid_runtime"},
		{"source too large", with("source", strings.Repeat("x", 300<<10)), 413, "source_too_large"},
		{"body too large", with("source", strings.Repeat("x", 2<<20)), 413, "body_too_large"},
		{"not json", "{nope", 400, "bad_request"},
		{"timeout", with("timeoutSeconds", 1000), 422, "invalid_timeout"},
	} {
		r := g.do(t, "POST", base, g.token, tt.body)
		if r.status != tt.status || r.body["error"] != tt.code || r.body["message"] == "" {
			t.Errorf("%s: %d %.200s, want %d %s", tt.name, r.status, r.raw, tt.status, tt.code)
		}
	}
	if r := g.do(t, "GET", "/nowhere", "", nil); r.status != 404 || r.body["error"] != "not_found" {
		t.Errorf("unknown route = %d %s", r.status, r.raw)
	}
}

// TestTimeoutsAndIsolation: runaway functions end at their timeout, alone.
func TestTimeoutsAndIsolation(t *testing.T) {
	g := startGateway(t)
	ns := env.Namespace(t)
	createFunction(t, ns, "healthy", "javascript", fmt.Sprintf(echoJS, "ok"), 0)
	createFunction(t, ns, "js-loop", "javascript", "function sync(r) { while (true) {} }", 1)
	createFunction(t, ns, "py-loop", "python", "def sync(r):\n    while True:\n        pass\n", 1)
	createFunction(t, ns, "jn-slow", "jsonnet", "function(request) { n: std.foldl(function(a, b) a + b, std.range(1, 100000000), 0) }", 1)
	createFunction(t, ns, "py-hog", "python", "def sync(r):\n    x = bytearray(4 * 1024 ** 3)\n    return {}\n", 5)
	createFunction(t, ns, "js-hog", "javascript", `function sync(r) { return {n: "x".repeat(1 << 30).length}; }`, 5)
	g.waitHook(t, ns, "healthy", "p-ok")
	for _, name := range []string{"js-loop", "py-loop", "jn-slow", "py-hog", "js-hog"} {
		var r reply
		kubetest.Eventually(t, 30*time.Second, name+" is loaded", func(context.Context) (bool, error) {
			r = g.do(t, "POST", "/hooks/"+ns+"/"+name, "", hookRequest("p"))
			return r.status != http.StatusServiceUnavailable, fmt.Errorf("%d %s", r.status, r.raw)
		})
		want := "timeout"
		switch name {
		case "py-hog":
			want = "MemoryError"
		case "js-hog":
			want = "out of memory"
		}
		if r.status != 500 || r.body["error"] != "function_failed" || !strings.Contains(r.raw, want) || !strings.Contains(r.raw, ns+"/"+name) {
			t.Errorf("%s: %d %s, want 500 naming the function and %q", name, r.status, r.raw, want)
		}
		g.waitHook(t, ns, "healthy", "p-ok")
	}
}

func TestManagementAPIRequiresRBAC(t *testing.T) {
	g := startGateway(t)
	ns := env.Namespace(t)
	ctx := kubetest.Context(t)
	for _, sa := range []string{"dev", "nobody"} {
		if _, err := env.Kube.CoreV1().ServiceAccounts(ns).Create(ctx, &corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Name: sa}}, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	role := &rbacv1.Role{ObjectMeta: metav1.ObjectMeta{Name: "functions"}, Rules: []rbacv1.PolicyRule{{APIGroups: []string{"metalambda.dev"}, Resources: []string{"functions"}, Verbs: []string{"*"}}}}
	if _, err := env.Kube.RbacV1().Roles(ns).Create(ctx, role, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	binding := &rbacv1.RoleBinding{ObjectMeta: metav1.ObjectMeta{Name: "dev"}, RoleRef: rbacv1.RoleRef{APIGroup: "rbac.authorization.k8s.io", Kind: "Role", Name: "functions"},
		Subjects: []rbacv1.Subject{{Kind: "ServiceAccount", Name: "dev", Namespace: ns}}}
	if _, err := env.Kube.RbacV1().RoleBindings(ns).Create(ctx, binding, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	token := func(sa string) string { return env.Token(t, ns, sa) }
	base := "/v1/namespaces/" + ns + "/functions"
	body := map[string]any{"name": "f", "runtime": "javascript", "source": "function sync(r) { return {} }"}
	for _, tt := range []struct {
		name, token string
		status      int
	}{
		{"no token", "", 401},
		{"garbage", "not-a-token", 401},
		{"no RBAC", token("nobody"), 403},
		{"RBAC allows", token("dev"), 201},
	} {
		if r := g.do(t, "POST", base, tt.token, body); r.status != tt.status {
			t.Errorf("%s: %d %s, want %d", tt.name, r.status, r.raw, tt.status)
		}
	}
	if r := g.do(t, "GET", "/v1/namespaces/kube-system/functions", token("dev"), nil); r.status != 403 {
		t.Errorf("dev listing another namespace = %d, want 403", r.status)
	}
}

func createFunction(t *testing.T, ns, name, runtime, source string, timeout int64) {
	t.Helper()
	spec := map[string]any{"runtime": runtime, "source": source}
	if timeout > 0 {
		spec["timeoutSeconds"] = timeout
	}
	obj := &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": "metalambda.dev/v1alpha1", "kind": "Function",
		"metadata": map[string]any{"name": name}, "spec": spec,
	}}
	env.Create(t, FunctionsGVR, ns, obj)
}

func waitFunction(t *testing.T, ns, name string, check func(*unstructured.Unstructured) error) *unstructured.Unstructured {
	t.Helper()
	return env.WaitFor(t, "Function "+name+" reports its state", FunctionsGVR, ns, name, check)
}

func readyIs(o *unstructured.Unstructured, status, reason string) error {
	conds, _, _ := unstructured.NestedSlice(o.Object, "status", "conditions")
	for _, c := range conds {
		m := c.(map[string]any)
		if m["type"] == "Ready" && m["status"] == status && m["reason"] == reason {
			return nil
		}
	}
	return fmt.Errorf("status = %v", o.Object["status"])
}

func readyMessage(o *unstructured.Unstructured) string {
	conds, _, _ := unstructured.NestedSlice(o.Object, "status", "conditions")
	for _, c := range conds {
		if m := c.(map[string]any); m["type"] == "Ready" {
			return fmt.Sprint(m["message"])
		}
	}
	return ""
}

// TestSeparateHooksAddress serves hooks on their own listener (the gateway's
// --hooks-listen, for a network policy that lets only engines reach them): hooks
// answer there and nowhere else, and the API is not served there.
func TestSeparateHooksAddress(t *testing.T) {
	g := startGateway(t, func(o *Options) { o.SeparateHooks = true })
	hooksSrv := httptest.NewServer(g.gw.HooksHandler())
	t.Cleanup(hooksSrv.Close)
	hooks := &testGateway{gw: g.gw, url: hooksSrv.URL, token: g.token}
	ns := env.Namespace(t)
	base := "/v1/namespaces/" + ns + "/functions"
	if r := g.do(t, "POST", base, g.token, map[string]any{"metadata": map[string]any{"name": "echo"}, "spec": map[string]any{"runtime": "javascript", "source": fmt.Sprintf(echoJS, "v1")}}); r.status != http.StatusCreated {
		t.Fatalf("create = %d %s", r.status, r.raw)
	}
	hooks.waitHook(t, ns, "echo", "p-v1")
	if r := g.do(t, "POST", "/hooks/"+ns+"/echo", "", hookRequest("p")); r.status != http.StatusNotFound || !strings.Contains(r.raw, "--hooks-listen") {
		t.Errorf("a hook call on the API address = %d %s, want 404 naming --hooks-listen", r.status, r.raw)
	}
	if r := hooks.do(t, "GET", base, g.token, nil); r.status != http.StatusNotFound {
		t.Errorf("the API on the hooks address = %d %s, want 404", r.status, r.raw)
	}
	if r := hooks.do(t, "GET", "/healthz", "", nil); r.status != http.StatusOK {
		t.Errorf("/healthz on the hooks address = %d %s", r.status, r.raw)
	}
}

// TestConcurrencyCapAnswers429: with one call of a function allowed at a time, a
// second call while the first runs is refused at once with 429 and Retry-After
// (which the engine honours), another function still answers, and the slot comes
// back when the first call ends.
func TestConcurrencyCapAnswers429(t *testing.T) {
	g := startGateway(t, func(o *Options) { o.MaxConcurrentCalls = 1 })
	ns := env.Namespace(t)
	createFunction(t, ns, "healthy", "javascript", fmt.Sprintf(echoJS, "ok"), 0)
	createFunction(t, ns, "slow", "python", "import time\n\ndef sync(r):\n    time.sleep(2)\n    return {}\n", 10)
	g.waitHook(t, ns, "healthy", "p-ok")
	kubetest.Eventually(t, 30*time.Second, "the slow function is loaded", func(context.Context) (bool, error) {
		r := g.do(t, "POST", "/hooks/"+ns+"/slow", "", hookRequest("p"))
		return r.status == http.StatusOK, fmt.Errorf("%d %s", r.status, r.raw)
	})

	// Three calls at once: whichever takes the only slot runs for 2 s, and the
	// others are refused while it does.
	type answer struct {
		status     int
		retryAfter string
	}
	answers := make(chan answer, 3)
	for i := range 3 {
		go func() {
			body := fmt.Sprintf(`{"parent":{"metadata":{"name":"call-%d"}},"children":{}}`, i)
			resp, err := http.Post(g.url+"/hooks/"+ns+"/slow", "application/json", strings.NewReader(body))
			if err != nil {
				answers <- answer{status: -1, retryAfter: err.Error()}
				return
			}
			resp.Body.Close()
			answers <- answer{resp.StatusCode, resp.Header.Get("Retry-After")}
		}()
	}
	if r := g.do(t, "POST", "/hooks/"+ns+"/healthy", "", hookRequest("p")); r.status != http.StatusOK {
		t.Errorf("another function during the cap = %d %s, want 200", r.status, r.raw)
	}
	var ok, refused int
	for range 3 {
		a := <-answers
		switch {
		case a.status == http.StatusOK:
			ok++
		case a.status == http.StatusTooManyRequests && a.retryAfter == "1":
			refused++
		default:
			t.Errorf("a concurrent call = %d (Retry-After %q), want 200, or 429 with Retry-After 1", a.status, a.retryAfter)
		}
	}
	if ok < 1 || refused < 1 {
		t.Fatalf("three concurrent calls with one slot: %d answered, %d refused; want both", ok, refused)
	}
	if r := g.do(t, "POST", "/hooks/"+ns+"/slow", "", hookRequest("third")); r.status != http.StatusOK {
		t.Errorf("a call after the first ended = %d %s, want 200", r.status, r.raw)
	}
}

// TestCacheKeepsNoManagedFields: the gateway's cache of Functions holds no
// managedFields (a few KiB per Function, which nothing reads), and the status
// it writes from a cached copy leaves the server's managedFields whole: the
// creator's entry stays, and the gateway's own is added for the status.
func TestCacheKeepsNoManagedFields(t *testing.T) {
	g := startGateway(t)
	ns := env.Namespace(t)
	createFunction(t, ns, "fields", "jsonnet", "function(request) { children: [] }", 0)
	fn := waitFunction(t, ns, "fields", func(o *unstructured.Unstructured) error { return readyIs(o, "True", "Compiled") })
	managers := map[string]string{}
	for _, f := range fn.GetManagedFields() {
		managers[f.Manager] = f.Subresource
	}
	if len(fn.GetManagedFields()) < 2 || managers[fieldManager] != "status" {
		t.Errorf("the server's managedFields after the gateway's status update: %v, want the creator's entry and the gateway's (%s) for the status", managers, fieldManager)
	}
	cached, exists, err := g.gw.store.informer.GetIndexer().GetByKey(ns + "/fields")
	if err != nil || !exists {
		t.Fatalf("the gateway's cache has no Function %s/fields: %v", ns, err)
	}
	if mf := cached.(*unstructured.Unstructured).GetManagedFields(); len(mf) != 0 {
		t.Errorf("the gateway's cache keeps %d managedFields entries, want none", len(mf))
	}
	if _, found := cached.(*unstructured.Unstructured).Object["metadata"].(map[string]any)["managedFields"]; found {
		t.Error("the gateway's cached Function still has a metadata.managedFields key")
	}
}
