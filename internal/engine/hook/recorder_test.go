package hook

import (
	"context"
	"errors"
	"net/http"
	"sync"
	"testing"
	"time"
)

// callLog is a Recorder that keeps what it is told.
type callLog struct {
	mu    sync.Mutex
	calls []Call
}

func (l *callLog) RecordCall(c Call) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.calls = append(l.calls, c)
}

func TestRecorderSeesEveryCall(t *testing.T) {
	info := CallInfo{Controller: "web", ControllerType: "CompositeController", Hook: HookSync, Parent: ObjectKey{Kind: "App", Namespace: "ns", Name: "a"}, ParentAPIVersion: "example.com/v1", ParentUID: "u1"}
	log := &callLog{}
	c := &Client{Recorder: log}
	ok := serve(t, answer(http.StatusOK, `{"children":[]}`, "ETag", `"v1"`))
	ok.ETags = NewETagCache(time.Minute, time.Minute, 1<<20)
	failing := serve(t, answer(http.StatusInternalServerError, "boom"))
	refused := Endpoint{URL: "http://127.0.0.1:1/sync", Timeout: time.Second}

	var resp map[string]any
	before := time.Now()
	if err := c.Call(context.Background(), ok, info, map[string]any{"n": 1}, &resp); err != nil {
		t.Fatal(err)
	}
	notModified := serve(t, answer(http.StatusNotModified, ""))
	notModified.ETags = ok.ETags
	if err := c.Call(context.Background(), notModified, info, map[string]any{"n": 2}, &resp); err != nil {
		t.Fatal(err)
	}
	errFailing := c.Call(context.Background(), failing, info, map[string]any{"n": 3}, &resp)
	errRefused := c.Call(context.Background(), refused, info, map[string]any{"n": 4}, &resp)
	if errFailing == nil || errRefused == nil {
		t.Fatalf("errors %v, %v", errFailing, errRefused)
	}

	want := []struct {
		url      string
		status   int
		request  string
		response string
		err      error
	}{
		{ok.URL, 200, `{"n":1}`, `{"children":[]}`, nil},
		{notModified.URL, 304, `{"n":2}`, `{"children":[]}`, nil}, // the cached body reused
		{failing.URL, 500, `{"n":3}`, "", errFailing},
		{refused.URL, 0, `{"n":4}`, "", errRefused},
	}
	if len(log.calls) != len(want) {
		t.Fatalf("recorded %d calls, want %d", len(log.calls), len(want))
	}
	for i, w := range want {
		got := log.calls[i]
		if got.Info != info || got.URL != w.url || got.Status != w.status || string(got.Request) != w.request ||
			string(got.Response) != w.response || !errors.Is(got.Err, w.err) || got.Start.Before(before) || got.Duration <= 0 {
			t.Errorf("call %d: %+v, want %+v", i, got, w)
		}
	}
}
