package functions

import (
	"context"
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/metalambda/metalambda/functions/pythonlambda"
	"github.com/metalambda/metalambda/internal/hookapi"
)

func TestBuiltinsNames(t *testing.T) {
	want := []string{"immortalcontainer", "pythonlambda", "pythonlambda-customize"}
	if diff := cmp.Diff(want, Builtins().Names()); diff != "" {
		t.Errorf("names (-want +got):\n%s", diff)
	}
}

// TestBuiltinsGolden calls each builtin with a golden request of its package and
// compares the answer with the golden response (cases whose response does not
// depend on the clock).
func TestBuiltinsGolden(t *testing.T) {
	tests := []struct{ function, testdata string }{
		{"pythonlambda", "pythonlambda/testdata/steady"},
		{"pythonlambda", "pythonlambda/testdata/scale-down"},
		{"immortalcontainer", "immortalcontainer/testdata/one-pod"},
		{"immortalcontainer", "immortalcontainer/testdata/two-pods"},
	}
	for _, tt := range tests {
		t.Run(filepath.Base(tt.testdata), func(t *testing.T) {
			got, err := Builtins()[tt.function](context.Background(), read(t, tt.testdata+".request.json"))
			if err != nil {
				t.Fatal(err)
			}
			var gotV, wantV any
			if err := json.Unmarshal(got, &gotV); err != nil {
				t.Fatal(err)
			}
			if err := json.Unmarshal(read(t, tt.testdata+".response.json"), &wantV); err != nil {
				t.Fatal(err)
			}
			if diff := cmp.Diff(wantV, gotV); diff != "" {
				t.Errorf("response (-want +got):\n%s", diff)
			}
		})
	}
}

func TestBuiltinsErrors(t *testing.T) {
	tests := []struct {
		name, function, request, want string
		is                            error
	}{
		{"not JSON of a request", "pythonlambda", `{"parent": []}`, "pythonlambda: decode the CompositeRequest", nil},
		{"invalid lambda", "pythonlambda", `{"parent": {"metadata": {"name": "a"}, "spec": {"code": ""}}}`, "pythonlambda: invalid PythonLambda", pythonlambda.ErrInvalidParent},
		{"invalid immortal", "immortalcontainer", `{"parent": {"metadata": {"name": "a"}, "spec": {}}}`, "immortalcontainer: invalid ImmortalContainer", nil},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			resp, err := Builtins()[tt.function](context.Background(), json.RawMessage(tt.request))
			if err == nil || !strings.HasPrefix(err.Error(), tt.want) || tt.is != nil && !errors.Is(err, tt.is) {
				t.Fatalf("call = %s, %v; want an error starting %q", resp, err, tt.want)
			}
		})
	}
}

// TestComposite checks the adapter alone, with a sync function that echoes.
func TestComposite(t *testing.T) {
	echo := Composite("echo", func(req *hookapi.CompositeRequest) (*hookapi.CompositeResponse, error) {
		return &hookapi.CompositeResponse{Status: req.Parent["spec"].(map[string]any), Finalized: req.Finalizing}, nil
	})
	got, err := echo(context.Background(), json.RawMessage(`{"parent": {"spec": {"a": 1}}, "finalizing": true}`))
	if err != nil {
		t.Fatal(err)
	}
	want := `{"status":{"a":1},"children":null,"resyncAfterSeconds":0,"finalized":true}`
	if string(got) != want {
		t.Errorf("echo = %s, want %s", got, want)
	}
}

func read(t *testing.T, path string) []byte {
	t.Helper()
	body, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	return body
}
