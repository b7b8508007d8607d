// Package golden keeps the hook functions' golden request and response JSON in
// testdata/: tests compare against the files, and `go test -update` rewrites them.
package golden

import (
	"bytes"
	"encoding/json"
	"flag"
	"os"
	"path/filepath"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/metalambda/metalambda/internal/hookapi"
)

var update = flag.Bool("update", false, "rewrite the golden files in testdata/")

// Request compares req, as JSON, with testdata/file (rewriting it under -update) and
// returns the request decoded from the file, as the engine's JSON would be.
func Request(t *testing.T, file string, req *hookapi.CompositeRequest) *hookapi.CompositeRequest {
	t.Helper()
	Compare(t, file, req)
	body, err := os.ReadFile(filepath.Join("testdata", file))
	if err != nil {
		t.Fatal(err)
	}
	var out hookapi.CompositeRequest
	if err := json.Unmarshal(body, &out); err != nil {
		t.Fatal(err)
	}
	return &out
}

// Compare checks v, as indented JSON, against testdata/file.
func Compare(t *testing.T, file string, v any) {
	t.Helper()
	got, err := json.MarshalIndent(v, "", "  ")
	if err != nil {
		t.Fatal(err)
	}
	got = append(got, '\n')
	path := filepath.Join("testdata", file)
	if *update {
		if err := os.WriteFile(path, got, 0o644); err != nil {
			t.Fatal(err)
		}
		return
	}
	want, err := os.ReadFile(path)
	if err != nil {
		t.Fatalf("%v (run go test -update to write it)", err)
	}
	if !bytes.Equal(want, got) {
		t.Errorf("%s differs (-want +got; run go test -update to accept):\n%s", path, cmp.Diff(string(want), string(got)))
	}
}
