package main

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/metalambda/metalambda/internal/runtime"
	"github.com/metalambda/metalambda/internal/sandbox"
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
		{func(o *options) { o.sandboxMode = "chroot" }, `--sandbox: unknown sandbox mode "chroot"`},
	} {
		o := defaultOptions()
		tt.set(o)
		if err := o.validate(); err == nil || !strings.Contains(err.Error(), tt.want) {
			t.Errorf("validate() = %v, want an error about %q", err, tt.want)
		}
	}
}

func TestBuildSandbox(t *testing.T) {
	var rt runtime.Options
	if err := buildSandbox(&rt, sandbox.ModeAuto); err != nil || rt.Sandbox == nil || rt.Sandbox.Mode() != sandbox.ModeNamespaces {
		t.Fatalf("buildSandbox = %v (sandbox %v), want a namespace sandbox: the tests need bubblewrap", err, rt.Sandbox)
	}
	t.Setenv("PATH", t.TempDir())
	rt = runtime.Options{}
	err := buildSandbox(&rt, sandbox.ModeNamespaces)
	if err == nil || !strings.Contains(err.Error(), "bubblewrap (bwrap) not found") || !strings.Contains(err.Error(), "--insecure-no-sandbox") {
		t.Errorf("without bwrap: %v, want an error naming bubblewrap and --insecure-no-sandbox", err)
	}
	rt = runtime.Options{InsecureNoSandbox: true}
	if err := buildSandbox(&rt, sandbox.ModeNamespaces); err != nil || rt.Sandbox != nil {
		t.Errorf("--insecure-no-sandbox: %v (sandbox %v), want no sandbox and no error", err, rt.Sandbox)
	}
}
