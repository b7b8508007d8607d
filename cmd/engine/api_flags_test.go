package main

import (
	"strings"
	"testing"

	"github.com/metalambda/metalambda/internal/engine"
)

func TestAPIFlags(t *testing.T) {
	for _, tt := range []struct {
		args    []string
		address string
		history int
	}{
		{nil, "0", 0}, // off like upstream: no port, no history
		{[]string{"--api-address=:9095"}, ":9095", engine.DefaultHookCallHistory},
		{[]string{"--api-address=127.0.0.1:9095", "--hook-call-history=5"}, "127.0.0.1:9095", 5},
		{[]string{"--api-address=:9095", "--hook-call-history=0"}, ":9095", 0},
		{[]string{"--hook-call-history=50"}, "0", 0},
	} {
		o, _, err := parse(t, tt.args...)
		if err != nil {
			t.Errorf("%v: %v", tt.args, err)
			continue
		}
		if o.apiAddress != tt.address || o.engine.HookCallHistory != tt.history {
			t.Errorf("%v: address %q, history %d; want %q, %d", tt.args, o.apiAddress, o.engine.HookCallHistory, tt.address, tt.history)
		}
	}
	if _, _, err := parse(t, "--api-address=:9095", "--hook-call-history=-1"); err == nil || !strings.Contains(err.Error(), "--hook-call-history must not be negative") {
		t.Errorf("negative history: %v", err)
	}
}
