package api

import (
	"errors"
	"fmt"
	"math"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	"github.com/metalambda/metalambda/internal/engine/hook"
	"github.com/metalambda/metalambda/internal/engineapi"
)

var t0 = time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)

// hookCall is a recorded call of the sync hook of CompositeController web about the
// parent ns/name; opts change it.
func hookCall(name string, opts ...func(*hook.Call)) hook.Call {
	c := hook.Call{
		Info: hook.CallInfo{
			Controller: "web", ControllerType: CompositeKind, Hook: hook.HookSync,
			Parent:           hook.ObjectKey{Group: "example.com", Kind: "App", Namespace: "ns", Name: name},
			ParentAPIVersion: "example.com/v1", ParentUID: "uid-" + name,
		},
		URL: "http://hook/sync", Start: t0, Duration: 20 * time.Millisecond, Status: 200,
		Request:  []byte(`{"parent":{"metadata":{"name":"` + name + `"}}}`),
		Response: []byte(`{"children":[]}`),
	}
	for _, o := range opts {
		o(&c)
	}
	return c
}

func withResponse(body string) func(*hook.Call) {
	return func(c *hook.Call) { c.Response = []byte(body) }
}

func ids(calls []recordedCall) []uint64 {
	out := make([]uint64, len(calls))
	for i, c := range calls {
		out[i] = c.id
	}
	return out
}

func all(*recordedCall) bool { return true }

func TestCallHistoryKeepsTheLastCallsNewestFirst(t *testing.T) {
	h := NewHistory(3)
	for range 5 {
		h.RecordCall(hookCall("a"))
	}
	calls, _ := h.list(0, 10, all)
	if diff := cmp.Diff([]uint64{5, 4, 3}, ids(calls)); diff != "" {
		t.Errorf("ids (-want +got):\n%s", diff)
	}
	if calls, _ := h.list(3, 10, all); !cmp.Equal([]uint64{5, 4}, ids(calls)) {
		t.Errorf("since 3: ids %v, want [5 4]", ids(calls))
	}
	if calls, _ := h.list(0, 1, all); !cmp.Equal([]uint64{5}, ids(calls)) {
		t.Errorf("limit 1: ids %v, want [5]", ids(calls))
	}
	if h.lastID() != 5 {
		t.Errorf("lastID = %d, want 5", h.lastID())
	}
	if _, ok := h.get(2); ok {
		t.Error("call 2 is still held after three newer ones")
	}
}

func TestCallHistoryOffRecordsNothing(t *testing.T) {
	h := NewHistory(0)
	if h != nil {
		t.Fatal("a history of size 0 is not off")
	}
	h.RecordSync(CompositeKind, "web", true)
	h.Forget(CompositeKind, "web")
	if calls, _ := h.list(0, 10, all); calls != nil || h.lastID() != 0 {
		t.Errorf("an off history lists %v, last id %d", calls, h.lastID())
	}
	if points, errs := h.lastHour(CompositeKind, "web"); points != nil || errs != 0 {
		t.Errorf("an off history has stats %v %d", points, errs)
	}
}

func TestCallHistoryPreviousCallIsPerParentAndHook(t *testing.T) {
	h := NewHistory(10)
	h.RecordCall(hookCall("a", withResponse(`{"children":[{"kind":"ConfigMap","spec":{"replicas":1}}]}`))) // 1
	h.RecordCall(hookCall("b"))                                                                            // 2
	h.RecordCall(hookCall("a", func(c *hook.Call) { c.Info.Hook = hook.HookFinalize }))                    // 3
	h.RecordCall(hookCall("a", withResponse(`{"children":[{"kind":"ConfigMap","spec":{"replicas":2}}]}`))) // 4
	h.RecordCall(hookCall("a", withResponse(`{"children":[{"kind":"ConfigMap","spec":{"replicas":2}}]}`))) // 5
	calls, prev := h.list(0, 10, all)
	wantPrev := map[uint64]uint64{5: 4, 4: 1, 3: 0, 2: 0, 1: 0}
	for i, c := range calls {
		if c.prev != wantPrev[c.id] || (c.prev != 0 && prev[i].id != c.prev) {
			t.Errorf("call %d: previous %d (held %d), want %d", c.id, c.prev, prev[i].id, wantPrev[c.id])
		}
	}
	four := callView(&calls[1], &prev[1])
	want := `--- call 1
+++ call 4
@@ -3,7 +3,7 @@
     {
       "kind": "ConfigMap",
       "spec": {
-        "replicas": 1
+        "replicas": 2
       }
     }
   ]
`
	if four.PreviousID != 1 || four.Diff != want {
		t.Errorf("call 4: previous %d, diff\n%s\nwant\n%s", four.PreviousID, four.Diff, want)
	}
	if five := callView(&calls[0], &prev[0]); five.PreviousID != 4 || five.Diff != "" {
		t.Errorf("call 5 answered like call 4: previous %d, diff %q", five.PreviousID, five.Diff)
	}
}

func TestCallHistoryForgetsThePreviousCallItEvicted(t *testing.T) {
	h := NewHistory(2)
	h.RecordCall(hookCall("a"))
	h.RecordCall(hookCall("b"))
	h.RecordCall(hookCall("c")) // evicts a
	h.RecordCall(hookCall("b")) // evicts the first b
	if len(h.latest) != 2 {
		t.Errorf("latest holds %d parents, want the 2 still in the ring: %v", len(h.latest), h.latest)
	}
	calls, prev := h.list(0, 10, all)
	if v := callView(&calls[0], &prev[0]); calls[0].prev != 0 || v.PreviousID != 0 || v.Diff != "" {
		t.Errorf("the previous call was evicted, yet the view shows previous %d, diff %q", v.PreviousID, v.Diff)
	}

	h = NewHistory(3)
	h.RecordCall(hookCall("a", withResponse(`{"a":1}`))) // 1
	h.RecordCall(hookCall("b"))                          // 2
	h.RecordCall(hookCall("a", withResponse(`{"a":2}`))) // 3, after 1
	h.RecordCall(hookCall("c"))                          // 4 evicts 1
	calls, prev = h.list(0, 10, all)
	if v := callView(&calls[1], &prev[1]); calls[1].id != 3 || calls[1].prev != 1 || v.PreviousID != 0 || v.Diff != "" {
		t.Errorf("call %d after evicted call %d: view shows previous %d, diff %q", calls[1].id, calls[1].prev, v.PreviousID, v.Diff)
	}
}

func TestCallViewRedactsAndTruncates(t *testing.T) {
	h := NewHistory(4)
	secret := `{"kind":"Secret","apiVersion":"v1","data":{"password":"aHVudGVyMg=="},"stringData":{"token":"abc"}}`
	h.RecordCall(hookCall("a", withResponse(`{"children":[`+secret+`]}`), func(c *hook.Call) {
		c.Request = []byte(`{"related":{"Secret.v1":{"s":` + secret + `}}}`)
	}))
	h.RecordCall(hookCall("a", withResponse(`{"children":[`+strings.Replace(secret, "aHVudGVyMg==", "c2VjcmV0", 1)+`]}`), func(c *hook.Call) {
		c.Request = []byte(`{"pad":"` + strings.Repeat("x", maxRecordedBody) + `"}`)
	}))
	calls, prev := h.list(0, 10, all)
	first, second := callView(&calls[1], &prev[1]), callView(&calls[0], &prev[0])
	for _, body := range []string{string(first.Request), string(first.Response), string(second.Response), second.Diff} {
		if strings.Contains(body, "aHVudGVyMg") || strings.Contains(body, "c2VjcmV0") || strings.Contains(body, "abc") {
			t.Errorf("a secret value is shown: %s", body)
		}
	}
	if !strings.Contains(string(first.Request), `"password":"[redacted]"`) {
		t.Errorf("request not redacted as expected: %s", first.Request)
	}
	if second.Diff != "" {
		t.Errorf("two responses that differ only in secret values have a diff:\n%s", second.Diff)
	}
	if want := `{"bytes":32778,"truncated":true}`; string(second.Request) != want {
		t.Errorf("big request shown as %s, want %s", second.Request, want)
	}
}

func TestCallViewFields(t *testing.T) {
	h := NewHistory(2)
	h.RecordCall(hookCall("a", func(c *hook.Call) {
		c.Status, c.Response, c.Err = 500, nil, errors.New("POST http://hook/sync: hook answered HTTP 500")
	}))
	calls, prev := h.list(0, 1, all)
	got := callView(&calls[0], &prev[0])
	want := engineapi.HookCall{
		ID: 1, Time: t0, Controller: engineapi.ControllerRef{Kind: CompositeKind, Name: "web"}, Hook: "sync",
		Parent: engineapi.ObjectRef{APIVersion: "example.com/v1", Kind: "App", Namespace: "ns", Name: "a", UID: "uid-a"},
		URL:    "http://hook/sync", DurationMS: 20, Status: 500, Error: "POST http://hook/sync: hook answered HTTP 500",
		Request: []byte(`{"parent":{"metadata":{"name":"a"}}}`),
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("view (-want +got):\n%s", diff)
	}
}

func TestControllerStatsOfTheLastHour(t *testing.T) {
	h := NewHistory(100)
	now := t0
	h.now = func() time.Time { return now }
	old := hookCall("a", func(c *hook.Call) { c.Start = t0.Add(-61 * time.Minute) })
	h.RecordCall(old)
	for i := 1; i <= 100; i++ {
		h.RecordCall(hookCall("a", func(c *hook.Call) {
			c.Start, c.Duration = t0.Add(-90*time.Second), time.Duration(i)*time.Millisecond
			if i%10 == 0 {
				c.Err = errors.New("boom")
			}
		}))
	}
	h.RecordCall(hookCall("a", func(c *hook.Call) { c.Info.Controller = "other" }))
	h.RecordSync(CompositeKind, "web", true)
	h.RecordSync(CompositeKind, "web", true)
	h.RecordSync(CompositeKind, "web", false)
	points, syncErrors := h.lastHour(CompositeKind, "web")
	if syncErrors != 2 {
		t.Errorf("sync errors = %d, want 2", syncErrors)
	}
	if len(points) != 1 {
		t.Fatalf("points = %+v, want one minute (the call of 61 minutes ago is out)", points)
	}
	p := points[0]
	if p.Minute != time.Date(2026, 1, 2, 3, 2, 0, 0, time.UTC) || p.Calls != 100 || p.Errors != 10 {
		t.Errorf("point = %+v", p)
	}
	// The bucket bounds grow by 25%: a percentile is within 12% of the true value.
	if math.Abs(p.P50MS-50)/50 > 0.12 || math.Abs(p.P95MS-95)/95 > 0.12 {
		t.Errorf("p50 %.2fms, p95 %.2fms; want about 50 and 95", p.P50MS, p.P95MS)
	}
	h.Forget(CompositeKind, "web")
	if points, _ := h.lastHour(CompositeKind, "web"); points != nil {
		t.Errorf("a forgotten controller has points %v", points)
	}
}

func TestLatencyBucketsCoverEveryDuration(t *testing.T) {
	for _, d := range []time.Duration{0, time.Microsecond, latencyBase, time.Second, 10 * time.Minute, time.Hour} {
		i := latencyBucket(d)
		if i < 0 || i >= latencyBuckets || (i < latencyBuckets-1 && latencyBounds[i] < d) {
			t.Errorf("%s in bucket %d", d, i)
		}
	}
	if latencyBounds[latencyBuckets-1] < 10*time.Minute {
		t.Errorf("the last bound %s is below the longest hook timeout", latencyBounds[latencyBuckets-1])
	}
}

func TestReadiness(t *testing.T) {
	for _, tt := range []struct {
		name string
		obj  string
		want string
	}{
		{"no status", `{"kind":"ConfigMap","data":{"a":"b"}}`, engineapi.ReadyTrue},
		{"ready condition", `{"status":{"conditions":[{"type":"Ready","status":"False"}]}}`, engineapi.ReadyFalse},
		{"available condition", `{"status":{"conditions":[{"type":"Progressing","status":"True"},{"type":"Available","status":"True"}]}}`, engineapi.ReadyTrue},
		{"old generation", `{"metadata":{"generation":3},"status":{"observedGeneration":2,"conditions":[{"type":"Available","status":"True"}]}}`, engineapi.ReadyFalse},
		{"job complete", `{"status":{"conditions":[{"type":"Complete","status":"True"}]}}`, engineapi.ReadyTrue},
		{"job failed", `{"status":{"conditions":[{"type":"Failed","status":"True"}]}}`, engineapi.ReadyFalse},
		{"pod running", `{"status":{"phase":"Running"}}`, engineapi.ReadyTrue},
		{"pod pending", `{"status":{"phase":"Pending"}}`, engineapi.ReadyFalse},
		{"unknown status", `{"status":{"replicas":3}}`, engineapi.ReadyUnknown},
	} {
		obj := &unstructured.Unstructured{}
		if err := obj.UnmarshalJSON([]byte(strings.Replace(tt.obj, "{", `{"apiVersion":"v1","kind":"Thing",`, 1))); err != nil {
			t.Fatalf("%s: %v", tt.name, err)
		}
		if got, reason := readiness(obj); got != tt.want || reason == "" {
			t.Errorf("%s: %s (%s), want %s", tt.name, got, reason, tt.want)
		}
	}
}

// BenchmarkRecordCall is the cost the call history adds to each hook call, with the
// ring full and parents seen before (the steady state).
func BenchmarkRecordCall(b *testing.B) {
	h := NewHistory(DefaultHookCallHistory)
	calls := make([]hook.Call, 100)
	for i := range calls {
		calls[i] = hookCall(fmt.Sprintf("p%d", i))
	}
	for i := range 2 * DefaultHookCallHistory {
		h.RecordCall(calls[i%len(calls)])
	}
	b.ReportAllocs()
	for i := 0; b.Loop(); i++ {
		h.RecordCall(calls[i%len(calls)])
	}
}
