package main

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

func TestOptionsValidate(t *testing.T) {
	o := defaultOptions()
	if err := o.validate(); err != nil || o.gateway.PublicURL != "http://127.0.0.1:8081" {
		t.Fatalf("defaults: %v, public URL %q", err, o.gateway.PublicURL)
	}
	tokenFile := filepath.Join(t.TempDir(), "token")
	if err := os.WriteFile(tokenFile, []byte("s3cret\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	o = defaultOptions()
	o.hookTokenFile = tokenFile
	if err := o.validate(); err != nil || o.gateway.HookToken != "s3cret" {
		t.Fatalf("hook token file: %v, token %q", err, o.gateway.HookToken)
	}
	for _, tt := range []struct {
		set  func(*options)
		want string
	}{
		{func(o *options) { o.listen = "nowhere" }, "--listen"},
		{func(o *options) { o.hookTokenFile = filepath.Join(t.TempDir(), "missing") }, "--hook-token-file"},
		{func(o *options) { o.gateway.PublicURL = "gateway:8081" }, "public URL"},
	} {
		o := defaultOptions()
		tt.set(o)
		if err := o.validate(); err == nil || !strings.Contains(err.Error(), tt.want) {
			t.Errorf("validate() = %v, want an error about %q", err, tt.want)
		}
	}
}
