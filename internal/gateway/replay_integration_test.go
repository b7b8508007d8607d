//go:build integration

package gateway

import (
	"context"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/metalambda/metalambda/internal/kubetest"
)

// greetJS answers each parent with one ConfigMap child; greetingB is the greeting of
// the parent named "b", "hello" for every other.
const greetJS = `function sync(request) {
  const name = request.parent.metadata.name;
  const greeting = name === "b" ? %q : "hello";
  return {children: [{apiVersion: "v1", kind: "ConfigMap", metadata: {name: name}, data: {greeting: greeting}}]};
}`

// TestReplayFlagsExactlyTheChangedCalls records calls of a function through its hook,
// then replays candidates against them: one that changes the answer to one call flags
// that call alone, with a diff; an unchanged candidate flags none; one that does not
// compile answers 422 with its position; one that reads a host file fails in the
// sandbox as any call would; the scratch workers are gone afterwards. Replay needs
// update and invoke; every exchange is checked against /openapi.json.
func TestReplayFlagsExactlyTheChangedCalls(t *testing.T) {
	applyShippedRBAC(t)
	g := startGateway(t, func(o *Options) { o.AuthCacheTTL = time.Millisecond })
	c := newChecker(t, g)
	ns := env.Namespace(t)
	base := "/v1/namespaces/" + ns + "/functions"
	if r := c.do(t, "POST", base, g.token, map[string]any{"name": "greet", "runtime": "javascript", "source": fmt.Sprintf(greetJS, "hello")}, nil, true); r.status != http.StatusCreated {
		t.Fatalf("create = %d %s", r.status, r.raw)
	}
	g.waitHook(t, ns, "greet", "p")
	for _, parent := range []string{"a", "b", "c"} {
		if r := g.do(t, "POST", "/hooks/"+ns+"/greet", "", hookRequest(parent)); r.status != http.StatusOK {
			t.Fatalf("hook call for %s = %d %s", parent, r.status, r.raw)
		}
	}
	replay := func(token string, body map[string]any) reply {
		t.Helper()
		return c.do(t, "POST", base+"/greet/replay", token, body, nil, true)
	}

	// The candidate greets b otherwise: exactly the call for b changes.
	r := replay(g.token, map[string]any{"source": fmt.Sprintf(greetJS, "bonjour"), "limit": 3})
	items, _ := r.body["items"].([]any)
	if r.status != http.StatusOK || len(items) != 3 || r.body["changed"] != 1.0 {
		t.Fatalf("replay = %d %.2000s; want 200, 3 items, 1 changed", r.status, r.raw)
	}
	for i, parent := range []string{"c", "b", "a"} { // newest first
		item := items[i].(map[string]any)
		want := parent == "b"
		if item["changed"] != want {
			t.Errorf("the call for %s: changed = %v, want %v: %v", parent, item["changed"], want, item)
		}
		diff, _ := item["diff"].(string)
		if want && (!strings.Contains(diff, `-        "greeting": "hello"`) || !strings.Contains(diff, `+        "greeting": "bonjour"`)) {
			t.Errorf("the diff of the call for b:\n%s", diff)
		}
		if !want && diff != "" {
			t.Errorf("an unchanged call has a diff:\n%s", diff)
		}
	}

	// The function as stored is unchanged: no call changes, and the hook still
	// answers as before (a replay saves nothing and is not recorded).
	if r := replay(g.token, map[string]any{"source": fmt.Sprintf(greetJS, "hello")}); r.status != http.StatusOK || r.body["changed"] != 0.0 {
		t.Errorf("replaying the stored source = %d %.1000s, want nothing changed", r.status, r.raw)
	}
	hist := g.do(t, "GET", base+"/greet/invocations", g.token, nil)
	if items, _ := hist.body["items"].([]any); len(items) < 4 || strings.Contains(hist.raw, "bonjour") {
		t.Errorf("the history after replays = %.1000s; want the recorded calls alone", hist.raw)
	}

	// A candidate that does not compile answers as create and update do.
	r = replay(g.token, map[string]any{"source": "function sync(request) {\n  const x = ;\n  return {};\n}"})
	if r.status != http.StatusUnprocessableEntity || r.body["error"] != "compile_error" || r.body["line"] != 2.0 || r.body["column"] != 13.0 {
		t.Errorf("a candidate that does not compile = %d %s, want 422 compile_error at line 2, column 13", r.status, r.raw)
	}
	if r := replay(g.token, map[string]any{"source": "x", "limit": 500}); r.status != http.StatusUnprocessableEntity || r.body["error"] != "invalid_limit" {
		t.Errorf("limit 500 = %d %s, want 422 invalid_limit", r.status, r.raw)
	}
	if r := c.do(t, "POST", base+"/missing/replay", g.token, map[string]any{"source": "x"}, nil, true); r.status != http.StatusNotFound {
		t.Errorf("replaying a missing function = %d %s, want 404", r.status, r.raw)
	}

	// The candidate runs sandboxed, in another runtime too: a host file is out of
	// its reach, and its scratch workers end with the replay.
	hostFile := filepath.Join(t.TempDir(), "host-only")
	if err := os.WriteFile(hostFile, []byte("host data"), 0o644); err != nil {
		t.Fatal(err)
	}
	py := fmt.Sprintf("def sync(request):\n    return {'read': open(%q).read()}\n", hostFile)
	// The gateway also runs the python Functions other tests left on the shared control
	// plane (this test is not parallel, so their number holds still meanwhile).
	pythonWorkers := func() int { stats := g.gw.registry.Stats()["python"]; return stats.Idle + stats.Busy }
	before := pythonWorkers()
	r = replay(g.token, map[string]any{"runtime": "python", "source": py, "limit": 1})
	items, _ = r.body["items"].([]any)
	if r.status != http.StatusOK || len(items) != 1 || strings.Contains(r.raw, "host data") {
		t.Fatalf("a candidate reading a host file = %d %.1000s", r.status, r.raw)
	}
	if item := items[0].(map[string]any); item["changed"] != true || item["new"].(map[string]any)["status"] != 500.0 {
		t.Errorf("a candidate reading a host file: %v, want a failed call", item)
	}
	// The scratch workers are closed once the answer is written: soon after it.
	kubetest.Eventually(t, 10*time.Second, "the replay's python workers end", func(context.Context) (bool, error) {
		n := pythonWorkers()
		return n <= before, fmt.Errorf("%d python workers, %d before the replay", n, before)
	})

	// Replay runs the caller's code (update) on recorded requests (invoke).
	invoker := serviceAccount(t, ns, "invoker", false, clusterRole("metalambda-function-invoker"))
	developer := serviceAccount(t, ns, "developer", false, clusterRole("metalambda-function-developer"))
	g.waitStatus(t, "GET", base+"/greet/invocations", invoker, nil, http.StatusOK)
	if r := replay(invoker, map[string]any{"source": fmt.Sprintf(greetJS, "hello")}); r.status != http.StatusForbidden || !strings.Contains(r.raw, "update") {
		t.Errorf("an invoker's replay = %d %s, want 403 naming update", r.status, r.raw)
	}
	kubetest.Eventually(t, 30*time.Second, "a developer may replay", func(context.Context) (bool, error) {
		r := replay(developer, map[string]any{"source": fmt.Sprintf(greetJS, "hello")})
		return r.status == http.StatusOK, fmt.Errorf("%d %s", r.status, r.raw)
	})
	t.Logf("%d exchanges checked against /openapi.json", c.checks)
}
