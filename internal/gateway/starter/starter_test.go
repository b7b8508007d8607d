package starter

import (
	"encoding/json"
	"strings"
	"testing"
)

func TestEveryRuntimeHasAStarter(t *testing.T) {
	for _, rt := range Runtimes() {
		hook, err := Hook(rt)
		if err != nil || !strings.Contains(string(hook), "ConfigMap") {
			t.Errorf("%s: %v %.80q", rt, err, hook)
		}
		if !strings.Contains(string(hook), "events") || !strings.Contains(string(hook), "CreatingConfigMap") {
			t.Errorf("%s: the starter does not show how to answer an event", rt)
		}
	}
	if _, err := Hook("cobol"); err == nil || !strings.Contains(err.Error(), `"cobol"`) {
		t.Errorf("an unknown runtime: %v", err)
	}
	var req map[string]any
	if err := json.Unmarshal(SampleRequest(), &req); err != nil || req["parent"] == nil {
		t.Errorf("the sample request is not a sync request: %v %v", err, req)
	}
}
