package main

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	fnv1 "github.com/metalambda/metalambda/internal/apis/metalambda/v1alpha1"
	"github.com/metalambda/metalambda/internal/engineapi"
	"github.com/metalambda/metalambda/internal/gatewayapi"
	"github.com/metalambda/metalambda/internal/httpapi"
)

func runCLI(t *testing.T, stdin string, args ...string) (string, string, int) {
	t.Helper()
	var out, errOut bytes.Buffer
	code := execute(args, streams{in: strings.NewReader(stdin), out: &out, err: &errOut})
	return out.String(), errOut.String(), code
}

func TestExitCodesOfTheCommandLine(t *testing.T) {
	for _, tc := range []struct {
		args   []string
		code   int
		stderr string
	}{
		{nil, exitUsage, "Available Commands:"},
		{[]string{"nope"}, exitUsage, `unknown command "nope" for "metalambda"`},
		{[]string{"fn"}, exitUsage, "Available Commands:"},
		{[]string{"fn", "nope"}, exitUsage, `unknown command "nope" for "metalambda fn"`},
		{[]string{"fn", "get"}, exitUsage, "takes 1 argument(s), NAME; got 0"},
		{[]string{"fn", "list", "--nope"}, exitUsage, "unknown flag: --nope"},
		{[]string{"fn", "apply"}, exitUsage, `required flag(s) "filename" not set`},
		{[]string{"fn", "apply", "-f", "hook.txt"}, exitUsage, "cannot tell the runtime of hook.txt from its extension"},
		{[]string{"fn", "apply", "-f", "-", "--runtime", "python"}, exitUsage, "--name is required when the source comes from stdin"},
		{[]string{"fn", "apply", "-f", "hook.py", "--timeout", "1500ms"}, exitUsage, "--timeout 1.5s: want whole seconds from 1s to 300s"},
		{[]string{"fn", "apply", "-f", "hook.py", "--env", "NOVALUE"}, exitUsage, `--env "NOVALUE": want KEY=VALUE`},
		{[]string{"fn", "invoke", "x"}, exitUsage, `required flag(s) "data" not set`},
		{[]string{"fn", "invoke", "x", "-d", "{"}, exitUsage, "the request is not JSON"},
		{[]string{"fn", "init", "x", "--runtime", "ruby"}, exitUsage, `--runtime "ruby": want javascript, python or jsonnet`},
		{[]string{"fn", "init", "Not_A_Name", "--runtime", "python"}, exitUsage, `function name "Not_A_Name"`},
		{[]string{"fn", "get", "x", "--as", "someone", "--gateway", "http://127.0.0.1:1", "--server", "https://127.0.0.1:2", "--token", "t"}, exitError, "--as, --as-group and --as-uid cannot be used"},
		{[]string{"fn", "get", "x", "--gateway", "127.0.0.1:8081", "--server", "https://127.0.0.1:2", "--token", "t"}, exitError, `gateway URL "127.0.0.1:8081" (--gateway) is not an http:// or https:// URL`},
		{[]string{"sync"}, exitUsage, "name a controller"},
		{[]string{"sync", "web"}, exitUsage, "name one parent"},
		{[]string{"sync", "web", "ns/p", "--all"}, exitUsage, "name one parent"},
		{[]string{"sync", "web", "ns/p", "extra"}, exitUsage, "at most one parent"},
		{[]string{"sync", "job/web", "--all"}, exitUsage, "KIND must be compositecontroller (cc), decoratorcontroller (dec), namespacedcompositecontroller (ncc) or namespaceddecoratorcontroller (ndc)"},
		{[]string{"sync", "web", "--all", "--engine", "127.0.0.1:9095", "--server", "https://127.0.0.1:2", "--token", "t"}, exitError, `engine API URL "127.0.0.1:9095" (--engine) is not an http:// or https:// URL`},
		{[]string{"sync", "web", "--all", "--engine", "http://127.0.0.1:1", "--server", "https://127.0.0.1:2", "--token", "t"}, exitError, "cannot reach the engine API at http://127.0.0.1:1 (--engine)"},
	} {
		_, stderr, code := runCLI(t, "", tc.args...)
		if code != tc.code || !strings.Contains(stderr, tc.stderr) {
			t.Errorf("metalambda %s: exit %d, stderr %q; want %d and %q", strings.Join(tc.args, " "), code, stderr, tc.code, tc.stderr)
		}
	}
}

// up and down keep their own flag parsing and output.
func TestDownIsWrappedUnchanged(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "data")
	if err := os.Mkdir(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	// down prints on the process's stdout, as it always has.
	_, stderr, code := runCLI(t, "", "down", "--data-dir", dir, "--purge")
	if code != exitOK || stderr != "" {
		t.Fatalf("down: exit %d, stderr %q", code, stderr)
	}
	if _, err := os.Stat(dir); !os.IsNotExist(err) {
		t.Errorf("down --purge left %s: %v", dir, err)
	}
}

func TestCompletionScripts(t *testing.T) {
	for _, shell := range []string{"bash", "zsh", "fish"} {
		out, stderr, code := runCLI(t, "", "completion", shell)
		if code != exitOK || !strings.Contains(out, "metalambda") {
			t.Errorf("completion %s: exit %d, %d bytes, stderr %q", shell, code, len(out), stderr)
		}
	}
	out, _, _ := runCLI(t, "", "__complete", "fn", "init", "x", "--runtime", "")
	if !strings.Contains(out, "javascript\npython\njsonnet\n") {
		t.Errorf("--runtime completes to %q", out)
	}
}

func TestInitWritesStarterFiles(t *testing.T) {
	dir := t.TempDir()
	out, stderr, code := runCLI(t, "", "fn", "init", "hello", "--runtime", "jsonnet", "--dir", dir)
	if code != exitOK {
		t.Fatalf("exit %d: %s", code, stderr)
	}
	hook, sample := filepath.Join(dir, "hello.jsonnet"), filepath.Join(dir, "sample-request.json")
	want := "wrote " + hook + " and " + sample + "; next:\n  metalambda fn apply -f " + hook + "\n  metalambda fn invoke hello -d @" + sample + "\n"
	if diff := cmp.Diff(want, out); diff != "" {
		t.Errorf("init printed (-want +got):\n%s", diff)
	}
	data, err := os.ReadFile(sample)
	if err != nil || !json.Valid(data) {
		t.Errorf("%s is not JSON: %v", sample, err)
	}
	if _, stderr, code := runCLI(t, "", "fn", "init", "hello", "--runtime", "jsonnet", "--dir", dir); code != exitError || !strings.Contains(stderr, hook+" exists") {
		t.Errorf("init over an existing hook: exit %d, %q", code, stderr)
	}
	if _, stderr, code := runCLI(t, "", "fn", "init", "hello", "--runtime", "jsonnet", "--dir", dir, "--force"); code != exitOK {
		t.Errorf("init --force: exit %d, %q", code, stderr)
	}
}

func TestApplySpec(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "my-hook.py")
	if err := os.WriteFile(path, []byte("def sync(r): return {}\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	o := applyOptions{file: path, timeout: 30 * time.Second, env: []string{"A=1", "B=x=y"}, handler: "go"}
	spec, name, err := o.spec(nil)
	if err != nil {
		t.Fatal(err)
	}
	want := gatewayapi.FunctionSpec{Runtime: "python", Source: "def sync(r): return {}\n", Handler: "go", TimeoutSeconds: 30, Env: map[string]string{"A": "1", "B": "x=y"}}
	if diff := cmp.Diff(want, spec); diff != "" || name != "my-hook" {
		t.Errorf("name %q, spec (-want +got):\n%s", name, diff)
	}
	o = applyOptions{file: path, envFrom: []string{"secret/db", "configmap/settings"}, envValueFrom: []string{"PASSWORD=secret/db/password", "REGION=cm/settings/region"}}
	spec, _, err = o.spec(nil)
	if err != nil {
		t.Fatal(err)
	}
	wantFrom := []fnv1.EnvFromSource{{SecretRef: &fnv1.EnvSourceRef{Name: "db"}}, {ConfigMapRef: &fnv1.EnvSourceRef{Name: "settings"}}}
	wantValueFrom := map[string]fnv1.EnvVarSource{
		"PASSWORD": {SecretKeyRef: &fnv1.KeyRef{Name: "db", Key: "password"}},
		"REGION":   {ConfigMapKeyRef: &fnv1.KeyRef{Name: "settings", Key: "region"}},
	}
	if diff := cmp.Diff(wantFrom, spec.EnvFrom); diff != "" {
		t.Errorf("envFrom (-want +got):\n%s", diff)
	}
	if diff := cmp.Diff(wantValueFrom, spec.EnvValueFrom); diff != "" {
		t.Errorf("envValueFrom (-want +got):\n%s", diff)
	}
	for _, bad := range []applyOptions{
		{file: path, envFrom: []string{"db"}},
		{file: path, envFrom: []string{"pod/db"}},
		{file: path, envFrom: []string{"secret/"}},
		{file: path, envValueFrom: []string{"secret/db/password"}},
		{file: path, envValueFrom: []string{"P=secret/db"}},
		{file: path, envValueFrom: []string{"P=vault/db/password"}},
		{file: path, envValueFrom: []string{"P=secret/db/a", "P=secret/db/b"}},
	} {
		if _, _, err := bad.spec(nil); err == nil || !strings.Contains(err.Error(), "--env") {
			t.Errorf("%v %v: err %v, want a usage error naming the flag", bad.envFrom, bad.envValueFrom, err)
		}
	}
	o = applyOptions{file: "-", name: "n", runtime: "javascript"}
	if spec, _, err := o.spec(strings.NewReader("function sync() {}")); err != nil || spec.Source != "function sync() {}" || spec.Runtime != "javascript" {
		t.Errorf("from stdin: %+v, %v", spec, err)
	}
}

func TestCompileErrorAt(t *testing.T) {
	for _, tc := range []struct {
		err  error
		want string
	}{
		{&httpapi.Error{Status: 422, Code: "compile_error", Message: "function ns/f does not compile: line 2, column 14: Unexpected token ;", Line: 2, Column: 14}, "hook.js:2:14: Unexpected token ;"},
		{&httpapi.Error{Status: 422, Code: "compile_error", Message: "function ns/f does not compile: no handler: define function sync(request)"}, "hook.js: no handler: define function sync(request)"},
		{&httpapi.Error{Status: 422, Code: "invalid_name", Message: "function name"}, "function name"},
	} {
		if got := compileErrorAt("hook.js", tc.err).Error(); got != tc.want {
			t.Errorf("got %q, want %q", got, tc.want)
		}
	}
}

func TestExitCodeOfGatewayErrors(t *testing.T) {
	for _, tc := range []struct {
		err  error
		code int
	}{
		{&httpapi.Error{Status: 401}, exitDenied},
		{&httpapi.Error{Status: 403}, exitDenied},
		{&httpapi.Error{Status: 404}, exitError},
		{&engineapi.Error{Status: 401}, exitDenied},
		{fmt.Errorf("wrapped: %w", &engineapi.Error{Status: 403}), exitDenied},
		{&engineapi.Error{Status: 404}, exitError},
		{usageError{errors.New("x")}, exitUsage},
		{errors.New("x"), exitError},
	} {
		if got := exitCode(tc.err); got != tc.code {
			t.Errorf("exitCode(%#v) = %d, want %d", tc.err, got, tc.code)
		}
	}
}

func TestPrintInvocations(t *testing.T) {
	t0 := time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)
	newestFirst := []gatewayapi.Invocation{
		{Time: t0.Add(2 * time.Second), Source: "hook", Status: 500, DurationMS: 12.345, Error: "boom", Logs: "a\nb\n"},
		{Time: t0.Add(time.Second), Source: "invoke", Status: 200, DurationMS: 0.5, Logs: "one"},
		{Time: t0, Source: "invoke", Status: 200, DurationMS: 1},
	}
	var out bytes.Buffer
	last := printInvocations(&out, newestFirst, t0)
	want := `2026-01-02T03:04:06.000Z  invoke  200  500µs
    one
2026-01-02T03:04:07.000Z  hook    500  12.35ms
    a
    b
    error: boom
`
	if diff := cmp.Diff(want, out.String()); diff != "" {
		t.Errorf("(-want +got):\n%s", diff)
	}
	if !last.Equal(t0.Add(2 * time.Second)) {
		t.Errorf("last = %v", last)
	}
}

func TestFunctionTableRow(t *testing.T) {
	u := unstructured.Unstructured{Object: map[string]any{
		"metadata": map[string]any{"name": "f"},
		"spec":     map[string]any{"runtime": "python"},
		"status": map[string]any{"url": "http://g/hooks/ns/f", "conditions": []any{
			map[string]any{"type": "Ready", "status": "False", "reason": "NetworkNotAllowed"},
		}},
	}}
	got := functionTable(u).Rows[0].Cells
	want := []any{"f", "python", "False", "NetworkNotAllowed", "http://g/hooks/ns/f", "<unknown>"}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("(-want +got):\n%s", diff)
	}
}
