package main

import (
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/metalambda/metalambda/internal/engine/hook"
)

// TestHookTokenFlags: --hook-token-file gives its token to the hook calls to the
// hosts --hook-token-host names; one without the other, a missing file or an empty
// token is refused naming the flag.
func TestHookTokenFlags(t *testing.T) {
	dir := t.TempDir()
	token, empty := filepath.Join(dir, "token"), filepath.Join(dir, "empty")
	if err := os.WriteFile(token, []byte("s3cret\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(empty, []byte("\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	o, _, err := parse(t, "--hook-token-file="+token, "--hook-token-host=gw.system", "--hook-token-host=127.0.0.1:8081")
	if err != nil {
		t.Fatal(err)
	}
	d, ok := o.engine.HookHTTP.(hook.TokenForHosts)
	if !ok || d.Token != "s3cret" || !slices.Equal(d.Hosts, []string{"gw.system", "127.0.0.1:8081"}) {
		t.Errorf("HookHTTP = %#v, want the token for both hosts", o.engine.HookHTTP)
	}
	if o, _, err := parse(t); err != nil || o.engine.HookHTTP != nil {
		t.Errorf("without the flags: %v, HookHTTP %v", err, o.engine.HookHTTP)
	}
	for _, tt := range []struct {
		args []string
		want string
	}{
		{[]string{"--hook-token-file=" + token}, "go together"},
		{[]string{"--hook-token-host=gw.system"}, "go together"},
		{[]string{"--hook-token-file=" + filepath.Join(dir, "missing"), "--hook-token-host=gw.system"}, "--hook-token-file"},
		{[]string{"--hook-token-file=" + empty, "--hook-token-host=gw.system"}, "is empty"},
		{[]string{"--hook-token-file=" + token, "--hook-token-host=http://gw.system/"}, "want host"},
	} {
		if _, _, err := parse(t, tt.args...); err == nil || !strings.Contains(err.Error(), tt.want) {
			t.Errorf("%v: %v, want an error containing %q", tt.args, err, tt.want)
		}
	}
}

// TestGatewayServiceFlags: --gateway-service routes the hook calls to that Service
// through hook.Sharded, after the hook token is set on them; a malformed value or
// an empty port name is refused naming the flag.
func TestGatewayServiceFlags(t *testing.T) {
	token := filepath.Join(t.TempDir(), "token")
	if err := os.WriteFile(token, []byte("s3cret\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	o, _, err := parse(t, "--hook-token-file="+token, "--hook-token-host=gw.system", "--gateway-service=system/gw")
	if err != nil {
		t.Fatal(err)
	}
	d, ok := o.engine.HookHTTP.(hook.TokenForHosts)
	if !ok {
		t.Fatalf("HookHTTP = %#v, want the token first", o.engine.HookHTTP)
	}
	if s, ok := d.Next.(hook.Sharded); !ok || s.Service != "gw.system" || s.Endpoints() != nil {
		t.Errorf("after the token: %#v, want the calls sharded over gw.system's endpoints (none known yet)", d.Next)
	}
	o, _, err = parse(t, "--gateway-service=system/gw")
	if s, ok := o.engine.HookHTTP.(hook.Sharded); err != nil || !ok || s.Service != "gw.system" {
		t.Errorf("without a token: %v, HookHTTP %#v", err, o.engine.HookHTTP)
	}
	for _, tt := range []struct {
		args []string
		want string
	}{
		{[]string{"--gateway-service=gw"}, "--gateway-service"},
		{[]string{"--gateway-service=/gw"}, "--gateway-service"},
		{[]string{"--gateway-service=system/gw/x"}, "--gateway-service"},
		{[]string{"--gateway-service=system/gw", "--gateway-hooks-port="}, "--gateway-hooks-port"},
	} {
		if _, _, err := parse(t, tt.args...); err == nil || !strings.Contains(err.Error(), tt.want) {
			t.Errorf("%v: %v, want an error containing %q", tt.args, err, tt.want)
		}
	}
}
