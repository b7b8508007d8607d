package hook

import (
	"context"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"sync"
	"testing"
)

// replica is a gateway replica on loopback that counts the calls of each Function
// it serves and the bearer token and Host they came with.
type replica struct {
	srv   *httptest.Server
	mu    sync.Mutex
	calls map[string]int
	auth  []string
	hosts []string
}

func newReplica(t *testing.T) *replica {
	r := &replica{calls: map[string]int{}}
	r.srv = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, req *http.Request) {
		body, _ := io.ReadAll(req.Body)
		r.mu.Lock()
		r.calls[strings.TrimPrefix(req.URL.Path, "/hooks/")]++
		r.auth = append(r.auth, req.Header.Get("Authorization"))
		r.hosts = append(r.hosts, req.Host)
		r.mu.Unlock()
		fmt.Fprintf(w, `{"echo": %s}`, body)
	}))
	t.Cleanup(r.srv.Close)
	return r
}

func (r *replica) addr() string { return r.srv.Listener.Addr().String() }

func (r *replica) count(function string) int {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.calls[function]
}

func call(t *testing.T, c *Client, url string) {
	t.Helper()
	var out map[string]any
	if err := c.Call(context.Background(), Endpoint{URL: url}, CallInfo{Hook: HookSync}, map[string]any{"x": 1}, &out); err != nil {
		t.Fatalf("call %s: %v", url, err)
	}
	if fmt.Sprint(out) != "map[echo:map[x:1]]" {
		t.Fatalf("call %s answered %v", url, out)
	}
}

// The calls of one Function all go to the replica rendezvous hashing ranks first,
// Functions spread over the replicas, the token for the Service's host goes with
// them and so does its Host; a replica that goes away moves only its Functions, to
// their second, and with none left the Service's address serves.
func TestShardedSendsAFunctionToItsReplica(t *testing.T) {
	replicas := []*replica{newReplica(t), newReplica(t), newReplica(t)}
	service := newReplica(t) // what the Service's address reaches
	var mu sync.Mutex
	live := []string{replicas[0].addr(), replicas[1].addr(), replicas[2].addr()}
	byAddr := map[string]*replica{}
	for _, r := range replicas {
		byAddr[r.addr()] = r
	}
	// The Service's name resolves to the stand-in for its ClusterIP.
	_, port, _ := net.SplitHostPort(service.addr())
	dialer := &net.Dialer{}
	transport := &http.Transport{DialContext: func(ctx context.Context, network, addr string) (net.Conn, error) {
		if host, _, _ := net.SplitHostPort(addr); host == "gw.system.svc" {
			addr = service.addr()
		}
		return dialer.DialContext(ctx, network, addr)
	}}
	sharded := Sharded{Service: "gw.system", Endpoints: func() []string {
		mu.Lock()
		defer mu.Unlock()
		return slices.Clone(live)
	}, Next: &http.Client{Transport: transport}}
	c := &Client{HTTP: TokenForHosts{Hosts: []string{"gw.system"}, Token: "hook-token", Next: sharded}}
	url := func(fn string) string { return "http://gw.system.svc:" + port + "/hooks/" + fn }

	functions := make([]string, 60)
	for i := range functions {
		functions[i] = fmt.Sprintf("ns%d/fn%d", i%7, i)
		for range 3 {
			call(t, c, url(functions[i]))
		}
	}
	owner := map[string]*replica{}
	perReplica := map[*replica]int{}
	for _, fn := range functions {
		first := byAddr[Rank(fn, live, 1)[0]]
		if got := first.count(fn); got != 3 {
			t.Errorf("%s: %d of its 3 calls reached the replica ranked first", fn, got)
		}
		owner[fn] = first
		perReplica[first]++
	}
	// The spread over replicas, by the ranking alone, over enough functions
	// that a fair one cannot fall below half its share (the replicas' ports,
	// which the ranking hashes, differ from run to run).
	for i := range 600 {
		perReplica[byAddr[Rank(fmt.Sprintf("ns%d/spread%d", i%7, i), live, 1)[0]]]++
	}
	for i, r := range replicas {
		if n := perReplica[r]; n < 110 {
			t.Errorf("replica %d serves %d of 660 functions, want about 220", i, n)
		}
		for j, a := range r.auth {
			if a != "Bearer hook-token" || r.hosts[j] != "gw.system.svc:"+port {
				t.Fatalf("replica %d got Authorization %q and Host %q, want the Service's token and host", i, a, r.hosts[j])
			}
		}
	}
	if service.count(functions[0]) != 0 {
		t.Errorf("the Service's address served a call while replicas were known")
	}

	// Replica 0 goes away without its endpoint being removed: its Functions go to
	// their second, the others stay where they were.
	replicas[0].srv.Close()
	for _, fn := range functions {
		want := owner[fn]
		if want == replicas[0] {
			want = byAddr[Rank(fn, live, 2)[1]]
		}
		before := want.count(fn)
		call(t, c, url(fn))
		if got := want.count(fn); got != before+1 {
			t.Errorf("%s: its call did not reach %s", fn, want.addr())
		}
	}

	// No replica answers: the Service's address serves.
	for _, r := range replicas[1:] {
		r.srv.Close()
	}
	call(t, c, url(functions[1]))
	if service.count(functions[1]) != 1 {
		t.Errorf("with no replica to connect to, the call did not go to the Service's address")
	}

	// Other hosts, paths and schemes go as written.
	mu.Lock()
	live = nil
	mu.Unlock()
	call(t, c, url(functions[2]))
	if service.count(functions[2]) != 1 {
		t.Errorf("with no endpoint known, the call did not go to the Service's address")
	}
}

func TestShardedRoutesOnlyHookCallsOfTheService(t *testing.T) {
	s := Sharded{Service: "gw.system"}
	for raw, want := range map[string]string{
		"http://gw.system/hooks/ns/fn":                          "ns/fn",
		"http://gw.system.svc.cluster.local:80/hooks/ns/fn":     "ns/fn",
		"http://GW.system.svc/hooks/ns/fn":                      "ns/fn",
		"https://gw.system/hooks/ns/fn":                         "",
		"http://other.system/hooks/ns/fn":                       "",
		"http://gw.system/hooks/ns":                             "",
		"http://gw.system/hooks/ns/fn/more":                     "",
		"http://gw.system/v1/namespaces/ns/functions/fn/invoke": "",
	} {
		req, _ := http.NewRequest(http.MethodPost, raw, nil)
		got, ok := s.function(req)
		if got != want || ok != (want != "") {
			t.Errorf("%s: function %q %v, want %q", raw, got, ok, want)
		}
	}
}

// Rank is the same in every process and moves few keys when an address is added.
func TestRankIsStableAndMovesFewKeys(t *testing.T) {
	three := []string{"10.0.0.1:8081", "10.0.0.2:8081", "10.0.0.3:8081"}
	four := append(slices.Clone(three), "10.0.0.4:8081")
	moved := 0
	for i := range 1000 {
		key := fmt.Sprintf("ns/fn-%d", i)
		a, b := Rank(key, three, 1)[0], Rank(key, four, 1)[0]
		if a != b {
			if b != "10.0.0.4:8081" {
				t.Fatalf("%s moved from %s to %s, not to the new address", key, a, b)
			}
			moved++
		}
	}
	if moved < 150 || moved > 350 {
		t.Errorf("%d of 1000 keys moved to a fourth address, want about 250", moved)
	}
	if got := Rank("ns/fn", three, 5); len(got) != 3 {
		t.Errorf("Rank of 3 addresses for 5 = %v", got)
	}
	if got := weight("ns/fn", "10.0.0.1:8081"); got != weight("ns/fn", "10.0.0.1:8081") {
		t.Error("weight changes")
	}
}

// A replica that goes away in the middle of a call (its connection closed before
// any answer, as a crashed gateway's is) costs the call nothing: it goes to the
// Function's second replica at once.
func TestShardedCallsTheSecondReplicaWhenTheFirstDiesMidCall(t *testing.T) {
	second := newReplica(t)
	var crashed sync.Mutex
	crashes := 0
	first := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, req *http.Request) {
		_, _ = io.ReadAll(req.Body)
		crashed.Lock()
		crashes++
		crashed.Unlock()
		conn, _, err := w.(http.Hijacker).Hijack()
		if err != nil {
			t.Error(err)
			return
		}
		conn.Close() // the replica is gone before it answers
	}))
	t.Cleanup(first.Close)
	fn := "ns/fn"
	live := []string{first.Listener.Addr().String(), second.addr()}
	// Order the two so that the crashing one ranks first for fn.
	if Rank(fn, live, 1)[0] != live[0] {
		fn = "ns/other"
		for i := 0; Rank(fn, live, 1)[0] != live[0]; i++ {
			fn = fmt.Sprintf("ns/fn%d", i)
		}
	}
	c := &Client{HTTP: Sharded{Service: "gw.system", Endpoints: func() []string { return live }}}
	_, port, _ := net.SplitHostPort(second.addr())
	call(t, c, "http://gw.system.svc:"+port+"/hooks/"+fn)
	if crashes != 1 || second.count(fn) != 1 {
		t.Fatalf("the first replica was called %d times and the second %d, want once each", crashes, second.count(fn))
	}
}
