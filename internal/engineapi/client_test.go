package engineapi

import (
	"context"
	"encoding/json"
	"errors"
	"net/http"
	"net/http/httptest"
	"testing"

	"github.com/google/go-cmp/cmp"
)

func TestClientSendsTokenAndQuery(t *testing.T) {
	var gotPath, gotQuery, gotAuth string
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		gotPath, gotQuery, gotAuth = r.URL.EscapedPath(), r.URL.RawQuery, r.Header.Get("Authorization")
		w.Header().Set("Content-Type", "application/json")
		_, _ = w.Write([]byte(`{"items":[{"id":7,"hook":"sync","controller":{"kind":"CompositeController","name":"web"}}],"latestId":9,"historyEnabled":true}`))
	}))
	defer srv.Close()
	c := &Client{BaseURL: srv.URL + "/"}
	got, err := c.HookCalls(context.Background(), "tok", HookCallQuery{Controller: "CompositeController/web", Namespace: "ns", Parent: "p", Since: 3, Limit: 10})
	if err != nil {
		t.Fatal(err)
	}
	want := &HookCallList{Items: []HookCall{{ID: 7, Hook: HookSync, Controller: ControllerRef{Kind: KindComposite, Name: "web"}}}, LatestID: 9, HistoryEnabled: true}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("HookCalls (-want +got):\n%s", diff)
	}
	if gotPath != "/api/v1/hookcalls" || gotAuth != "Bearer tok" {
		t.Errorf("path %q auth %q", gotPath, gotAuth)
	}
	if gotQuery != "controller=CompositeController%2Fweb&limit=10&namespace=ns&parent=p&since=3" {
		t.Errorf("query %q", gotQuery)
	}

	if _, err := c.Parent(context.Background(), "tok", KindDecorator, "d", "", "node-1"); err != nil {
		t.Fatal(err)
	}
	if gotPath != "/api/v1/parents/DecoratorController/d/-/node-1" {
		t.Errorf("cluster-scoped parent path %q", gotPath)
	}
}

func TestClientTypedErrors(t *testing.T) {
	for _, tt := range []struct {
		status int
		body   string
		is     error
		code   string
	}{
		{401, `{"error":"unauthorized","message":"no bearer token"}`, ErrUnauthorized, "unauthorized"},
		{403, `{"error":"forbidden","message":"no"}`, ErrForbidden, "forbidden"},
		{404, `{"error":"not_found","message":"no such parent"}`, ErrNotFound, "not_found"},
		{404, `404 page not found`, ErrNotFound, "not_found"},
	} {
		srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
			w.WriteHeader(tt.status)
			_, _ = w.Write([]byte(tt.body))
		}))
		_, err := (&Client{BaseURL: srv.URL}).Controllers(context.Background(), "tok")
		srv.Close()
		var e *Error
		if !errors.Is(err, tt.is) || !errors.As(err, &e) || e.Code != tt.code || e.Message == "" {
			t.Errorf("status %d: got %v, want %v with code %q", tt.status, err, tt.is, tt.code)
		}
		if errors.Is(err, ErrForbidden) && tt.is != ErrForbidden {
			t.Errorf("status %d matches ErrForbidden", tt.status)
		}
	}
}

func TestClientSync(t *testing.T) {
	var gotMethod, gotPath, gotType string
	var gotBody SyncRequest
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		gotMethod, gotPath, gotType = r.Method, r.URL.EscapedPath(), r.Header.Get("Content-Type")
		_ = json.NewDecoder(r.Body).Decode(&gotBody)
		_, _ = w.Write([]byte(`{"controller":{"kind":"CompositeController","name":"web"},"queued":1,"parents":[{"apiVersion":"v1","kind":"App","namespace":"ns","name":"p"}]}`))
	}))
	defer srv.Close()
	c := &Client{BaseURL: srv.URL}
	got, err := c.Sync(context.Background(), "tok", KindComposite, "web", SyncRequest{Namespace: "ns", Name: "p"})
	if err != nil {
		t.Fatal(err)
	}
	want := &SyncResult{Controller: ControllerRef{Kind: KindComposite, Name: "web"}, Queued: 1, Parents: []QueuedParent{{ObjectRef: ObjectRef{APIVersion: "v1", Kind: "App", Namespace: "ns", Name: "p"}}}}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("Sync (-want +got):\n%s", diff)
	}
	if gotMethod != http.MethodPost || gotPath != "/api/v1/controllers/CompositeController/web/sync" || gotType != "application/json" || gotBody != (SyncRequest{Namespace: "ns", Name: "p"}) {
		t.Errorf("sent %s %s (%s) %+v", gotMethod, gotPath, gotType, gotBody)
	}
}
