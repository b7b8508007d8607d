package gatewayapi

import (
	"encoding/json"
	"testing"
)

func TestParentOf(t *testing.T) {
	for req, want := range map[string]string{
		`{"parent": {"kind": "ConfigMap", "metadata": {"name": "b", "namespace": "default"}}}`: "ConfigMap default/b",
		`{"parent": {"kind": "Namespace", "metadata": {"name": "x"}}}`:                         "Namespace x",
		`{"object": {}}`: "",
		`not json`:       "",
	} {
		if got := parentOf(json.RawMessage(req)); got != want {
			t.Errorf("parentOf(%s) = %q, want %q", req, got, want)
		}
	}
}
