//go:build integration

package gateway

import (
	"fmt"
	"net/http"
	"strings"
	"sync"
	"testing"
)

// Two replicas of a gateway record the calls each served; either one's list of a
// function's calls, and a replay on either, holds both replicas' calls, each
// marked with the replica that served it. A replica that does not answer is
// named, and the others' calls are still listed.
func TestReplicasMergeTheirRecordedCalls(t *testing.T) {
	var mu sync.Mutex
	peersOf := map[string][]string{}
	peers := func(replica string) Peers {
		return func() []string {
			mu.Lock()
			defer mu.Unlock()
			return peersOf[replica]
		}
	}
	a := startGateway(t, func(o *Options) { o.Replica, o.Peers = "gateway-a", peers("a") })
	b := startGateway(t, func(o *Options) { o.Replica, o.Peers = "gateway-b", peers("b") })
	const gone = "http://127.0.0.1:1" // a replica that does not answer
	mu.Lock()
	peersOf["a"], peersOf["b"] = []string{b.url}, []string{a.url, gone}
	mu.Unlock()

	ns := env.Namespace(t)
	base := "/v1/namespaces/" + ns + "/functions"
	if created := a.do(t, "POST", base, a.token, map[string]any{"name": "echo", "runtime": "javascript", "source": fmt.Sprintf(echoJS, "v1")}); created.status != http.StatusCreated {
		t.Fatalf("create = %d %s", created.status, created.raw)
	}
	a.waitHook(t, ns, "echo", "p-v1")
	b.waitHook(t, ns, "echo", "p-v1")
	for _, g := range []*testGateway{a, b} {
		if r := g.do(t, "POST", "/hooks/"+ns+"/echo", "", hookRequest("on-"+g.gw.opts.Replica)); r.status != 200 {
			t.Fatalf("hook on %s = %d %s", g.gw.opts.Replica, r.status, r.raw)
		}
	}

	replicasOf := func(r reply) map[string]string { // parent name -> replica
		out := map[string]string{}
		items, _ := r.body["items"].([]any)
		for _, item := range items {
			m := item.(map[string]any)
			if req, _ := m["request"].(map[string]any); req != nil {
				parent, _ := req["parent"].(map[string]any)
				meta, _ := parent["metadata"].(map[string]any)
				if name, _ := meta["name"].(string); strings.HasPrefix(name, "on-") {
					out[name], _ = m["replica"].(string)
				}
			}
		}
		return out
	}
	want := map[string]string{"on-gateway-a": "gateway-a", "on-gateway-b": "gateway-b"}
	fromA := a.do(t, "GET", base+"/echo/invocations", a.token, nil)
	if got := replicasOf(fromA); fmt.Sprint(got) != fmt.Sprint(want) {
		t.Errorf("calls listed by replica a: %v, want %v (%s)", got, want, fromA.raw)
	}
	if u, _ := fromA.body["unreachable"].([]any); len(u) != 0 {
		t.Errorf("replica a names unreachable replicas %v, want none", u)
	}
	fromB := b.do(t, "GET", base+"/echo/invocations", b.token, nil)
	if got := replicasOf(fromB); fmt.Sprint(got) != fmt.Sprint(want) {
		t.Errorf("calls listed by replica b: %v, want %v (%s)", got, want, fromB.raw)
	}
	if u, _ := fromB.body["unreachable"].([]any); len(u) != 1 || !strings.HasPrefix(u[0].(string), gone) {
		t.Errorf("replica b names unreachable replicas %v, want %s alone", u, gone)
	}
	local := a.do(t, "GET", base+"/echo/invocations?local=true", a.token, nil)
	if got := replicasOf(local); fmt.Sprint(got) != fmt.Sprint(map[string]string{"on-gateway-a": "gateway-a"}) {
		t.Errorf("replica a's own calls: %v, want its call alone", got)
	}

	// A peer checks the caller's token as any request's: a token without the
	// invoke verb gets nothing from either replica.
	reader := env.ServiceAccount(t, ns, "nobody-here")
	if r := b.do(t, "GET", base+"/echo/invocations", reader, nil); r.status != http.StatusForbidden {
		t.Errorf("invocations for a token without rights = %d %s, want 403", r.status, r.raw)
	}

	// A replay on b runs the candidate on the calls a recorded too.
	replay := b.do(t, "POST", base+"/echo/replay", b.token, map[string]any{"source": fmt.Sprintf(echoJS, "v2"), "limit": 50})
	if replay.status != 200 || !strings.Contains(replay.raw, "on-gateway-a") || !strings.Contains(replay.raw, "on-gateway-b") {
		t.Errorf("replay on replica b = %d, want both replicas' calls replayed: %s", replay.status, replay.raw)
	}
}
