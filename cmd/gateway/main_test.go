package main

import (
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/metalambda/metalambda/internal/gateway/egress"
	"github.com/metalambda/metalambda/internal/gateway/lambda"
	"github.com/metalambda/metalambda/internal/gateway/sandbox"
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
	o = defaultOptions()
	fs := flag.NewFlagSet("gateway", flag.ContinueOnError)
	o.bindFlags(fs)
	if err := fs.Parse([]string{"--trace-url-template=http://jaeger:16686/trace/{traceID}"}); err != nil || o.validate() != nil || o.gateway.Dashboard.TraceURLTemplate != "http://jaeger:16686/trace/{traceID}" {
		t.Fatalf("--trace-url-template: %v, %q", err, o.gateway.Dashboard.TraceURLTemplate)
	}
	if err := fs.Parse([]string{"--secure-cookies", "--max-functions-per-namespace=7", "--max-calls-per-namespace=9", "--worker-memory-budget=1536Mi"}); err != nil || o.validate() != nil {
		t.Fatalf("flags: %v", err)
	}
	if got := o.gateway.Runtime.MemoryBudget.Limit(); got != 1536<<20 {
		t.Errorf("--worker-memory-budget=1536Mi: %d bytes", got)
	}
	if !o.gateway.Dashboard.SecureCookies || o.gateway.MaxFunctionsPerNamespace != 7 || o.gateway.MaxCallsPerNamespace != 9 {
		t.Errorf("--secure-cookies %v, --max-functions-per-namespace %d, --max-calls-per-namespace %d", o.gateway.Dashboard.SecureCookies, o.gateway.MaxFunctionsPerNamespace, o.gateway.MaxCallsPerNamespace)
	}
	o = defaultOptions()
	o.memoryBudget = "0"
	if err := o.validate(); err != nil || o.gateway.Runtime.MemoryBudget != nil {
		t.Errorf("--worker-memory-budget=0: %v, budget %v", err, o.gateway.Runtime.MemoryBudget)
	}
	o = defaultOptions()
	o.listen, o.hooksListen = ":8081", ":8082"
	if err := o.validate(); err != nil || !o.gateway.SeparateHooks || o.gateway.PublicURL != "http://:8082" {
		t.Fatalf("hooks address: %v, separate %v, public URL %q", err, o.gateway.SeparateHooks, o.gateway.PublicURL)
	}
	o = defaultOptions()
	fs = flag.NewFlagSet("gateway", flag.ContinueOnError)
	o.bindFlags(fs)
	if err := fs.Parse([]string{"--egress-deny=127.0.0.1:2379, :2380", "--egress-deny=10.0.0.9:6443", "--hooks-listen=:8082"}); err != nil {
		t.Fatal(err)
	}
	if err := o.validate(); err != nil {
		t.Fatal(err)
	}
	wantDeny := []egress.Destination{
		{Address: "127.0.0.1:2379", What: "127.0.0.1:2379 (--egress-deny)"},
		{Address: ":2380", What: ":2380 (--egress-deny)"},
		{Address: "10.0.0.9:6443", What: "10.0.0.9:6443 (--egress-deny)"},
		{Address: "127.0.0.1:8081", What: "the gateway's API"},
		{Address: ":8082", What: "the gateway's hooks"},
	}
	if diff := cmp.Diff(wantDeny, o.gateway.EgressDeny); diff != "" {
		t.Errorf("denied destinations (-want +got):\n%s", diff)
	}
	if err := fs.Parse([]string{"--trusted-proxies=10.1.0.0/16, 192.0.2.7", "--trusted-proxies=2001:db8::1"}); err != nil {
		t.Fatal(err)
	}
	if got := fmt.Sprint(o.gateway.TrustedProxies); got != "[10.1.0.0/16 192.0.2.7/32 2001:db8::1/128]" {
		t.Errorf("trusted proxies %s", got)
	}
	if err := fs.Parse([]string{"--trusted-proxies=proxy.example"}); err == nil {
		t.Error("--trusted-proxies took a name")
	}
	for _, tt := range []struct {
		set  func(*options)
		want string
	}{
		{func(o *options) { o.egressDeny = []string{"etcd"} }, "--egress-deny \"etcd\""},
		{func(o *options) { o.listen = "nowhere" }, "--listen"},
		{func(o *options) { o.hooksListen = "nowhere" }, "--hooks-listen"},
		{func(o *options) { o.hooksListen = o.listen }, "--hooks-listen and --listen"},
		{func(o *options) { o.hookTokenFile = filepath.Join(t.TempDir(), "missing") }, "--hook-token-file"},
		{func(o *options) { o.gateway.PublicURL = "gateway:8081" }, "public URL"},
		{func(o *options) { o.sandboxMode = "chroot" }, `--sandbox: unknown sandbox mode "chroot"`},
		{func(o *options) { o.memoryBudget = "lots" }, `--worker-memory-budget "lots"`},
		{func(o *options) { o.memoryBudget = "-1Gi" }, `--worker-memory-budget "-1Gi"`},
		{func(o *options) { o.gateway.Dashboard.TraceURLTemplate = "http://jaeger:16686/trace/" }, "--trace-url-template: trace URL template \"http://jaeger:16686/trace/\" has no {traceID}"},
	} {
		o := defaultOptions()
		tt.set(o)
		if err := o.validate(); err == nil || !strings.Contains(err.Error(), tt.want) {
			t.Errorf("validate() = %v, want an error about %q", err, tt.want)
		}
	}
}

func TestBuildSandbox(t *testing.T) {
	var rt lambda.Options
	sb, err := buildSandbox(&rt, sandbox.ModeAuto)
	if err != nil || rt.Sandbox == nil || rt.Sandbox.Mode() != sandbox.ModeNamespaces || sb != rt.Sandbox {
		t.Fatalf("buildSandbox = %v (sandbox %v), want a namespace sandbox: the tests need bubblewrap", err, rt.Sandbox)
	}
	sb.Close()
	t.Setenv("PATH", t.TempDir())
	rt = lambda.Options{}
	_, err = buildSandbox(&rt, sandbox.ModeNamespaces)
	if err == nil || !strings.Contains(err.Error(), "bubblewrap (bwrap) not found") || !strings.Contains(err.Error(), "--insecure-no-sandbox") {
		t.Errorf("without bwrap: %v, want an error naming bubblewrap and --insecure-no-sandbox", err)
	}
	rt = lambda.Options{InsecureNoSandbox: true}
	if sb, err := buildSandbox(&rt, sandbox.ModeNamespaces); err != nil || rt.Sandbox != nil || sb != nil {
		t.Errorf("--insecure-no-sandbox: %v (sandbox %v), want no sandbox and no error", err, rt.Sandbox)
	}
}

// restrictedChildEnv marks the child of TestBuildSandboxRestricted.
const restrictedChildEnv = "METALAMBDA_TEST_RESTRICTED_CHILD"

// childUser is the user the restricted child runs as, a gateway that is not
// root; no other package's tests run as it (RLIMIT_NPROC counts a user's tasks
// on the whole host).
const childUser = 65533

// TestBuildSandboxRestricted starts this test binary again as nobody under a
// seccomp filter that refuses user namespaces, as a restricted container's
// RuntimeDefault profile does: there the default sandbox is Landlock; and, with
// Landlock refused too, the gateway refuses naming both mechanisms.
func TestBuildSandboxRestricted(t *testing.T) {
	if os.Getenv(restrictedChildEnv) != "" {
		t.Skip("in a child already")
	}
	if os.Geteuid() != 0 {
		t.Skip("starting the child as nobody needs root")
	}
	dir, err := os.MkdirTemp("/tmp", "metalambda-gateway-test-")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = os.RemoveAll(dir) })
	if err := os.Chown(dir, childUser, childUser); err != nil {
		t.Fatal(err)
	}
	exe, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	data, err := os.ReadFile(exe)
	if err != nil {
		t.Fatal(err)
	}
	copied := filepath.Join(dir, "gateway.test")
	if err := os.WriteFile(copied, data, 0o755); err != nil {
		t.Fatal(err)
	}
	for _, child := range []string{"landlock", "none"} {
		t.Run(child, func(t *testing.T) {
			cmd, err := sandbox.RestrictedCommand([]string{copied, "-test.run=^TestBuildSandboxInRestrictedChild$", "-test.count=1", "-test.v"}, childUser, child == "none")
			if err != nil {
				t.Fatal(err)
			}
			cmd.Env = []string{restrictedChildEnv + "=" + child, "PATH=/usr/bin:/bin", "TMPDIR=" + dir}
			var out strings.Builder
			cmd.Stdout, cmd.Stderr = &out, &out
			if err := cmd.Start(); err != nil {
				t.Fatal(err)
			}
			err = cmd.Wait()
			t.Logf("the child:\n%s", out.String())
			if err != nil || !strings.Contains(out.String(), "--- PASS: TestBuildSandboxInRestrictedChild") {
				t.Fatalf("the child failed: %v", err)
			}
		})
	}
}

func TestBuildSandboxInRestrictedChild(t *testing.T) {
	child := os.Getenv(restrictedChildEnv)
	if child == "" {
		t.Skip("runs in the child of TestBuildSandboxRestricted")
	}
	var rt lambda.Options
	sb, err := buildSandbox(&rt, sandbox.ModeAuto)
	if child == "none" {
		for _, want := range []string{"cannot sandbox user code (--insecure-no-sandbox", "neither mechanism works here", "namespaces: bubblewrap cannot build a sandbox here", "Landlock: the kernel has no Landlock"} {
			if err == nil || !strings.Contains(err.Error(), want) {
				t.Errorf("buildSandbox(auto) = %v, want an error containing %q", err, want)
			}
		}
		return
	}
	if err != nil || rt.Sandbox.Mode() != sandbox.ModeLandlock {
		t.Fatalf("buildSandbox(auto) = %v (sandbox %v), want a Landlock sandbox", err, rt.Sandbox)
	}
	defer sb.Close()
	if _, err := buildSandbox(&lambda.Options{}, sandbox.ModeNamespaces); err == nil || !strings.Contains(err.Error(), "bubblewrap cannot build a sandbox here") {
		t.Errorf("buildSandbox(namespaces) = %v, want bubblewrap's failure", err)
	}
	c, err := lambda.NewPython(rt).Compile(lambda.Function{Name: "test/echo", Runtime: lambda.Python, Source: "def sync(request):\n    return {\"status\": request}\n"})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	res, err := c.Invoke(context.Background(), json.RawMessage(`{"x": 1}`))
	if err != nil || string(res.Response) != `{"status":{"x":1}}` {
		t.Errorf("a function in the Landlock sandbox: %s, %v", res.Response, err)
	}
}
