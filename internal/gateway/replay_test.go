package gateway

import (
	"context"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/go-chi/chi/v5"
	"github.com/google/go-cmp/cmp"

	fnv1 "github.com/metalambda/metalambda/internal/apis/metalambda/v1alpha1"
	"github.com/metalambda/metalambda/internal/gateway/lambda"
	"github.com/metalambda/metalambda/internal/httpapi"
)

func TestReplayCandidateDefaultsToTheFunction(t *testing.T) {
	current := lambda.Function{Name: "ns/f", Runtime: "python", Source: "old", Handler: "handle",
		Timeout: 7 * time.Second, Env: map[string]string{"A": "1"}, Network: true}
	for _, tt := range []struct {
		name string
		req  replayRequest
		want fnv1.FunctionSpec
	}{
		{"source alone", replayRequest{Source: "new"},
			fnv1.FunctionSpec{Runtime: "python", Source: "new", Handler: "handle", TimeoutSeconds: 7, Env: map[string]string{"A": "1"}, Network: true}},
		{"everything given", replayRequest{Runtime: "python", Source: "new", Handler: "h2", TimeoutSeconds: 3, Env: map[string]string{"B": "2"}},
			fnv1.FunctionSpec{Runtime: "python", Source: "new", Handler: "h2", TimeoutSeconds: 3, Env: map[string]string{"B": "2"}, Network: true}},
		{"an empty env clears it", replayRequest{Source: "new", Env: map[string]string{}},
			fnv1.FunctionSpec{Runtime: "python", Source: "new", Handler: "handle", TimeoutSeconds: 7, Env: map[string]string{}, Network: true}},
		{"another runtime drops the handler", replayRequest{Runtime: "javascript", Source: "new"},
			fnv1.FunctionSpec{Runtime: "javascript", Source: "new", TimeoutSeconds: 7, Env: map[string]string{"A": "1"}, Network: true}},
	} {
		if diff := cmp.Diff(tt.want, tt.req.candidate(current)); diff != "" {
			t.Errorf("%s (-want +got):\n%s", tt.name, diff)
		}
	}
}

func TestReadReplayLimit(t *testing.T) {
	for _, tt := range []struct {
		body      string
		wantLimit int
		wantCode  string
	}{
		{`{"source": "x"}`, defaultReplayLimit, ""},
		{`{"source": "x", "limit": 50}`, 50, ""},
		{`{"source": "x", "limit": 51}`, 0, "invalid_limit"},
		{`{"source": "x", "limit": -1}`, 0, "invalid_limit"},
		{`{"source": 3}`, 0, "bad_request"},
	} {
		req, err := readReplay(httptest.NewRequest(http.MethodPost, "/", strings.NewReader(tt.body)), 50)
		var code string
		if e, ok := err.(*httpapi.Error); ok {
			code = e.Code
		} else if err != nil {
			t.Fatalf("%s: %v", tt.body, err)
		}
		if code != tt.wantCode || (err == nil && req.Limit != tt.wantLimit) {
			t.Errorf("%s: limit %v, error %q; want limit %d, error %q", tt.body, req, code, tt.wantLimit, tt.wantCode)
		}
	}
}

func TestCompareOutcomes(t *testing.T) {
	ok := func(body string) CallOutcome { return CallOutcome{Status: 200, Response: json.RawMessage(body)} }
	failed := CallOutcome{Status: 500, Error: "function ns/f failed (exception): boom"}
	for _, tt := range []struct {
		name     string
		old, new CallOutcome
		changed  bool
		diffHas  []string
	}{
		{"same value, other key order and spacing", ok(`{"a":1,"b":[1,2]}`), ok(`{ "b": [1, 2], "a": 1.0 }`), false, nil},
		{"a value changes", ok(`{"a":1,"b":"x"}`), ok(`{"a":1,"b":"y"}`), true, []string{"--- recorded", "+++ candidate", `-  "b": "x"`, `+  "b": "y"`}},
		{"the call now fails", ok(`{"a":1}`), failed, true, []string{"-status: 200", "+status: 500", "+error: function ns/f failed (exception): boom"}},
		{"both fail alike", failed, failed, false, nil},
		{"logs and durations are not compared", CallOutcome{Status: 200, Response: json.RawMessage(`{}`), Logs: "a", DurationMS: 1},
			CallOutcome{Status: 200, Response: json.RawMessage(`{}`), Logs: "b", DurationMS: 2}, false, nil},
	} {
		changed, diff := compareOutcomes(tt.old, tt.new)
		if changed != tt.changed {
			t.Errorf("%s: changed = %v, want %v (diff %q)", tt.name, changed, tt.changed, diff)
		}
		if !changed && diff != "" {
			t.Errorf("%s: a diff without a change: %q", tt.name, diff)
		}
		for _, want := range tt.diffHas {
			if !strings.Contains(diff, want) {
				t.Errorf("%s: the diff lacks %q:\n%s", tt.name, want, diff)
			}
		}
	}
}

// fakeCompiled answers each request with respond; it counts its calls.
type fakeCompiled struct {
	respond func(json.RawMessage) (lambda.Result, error)
	calls   int
}

func (f *fakeCompiled) Invoke(_ context.Context, req json.RawMessage) (lambda.Result, error) {
	f.calls++
	return f.respond(req)
}

func (f *fakeCompiled) Close() {}

// TestReplayCallsComparesAsTheHistoryKeeps: the candidate's answers are redacted as the
// recorded ones were, so an unchanged function that returns a Secret is unchanged; a
// request the history kept only by size is not run; a redacted request is run and
// says so; a failure is a 500 with its message.
func TestReplayCallsComparesAsTheHistoryKeeps(t *testing.T) {
	secretOut := `{"children":[{"kind":"Secret","stringData":{"p":"hunter2"}}]}`
	h := newHistory(10)
	big := json.RawMessage(`{"pad":"` + strings.Repeat("x", maxRecordedBody) + `"}`)
	h.add(Invocation{Time: time.Unix(1, 0), Source: "hook", Status: 200, Request: big, Response: json.RawMessage(`{}`)})
	h.add(Invocation{Time: time.Unix(2, 0), Source: "hook", Status: 200, Request: json.RawMessage(`{"n":"secret"}`), Response: json.RawMessage(secretOut)})
	h.add(Invocation{Time: time.Unix(3, 0), Source: "invoke", Status: 200, Request: json.RawMessage(`{"n":"a","authorization":"Bearer t"}`), Response: json.RawMessage(`{"n":"a"}`)})
	h.add(Invocation{Time: time.Unix(4, 0), Source: "hook", Status: 200, Request: json.RawMessage(`{"n":"fail"}`), Response: json.RawMessage(`{"n":"fail"}`)})
	fake := &fakeCompiled{respond: func(req json.RawMessage) (lambda.Result, error) {
		var in struct{ N string }
		_ = json.Unmarshal(req, &in)
		switch in.N {
		case "secret":
			return lambda.Result{Response: json.RawMessage(secretOut)}, nil
		case "fail":
			return lambda.Result{Logs: "about to fail\n"}, &lambda.InvokeError{Function: "ns/f", Reason: "exception", Message: "boom"}
		}
		return lambda.Result{Response: req}, nil
	}}
	items := replayCalls(context.Background(), fake, h.list())
	if len(items) != 4 || fake.calls != 3 {
		t.Fatalf("%d items, %d calls; want 4 items, 3 calls: %+v", len(items), fake.calls, items)
	}
	fail, redactedReq, secret, truncated := items[0], items[1], items[2], items[3]
	if !fail.Changed || fail.New.Status != 500 || !strings.Contains(fail.New.Error, "boom") || fail.New.Logs != "about to fail\n" || !strings.Contains(fail.Diff, "+status: 500") {
		t.Errorf("a call that now fails: %+v", fail)
	}
	if !redactedReq.Changed || len(redactedReq.Notes) != 1 || !strings.Contains(redactedReq.Notes[0], "redacted") {
		t.Errorf("an echo of a redacted request: %+v", redactedReq)
	}
	if secret.Changed || strings.Contains(string(secret.New.Response), "hunter2") {
		t.Errorf("an unchanged answer holding a Secret: %+v (%s)", secret, secret.New.Response)
	}
	if truncated.New != nil || !strings.Contains(truncated.Error, "not run") || truncated.Changed {
		t.Errorf("a request kept only by its size: %+v", truncated)
	}

	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	fake.calls = 0
	for _, item := range replayCalls(ctx, fake, h.list()) {
		if item.New != nil || !strings.HasPrefix(item.Error, "not run") {
			t.Errorf("after the replay's end, a call still ran: %+v", item)
		}
	}
	if fake.calls != 0 {
		t.Errorf("%d calls after the replay's end", fake.calls)
	}
}

func TestTruncationNote(t *testing.T) {
	for body, want := range map[string]bool{
		string(truncateJSON(json.RawMessage(`"` + strings.Repeat("x", maxRecordedBody) + `"`))): true,
		`{"truncated": true}`:                        false,
		`{"truncated": true, "bytes": 3, "more": 1}`: false,
		`{"truncated": "yes", "bytes": 3}`:           false,
		`{"a": 1}`:                                   false,
	} {
		if got := truncationNote(json.RawMessage(body)); got != want {
			t.Errorf("truncationNote(%.60s) = %v, want %v", body, got, want)
		}
	}
}

// TestReplaysPerNamespace: one namespace holding replays cannot take every
// replay place of the gateway: it gets half of them, and another namespace
// still runs one.
func TestReplaysPerNamespace(t *testing.T) {
	g := &Gateway{replays: newCallLimiter(4), nsReplays: newCallLimiter(2)}
	release := make(chan struct{})
	started := make(chan struct{}, 8)
	r := chi.NewRouter()
	r.Post("/v1/namespaces/{namespace}/functions/{name}/replay", g.limitReplays(func(w http.ResponseWriter, r *http.Request) {
		started <- struct{}{}
		<-release
	}))
	srv := httptest.NewServer(r)
	defer srv.Close()
	post := func(ns string) int {
		resp, err := http.Post(srv.URL+"/v1/namespaces/"+ns+"/functions/f/replay", "application/json", strings.NewReader("{}"))
		if err != nil {
			t.Error(err)
			return 0
		}
		resp.Body.Close()
		return resp.StatusCode
	}
	done := make(chan int, 8)
	for range 2 {
		go func() { done <- post("attacker") }()
		<-started
	}
	if code := post("attacker"); code != http.StatusTooManyRequests {
		t.Errorf("a third replay of one namespace: %d, want 429", code)
	}
	go func() { done <- post("victim") }()
	<-started // another namespace still gets a place
	close(release)
	for range 3 {
		if code := <-done; code != http.StatusOK {
			t.Errorf("a held replay ended with %d, want 200", code)
		}
	}
}
