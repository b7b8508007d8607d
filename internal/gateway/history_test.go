package gateway

import (
	"encoding/json"
	"net/http"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/metalambda/metalambda/internal/gateway/lambda"
)

// TestHistoryRedactsSecrets: Secret data and authorization values never reach the
// history, wherever they sit in a hook request or response; other data stays.
func TestHistoryRedactsSecrets(t *testing.T) {
	secret := func(name string) map[string]any {
		return map[string]any{"apiVersion": "v1", "kind": "Secret", "metadata": map[string]any{"name": name},
			"data": map[string]any{"password": "c2VjcmV0"}, "stringData": map[string]any{"token": "plain-secret"}}
	}
	redactedSecret := func(name string) map[string]any {
		return map[string]any{"apiVersion": "v1", "kind": "Secret", "metadata": map[string]any{"name": name},
			"data": map[string]any{"password": redacted}, "stringData": map[string]any{"token": redacted}}
	}
	configMap := map[string]any{"apiVersion": "v1", "kind": "ConfigMap", "metadata": map[string]any{"name": "cm"}, "data": map[string]any{"k": "visible"}}
	request := map[string]any{
		"parent":      secret("parent"),
		"children":    map[string]any{"Secret.v1": map[string]any{"child": secret("child")}, "ConfigMap.v1": map[string]any{"cm": configMap}},
		"related":     map[string]any{"Secret.v1": map[string]any{"rel": secret("rel")}},
		"attachments": map[string]any{"Secret.v1": map[string]any{"att": secret("att")}},
		"headers":     map[string]any{"Authorization": "Bearer t0ken", "authorization": []any{"Bearer t0ken"}},
		"hook":        map[string]any{"authorization": map[string]any{"secretRef": map[string]any{"name": "kept"}}},
	}
	wantRequest := map[string]any{
		"parent":      redactedSecret("parent"),
		"children":    map[string]any{"Secret.v1": map[string]any{"child": redactedSecret("child")}, "ConfigMap.v1": map[string]any{"cm": configMap}},
		"related":     map[string]any{"Secret.v1": map[string]any{"rel": redactedSecret("rel")}},
		"attachments": map[string]any{"Secret.v1": map[string]any{"att": redactedSecret("att")}},
		"headers":     map[string]any{"Authorization": redacted, "authorization": redacted},
		"hook":        map[string]any{"authorization": map[string]any{"secretRef": map[string]any{"name": "kept"}}},
	}
	response := map[string]any{"children": []any{secret("out"), configMap, map[string]any{"kind": "Secret", "data": "not-a-map"}}}
	wantResponse := map[string]any{"children": []any{redactedSecret("out"), configMap, map[string]any{"kind": "Secret", "data": redacted}}}

	h := newHistory(2)
	header := http.Header{"Authorization": {"Bearer hook-token"}, "Cookie": {"session=1"}, "Content-Type": {"application/json"}}
	h.add(Invocation{Request: mustJSON(t, request), Response: mustJSON(t, response), Headers: recordedHeaders(header)})
	got := h.list()[0]
	if diff := cmp.Diff(wantRequest, fromJSON(t, got.Request)); diff != "" {
		t.Errorf("recorded request (-want +got):\n%s", diff)
	}
	if diff := cmp.Diff(wantResponse, fromJSON(t, got.Response)); diff != "" {
		t.Errorf("recorded response (-want +got):\n%s", diff)
	}
	wantHeaders := map[string]string{"Authorization": redacted, "Cookie": redacted, "Content-Type": "application/json"}
	if diff := cmp.Diff(wantHeaders, got.Headers); diff != "" {
		t.Errorf("recorded headers (-want +got):\n%s", diff)
	}
	for _, leaked := range []string{"c2VjcmV0", "plain-secret", "t0ken", "hook-token"} {
		if all, _ := json.Marshal(h.list()); strings.Contains(string(all), leaked) {
			t.Errorf("the history holds %q", leaked)
		}
	}
	// An escaped kind is still seen; a body with nothing secret is kept byte for byte.
	escaped := json.RawMessage(`{"kind":"\u0053ecret","data":{"k":"v"}}`)
	if got := string(redactJSON(escaped)); got != `{"data":{"k":"[redacted]"},"kind":"Secret"}` {
		t.Errorf("escaped Secret = %s", got)
	}
	plain := json.RawMessage(`{"kind": "ConfigMap",  "data": {"k": "v"}}`)
	if got := string(redactJSON(plain)); got != string(plain) {
		t.Errorf("a body without secrets was rewritten: %s", got)
	}
}

// TestHistoryCanBeTurnedOff: a disabled history records nothing and forgets the past.
func TestHistoryCanBeTurnedOff(t *testing.T) {
	h := newHistory(3)
	h.add(Invocation{Status: 200})
	h.setEnabled(false)
	h.add(Invocation{Status: 201})
	if got := h.list(); len(got) != 0 || h.enabled() {
		t.Errorf("disabled history holds %v (enabled %v)", got, h.enabled())
	}
	h.setEnabled(true)
	h.add(Invocation{Status: 202})
	if got := h.list(); len(got) != 1 || got[0].Status != 202 {
		t.Errorf("re-enabled history holds %v", got)
	}
}

func mustJSON(t *testing.T, v any) json.RawMessage {
	t.Helper()
	data, err := json.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	return data
}

func fromJSON(t *testing.T, raw json.RawMessage) any {
	t.Helper()
	var v any
	if err := json.Unmarshal(raw, &v); err != nil {
		t.Fatalf("%v: %s", err, raw)
	}
	return v
}

// TestHistoryBoundsLogsAndErrors: a record keeps at most the logs and the error
// message a runtime would report, whatever it was given.
func TestHistoryBoundsLogsAndErrors(t *testing.T) {
	h := newHistory(2)
	h.add(Invocation{Logs: strings.Repeat("L", 1<<20), Error: strings.Repeat("e", 1<<20)})
	got := h.list()[0]
	if len(got.Logs) > lambda.MaxLogBytes+64 || len(got.Error) > lambda.MaxErrorBytes+64 {
		t.Errorf("kept %d bytes of logs and %d of error, want at most %d and %d", len(got.Logs), len(got.Error), lambda.MaxLogBytes, lambda.MaxErrorBytes)
	}
}
