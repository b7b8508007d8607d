package gatewayapi

import (
	"context"
	"encoding/json"
	"errors"
	"net/http"
	"testing"

	"github.com/go-chi/chi/v5"
	"github.com/google/go-cmp/cmp"

	"github.com/metalambda/metalambda/internal/httpapi"
)

// TestClientThroughALoopback: the client reaches a handler over the loopback with
// its token and the client address its context names, decodes the typed answer,
// and reads an error answer back as the *httpapi.Error it was.
func TestClientThroughALoopback(t *testing.T) {
	api := chi.NewRouter()
	api.Get("/v1/namespaces/{namespace}/functions/{name}/invocations", func(w http.ResponseWriter, r *http.Request) {
		if r.Header.Get("Authorization") != "Bearer t" || r.RemoteAddr != "192.0.2.1:1234" {
			httpapi.WriteError(w, httpapi.NewError(http.StatusUnauthorized, "unauthorized", "token "+r.Header.Get("Authorization")+" from "+r.RemoteAddr))
			return
		}
		httpapi.WriteJSON(w, http.StatusOK, InvocationList{Enabled: true, Items: []Invocation{{Source: "hook", Status: 200, Request: json.RawMessage(`{"a":1}`)}}})
	})
	api.Post("/v1/namespaces/{namespace}/functions/{name}/invoke", func(w http.ResponseWriter, _ *http.Request) {
		httpapi.WriteError(w, &httpapi.Error{Status: http.StatusInternalServerError, Code: "function_failed", Message: "boom", Logs: "log"})
	})
	lb := NewLoopback(api)
	defer lb.Close()
	c := &Client{BaseURL: BaseURL, Token: "t", HTTP: lb.Client()}
	ctx := WithClientAddress(context.Background(), "192.0.2.1:1234")

	list, err := c.Invocations(ctx, "ns", "f")
	if err != nil {
		t.Fatal(err)
	}
	want := &InvocationList{Enabled: true, Items: []Invocation{{Source: "hook", Status: 200, Request: json.RawMessage(`{"a":1}`)}}}
	if diff := cmp.Diff(want, list); diff != "" {
		t.Errorf("invocations (-want +got):\n%s", diff)
	}
	_, err = c.Invoke(ctx, "ns", "f", json.RawMessage(`{}`))
	var ae *httpapi.Error
	if !errors.As(err, &ae) || ae.Status != http.StatusInternalServerError || ae.Code != "function_failed" || ae.Logs != "log" {
		t.Errorf("invoke: %#v, want the 500 function_failed with its logs", err)
	}
}
