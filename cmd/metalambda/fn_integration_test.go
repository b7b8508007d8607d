//go:build integration

package main

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"maps"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/tools/clientcmd"
	clientcmdapi "k8s.io/client-go/tools/clientcmd/api"
	"sigs.k8s.io/yaml"

	"github.com/metalambda/metalambda/internal/gateway"
	"github.com/metalambda/metalambda/internal/gateway/lambda"
	"github.com/metalambda/metalambda/internal/gateway/starter"
	"github.com/metalambda/metalambda/internal/kubetest"
	"github.com/metalambda/metalambda/internal/kubetest/start"
	"github.com/metalambda/metalambda/internal/local/cluster"
	"github.com/metalambda/metalambda/internal/local/platform"
)

var env *kubetest.Env

func TestMain(m *testing.M) {
	lambda.ServeWorker() // the gateway's sandbox starts this binary as its launcher and workers
	kubetest.Main(m, &env, cluster.Defaults())
}

// startGateway runs a gateway on the test's control plane and returns its URL.
func startGateway(t *testing.T) string {
	t.Helper()
	env.InstallCRDs(t)
	return start.StartGateway(t, env.Config, gateway.Defaults()).URL
}

// writeKubeconfig writes a kubeconfig for the test's API server with user and the
// context's namespace, in dir.
func writeKubeconfig(t *testing.T, dir, namespace string, user *clientcmdapi.AuthInfo) string {
	t.Helper()
	cfg := clientcmdapi.NewConfig()
	cfg.Clusters["test"] = &clientcmdapi.Cluster{Server: env.Config.Host, CertificateAuthorityData: env.Config.CAData}
	cfg.AuthInfos["test"] = user
	cfg.Contexts["test"] = &clientcmdapi.Context{Cluster: "test", AuthInfo: "test", Namespace: namespace}
	cfg.CurrentContext = "test"
	path := filepath.Join(dir, "kubeconfig")
	if err := clientcmd.WriteToFile(*cfg, path); err != nil {
		t.Fatal(err)
	}
	return path
}

// cli runs metalambda in process, as the given kubeconfig and with the given
// gateway; stdin feeds the command.
type cli struct {
	kubeconfig, gateway string
}

type result struct {
	out, err string
	code     int
}

func (c cli) run(t *testing.T, stdin string, args ...string) result {
	t.Helper()
	var out, errOut bytes.Buffer
	full := append([]string{}, args...)
	if len(args) > 0 && args[0] == "fn" {
		full = append(full, "--kubeconfig", c.kubeconfig)
		if c.gateway != "" {
			full = append(full, "--gateway", c.gateway)
		}
	}
	code := execute(full, streams{in: strings.NewReader(stdin), out: &out, err: &errOut})
	t.Logf("metalambda %s: exit %d\nstdout: %s\nstderr: %s", strings.Join(args, " "), code, out.String(), errOut.String())
	return result{out: out.String(), err: errOut.String(), code: code}
}

func (r result) must(t *testing.T) result {
	t.Helper()
	if r.code != 0 {
		t.Fatalf("exit %d, stderr: %s", r.code, r.err)
	}
	return r
}

// adminCLI runs as the control plane's admin, in a namespace of the test's own.
func adminCLI(t *testing.T) (cli, string, string) {
	t.Helper()
	url := startGateway(t)
	ns := env.Namespace(t)
	return cli{kubeconfig: writeKubeconfig(t, t.TempDir(), ns, &clientcmdapi.AuthInfo{Token: env.Config.BearerToken}), gateway: url}, ns, url
}

func writeFile(t *testing.T, dir, name, text string) string {
	t.Helper()
	path := filepath.Join(dir, name)
	if err := os.WriteFile(path, []byte(text), 0o644); err != nil {
		t.Fatal(err)
	}
	return path
}

var echoHooks = map[string]string{
	"echo.js": `function sync(request) {
  console.log("syncing " + request.parent.metadata.name);
  return {children: [{apiVersion: "v1", kind: "ConfigMap", metadata: {name: request.parent.metadata.name + "-" + process.env.GREETING}}]};
}`,
	"echo.py": `import os

def sync(request):
    print("syncing " + request["parent"]["metadata"]["name"])
    return {"children": [{"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": request["parent"]["metadata"]["name"] + "-" + os.environ["GREETING"]}}]}
`,
	"echo.jsonnet": `function(request)
  std.trace("syncing " + request.parent.metadata.name,
    {children: [{apiVersion: "v1", kind: "ConfigMap", metadata: {name: request.parent.metadata.name + "-" + std.extVar("GREETING")}}]})
`,
}

// childName is the name of the first child in a hook response.
func childName(t *testing.T, out string) string {
	t.Helper()
	var resp struct {
		Children []struct {
			Metadata struct{ Name string } `json:"metadata"`
		} `json:"children"`
	}
	if err := json.Unmarshal([]byte(out), &resp); err != nil {
		t.Fatalf("stdout is not the hook's JSON response: %v\n%s", err, out)
	}
	if len(resp.Children) == 0 {
		return ""
	}
	return resp.Children[0].Metadata.Name
}

func TestFnApplyInvokeLogs(t *testing.T) {
	c, ns, url := adminCLI(t)
	dir := t.TempDir()
	for file, source := range echoHooks {
		t.Run(file, func(t *testing.T) {
			path := writeFile(t, dir, file, source)
			name := strings.TrimSuffix(file, filepath.Ext(file)) + "-" + strings.TrimPrefix(filepath.Ext(file), ".")
			applied := c.run(t, "", "fn", "apply", "-f", path, "--name", name, "--env", "GREETING=hi", "--timeout", "5s").must(t)
			if want := url + "/hooks/" + ns + "/" + name + "\n"; applied.out != want {
				t.Errorf("apply printed %q, want the hook URL %q alone", applied.out, want)
			}
			if !strings.Contains(applied.err, "function "+ns+"/"+name+" created") {
				t.Errorf("apply's stderr %q does not say the function was created", applied.err)
			}
			again := c.run(t, "", "fn", "apply", "-f", path, "--name", name, "--env", "GREETING=again").must(t)
			if !strings.Contains(again.err, "configured") {
				t.Errorf("a second apply's stderr %q does not say configured", again.err)
			}

			reqFile := writeFile(t, dir, name+"-request.json", `{"parent": {"metadata": {"name": "file"}}, "children": {}}`)
			for _, tc := range []struct{ data, stdin, parent string }{
				{data: `{"parent": {"metadata": {"name": "inline"}}, "children": {}}`, parent: "inline"},
				{data: "@" + reqFile, parent: "file"},
				{data: "@-", stdin: `{"parent": {"metadata": {"name": "stdin"}}, "children": {}}`, parent: "stdin"},
			} {
				r := c.run(t, tc.stdin, "fn", "invoke", name, "-d", tc.data).must(t)
				if got, want := childName(t, r.out), tc.parent+"-again"; got != want {
					t.Errorf("-d %s: child %q, want %q", tc.data, got, want)
				}
				if !strings.Contains(r.err, "syncing "+tc.parent) {
					t.Errorf("-d %s: stderr %q lacks the function's log", tc.data, r.err)
				}
				if strings.Contains(r.out, "syncing") {
					t.Errorf("-d %s: the logs went to stdout: %q", tc.data, r.out)
				}
			}

			logs := c.run(t, "", "fn", "logs", name).must(t)
			lines := strings.Split(strings.TrimSpace(logs.out), "\n")
			if len(lines) != 6 {
				t.Fatalf("logs printed %d lines, want 3 calls of 2 lines each:\n%s", len(lines), logs.out)
			}
			for i, parent := range []string{"inline", "file", "stdin"} {
				head, log := strings.Fields(lines[2*i]), strings.TrimSpace(lines[2*i+1])
				if len(head) != 4 || head[1] != "invoke" || head[2] != "200" || !strings.HasSuffix(head[3], "s") {
					t.Errorf("call %d: header %q, want time, invoke, 200, duration", i, lines[2*i])
				}
				if _, err := time.Parse(time.RFC3339, head[0]); err != nil {
					t.Errorf("call %d: time %q: %v", i, head[0], err)
				}
				if !strings.HasSuffix(log, "syncing "+parent) {
					t.Errorf("call %d: log %q, want it to end with %q (oldest first)", i, log, "syncing "+parent)
				}
			}
		})
	}
}

func TestFnLogsFollow(t *testing.T) {
	c, _, _ := adminCLI(t)
	path := writeFile(t, t.TempDir(), "follow.js", `function sync(r) { console.log("call " + r.n); return {} }`)
	c.run(t, "", "fn", "apply", "-f", path).must(t)
	c.run(t, "", "fn", "invoke", "follow", "-d", `{"n": 1}`).must(t)

	// -f prints what is kept, then each new call once; the test ends it with a deadline
	// as Ctrl-C would.
	var out, errOut syncWriter
	cmd := newRootCommand(streams{in: strings.NewReader(""), out: &out, err: &errOut})
	cmd.SetArgs([]string{"fn", "logs", "follow", "-f", "--interval", "100ms", "--kubeconfig", c.kubeconfig, "--gateway", c.gateway})
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- cmd.ExecuteContext(ctx) }()
	kubetest.Eventually(t, 10*time.Second, "the first call is printed", func(context.Context) (bool, error) {
		return strings.Contains(out.String(), "call 1"), nil
	})
	c.run(t, "", "fn", "invoke", "follow", "-d", `{"n": 2}`).must(t)
	kubetest.Eventually(t, 10*time.Second, "the second call is printed", func(context.Context) (bool, error) {
		return strings.Contains(out.String(), "call 2"), nil
	})
	cancel()
	if err := <-done; err != nil {
		t.Errorf("logs -f ended with %v, want nothing when its context ends", err)
	}
	if n := strings.Count(out.String(), "call 1"); n != 1 {
		t.Errorf("the first call was printed %d times:\n%s", n, out.String())
	}
}

func TestFnCompileError(t *testing.T) {
	c, ns, _ := adminCLI(t)
	dir := t.TempDir()
	for _, tc := range []struct{ file, source, want string }{
		{"bad.js", "function sync(request) {\n  let x = 1 +;\n  return x;\n}\n", "bad.js:2:14: Unexpected token ;"},
		{"bad.py", "def sync(request):\n    return {}\n\nx = )\n", "bad.py:4:5: SyntaxError: "},
		{"bad.jsonnet", "function(request)\n  {children: [}\n", "bad.jsonnet:2:15: Unexpected: "},
	} {
		t.Run(tc.file, func(t *testing.T) {
			path := writeFile(t, dir, tc.file, tc.source)
			r := c.run(t, "", "fn", "apply", "-f", path)
			if r.code != exitError {
				t.Errorf("exit %d, want %d", r.code, exitError)
			}
			if want := "metalambda: " + filepath.Join(dir, tc.want); !strings.HasPrefix(r.err, want) {
				t.Errorf("stderr %q, want %s...", r.err, want)
			}
			if strings.Contains(r.err, "does not compile") {
				t.Errorf("stderr %q repeats the gateway's prefix", r.err)
			}
			name := strings.TrimSuffix(tc.file, filepath.Ext(tc.file))
			if _, err := env.Dynamic.Resource(gateway.FunctionsGVR).Namespace(ns).Get(kubetest.Context(t), name, metav1.GetOptions{}); !apierrors.IsNotFound(err) {
				t.Errorf("a function that does not compile was stored: %v", err)
			}
		})
	}
}

func TestFnListGetDelete(t *testing.T) {
	c, ns, url := adminCLI(t)
	dir := t.TempDir()
	if r := c.run(t, "", "fn", "list").must(t); r.out != "" || !strings.Contains(r.err, "No functions in namespace "+ns) {
		t.Errorf("an empty list printed %q / %q", r.out, r.err)
	}
	c.run(t, "", "fn", "apply", "-f", writeFile(t, dir, "one.js", echoHooks["echo.js"]), "--env", "GREETING=1").must(t)
	c.run(t, "", "fn", "apply", "-f", writeFile(t, dir, "two.py", echoHooks["echo.py"]), "--env", "GREETING=2").must(t)

	table := c.run(t, "", "fn", "list").must(t).out
	rows := strings.Split(strings.TrimSpace(table), "\n")
	if len(rows) != 3 || strings.Join(strings.Fields(rows[0]), " ") != "NAME RUNTIME READY URL AGE" {
		t.Fatalf("list printed:\n%s", table)
	}
	for i, want := range [][]string{{"one", "javascript", "True", url + "/hooks/" + ns + "/one"}, {"two", "python", "True", url + "/hooks/" + ns + "/two"}} {
		if got := strings.Fields(rows[i+1]); len(got) != 5 || strings.Join(got[:4], " ") != strings.Join(want, " ") {
			t.Errorf("row %d = %q, want %q and an age", i+1, rows[i+1], want)
		}
	}
	if wide := c.run(t, "", "fn", "list", "-o", "wide").must(t).out; !strings.Contains(wide, "REASON") || !strings.Contains(wide, "Compiled") {
		t.Errorf("-o wide lacks the reason:\n%s", wide)
	}
	var list struct {
		Kind  string
		Items []map[string]any
	}
	if err := json.Unmarshal([]byte(c.run(t, "", "fn", "list", "-o", "json").must(t).out), &list); err != nil || list.Kind != "List" || len(list.Items) != 2 {
		t.Errorf("list -o json: kind %q, %d items, %v", list.Kind, len(list.Items), err)
	}

	var completions bytes.Buffer
	execute([]string{"__complete", "fn", "get", "--kubeconfig", c.kubeconfig, "--gateway", c.gateway, ""}, streams{in: strings.NewReader(""), out: &completions, err: io.Discard})
	if got := completions.String(); !strings.HasPrefix(got, "one\ntwo\n:4\n") {
		t.Errorf("fn get <TAB> completes to %q, want the functions' names", got)
	}
	if got := c.run(t, "", "fn", "get", "one").must(t).out; !strings.Contains(got, "NAME") || !strings.Contains(got, "javascript") {
		t.Errorf("get printed:\n%s", got)
	}
	for _, format := range []string{"json", "yaml"} {
		var fn struct {
			Kind     string
			Metadata struct{ Name string }
			Spec     struct {
				Runtime string
				Env     map[string]string
			}
		}
		out := c.run(t, "", "fn", "get", "two", "-o", format).must(t).out
		if err := yaml.Unmarshal([]byte(out), &fn); err != nil {
			t.Fatalf("-o %s: %v\n%s", format, err, out)
		}
		if fn.Kind != "Function" || fn.Metadata.Name != "two" || fn.Spec.Runtime != "python" || fn.Spec.Env["GREETING"] != "2" {
			t.Errorf("-o %s gave %+v", format, fn)
		}
	}
	if got := c.run(t, "", "fn", "get", "one", "-o", "jsonpath={.status.url}").must(t).out; got != url+"/hooks/"+ns+"/one" {
		t.Errorf("-o jsonpath gave %q", got)
	}
	if r := c.run(t, "", "fn", "get", "one", "-o", "toml"); r.code != exitUsage || !strings.Contains(r.err, "allowed formats") {
		t.Errorf("-o toml: exit %d, %q", r.code, r.err)
	}

	if r := c.run(t, "", "fn", "delete", "one").must(t); r.out != "function "+ns+"/one deleted\n" {
		t.Errorf("delete printed %q", r.out)
	}
	if r := c.run(t, "", "fn", "get", "one"); r.code != exitError || !strings.Contains(r.err, "not found") {
		t.Errorf("get after delete: exit %d, %q", r.code, r.err)
	}
	if r := c.run(t, "", "fn", "delete", "one"); r.code != exitError || !strings.Contains(r.err, "not found") {
		t.Errorf("a second delete: exit %d, %q", r.code, r.err)
	}
}

func TestFnInitApplyInvoke(t *testing.T) {
	c, _, _ := adminCLI(t)
	for _, rt := range []string{"python", "javascript", "jsonnet"} {
		t.Run(rt, func(t *testing.T) {
			dir := t.TempDir()
			name := "starter-" + rt
			r := c.run(t, "", "fn", "init", name, "--runtime", rt, "--dir", dir).must(t)
			ext, _ := starter.Extension(rt)
			hook := filepath.Join(dir, name+ext)
			if !strings.Contains(r.out, "metalambda fn apply -f "+hook) {
				t.Errorf("init's next steps %q do not name %s", r.out, hook)
			}
			c.run(t, "", "fn", "apply", "-f", hook).must(t)
			out := c.run(t, "", "fn", "invoke", name, "-d", "@"+filepath.Join(dir, starter.SampleRequestFile)).must(t)
			var resp struct {
				Status   map[string]any
				Children []struct {
					Kind     string
					Metadata struct{ Name string }
					Data     map[string]string
				}
				Events []struct{ Type, Reason, Message string }
			}
			if err := json.Unmarshal([]byte(out.out), &resp); err != nil {
				t.Fatal(err)
			}
			if len(resp.Children) != 1 || resp.Children[0].Kind != "ConfigMap" || resp.Children[0].Metadata.Name != "world-message" || resp.Children[0].Data["message"] != "hello, world" {
				t.Errorf("children %+v, want the ConfigMap world-message", resp.Children)
			}
			if resp.Status["configMaps"] != float64(0) {
				t.Errorf("status %v, want configMaps 0", resp.Status)
			}
			if len(resp.Events) != 1 || resp.Events[0].Type != "Normal" || resp.Events[0].Reason != "CreatingConfigMap" || resp.Events[0].Message != "creating ConfigMap world-message" {
				t.Errorf("events %+v, want the Normal CreatingConfigMap event", resp.Events)
			}
			if !strings.Contains(out.err, "syncing world with 0 ConfigMap(s)") {
				t.Errorf("stderr %q lacks the starter's log", out.err)
			}
			if again := c.run(t, "", "fn", "init", name, "--runtime", rt, "--dir", dir); again.code != exitError || !strings.Contains(again.err, "exists") {
				t.Errorf("init over existing files: exit %d, %q", again.code, again.err)
			}
		})
	}
}

func TestFnErrorsAndExitCodes(t *testing.T) {
	c, ns, url := adminCLI(t)
	dir := t.TempDir()
	c.run(t, "", "fn", "apply", "-f", writeFile(t, dir, "fails.js", `function sync(r) { console.log("about to fail"); throw new Error("no parent given") }`)).must(t)

	t.Run("function fails", func(t *testing.T) {
		r := c.run(t, "", "fn", "invoke", "fails", "-d", "{}")
		if r.code != exitFunctionFailed || r.out != "" || !strings.Contains(r.err, "about to fail") || !strings.Contains(r.err, "no parent given") {
			t.Errorf("exit %d, stdout %q, stderr %q; want 3, nothing, the log and the error", r.code, r.out, r.err)
		}
	})
	t.Run("wrong namespace", func(t *testing.T) {
		other := env.Namespace(t)
		r := c.run(t, "", "fn", "invoke", "fails", "-n", other, "-d", "{}")
		if r.code != exitError || !strings.Contains(r.err, "no function "+other+"/fails") {
			t.Errorf("exit %d, stderr %q", r.code, r.err)
		}
	})
	t.Run("not JSON", func(t *testing.T) {
		if r := c.run(t, "", "fn", "invoke", "fails", "-d", "{nope"); r.code != exitUsage || !strings.Contains(r.err, "not JSON") {
			t.Errorf("exit %d, stderr %q", r.code, r.err)
		}
	})
	t.Run("forbidden", func(t *testing.T) {
		token := env.ServiceAccount(t, ns, "nobody")
		nobody := cli{kubeconfig: writeKubeconfig(t, t.TempDir(), ns, &clientcmdapi.AuthInfo{Token: token}), gateway: url}
		r := nobody.run(t, "", "fn", "invoke", "fails", "-d", "{}")
		if r.code != exitDenied || !strings.Contains(r.err, "may not invoke functions.metalambda.dev in namespace") {
			t.Errorf("exit %d, stderr %q", r.code, r.err)
		}
	})
	t.Run("unknown token", func(t *testing.T) {
		stranger := cli{kubeconfig: writeKubeconfig(t, t.TempDir(), ns, &clientcmdapi.AuthInfo{Token: "not-a-token"}), gateway: url}
		r := stranger.run(t, "", "fn", "list")
		if r.code != exitDenied || !strings.Contains(r.err, "refused the credentials") {
			t.Errorf("exit %d, stderr %q", r.code, r.err)
		}
	})
	t.Run("client certificate", func(t *testing.T) {
		certOnly := cli{kubeconfig: writeKubeconfig(t, t.TempDir(), ns, &clientcmdapi.AuthInfo{ClientCertificateData: []byte("cert"), ClientKeyData: []byte("key")}), gateway: url}
		r := certOnly.run(t, "", "fn", "list")
		if r.code != exitError || !strings.Contains(r.err, "client certificate") || !strings.Contains(r.err, "--token") {
			t.Errorf("exit %d, stderr %q", r.code, r.err)
		}
		// --token supplies what the certificate cannot.
		certOnly.run(t, "", "fn", "list", "--token", env.Config.BearerToken).must(t)
	})
	t.Run("no gateway", func(t *testing.T) {
		t.Setenv(gatewayEnv, "")
		r := cli{kubeconfig: c.kubeconfig}.run(t, "", "fn", "list")
		if r.code != exitError || !strings.Contains(r.err, "no gateway: pass --gateway") {
			t.Errorf("exit %d, stderr %q", r.code, r.err)
		}
	})
	t.Run("gateway down", func(t *testing.T) {
		r := cli{kubeconfig: c.kubeconfig, gateway: "http://127.0.0.1:1"}.run(t, "", "fn", "list")
		if r.code != exitError || !strings.Contains(r.err, "cannot reach the gateway at http://127.0.0.1:1 (--gateway)") {
			t.Errorf("exit %d, stderr %q", r.code, r.err)
		}
	})
}

// TestFnFindsGateway: $METALAMBDA_GATEWAY, and the gateway-url file that `metalambda
// up` writes beside its kubeconfig, used only when that kubeconfig is the one in use.
func TestFnFindsGateway(t *testing.T) {
	url := startGateway(t)
	ns := env.Namespace(t)
	admin := &clientcmdapi.AuthInfo{Token: env.Config.BearerToken}

	t.Run("env", func(t *testing.T) {
		t.Setenv(gatewayEnv, url)
		cli{kubeconfig: writeKubeconfig(t, t.TempDir(), ns, admin)}.run(t, "", "fn", "list").must(t)
	})
	t.Run("platform data dir", func(t *testing.T) {
		t.Setenv(gatewayEnv, "")
		dataDir := t.TempDir()
		kubeconfig := writeKubeconfig(t, dataDir, ns, admin)
		writeFile(t, dataDir, filepath.Base(platform.GatewayURLFile(dataDir)), url+"\n")
		cli{kubeconfig: kubeconfig}.run(t, "", "fn", "list").must(t)
		t.Setenv("KUBECONFIG", kubeconfig)
		var out, errOut bytes.Buffer
		if code := execute([]string{"fn", "list"}, streams{in: strings.NewReader(""), out: &out, err: &errOut}); code != 0 {
			t.Errorf("with $KUBECONFIG: exit %d, %s", code, errOut.String())
		}
	})
	t.Run("another cluster's kubeconfig", func(t *testing.T) {
		t.Setenv(gatewayEnv, "")
		dataDir := t.TempDir()
		kubeconfig := writeKubeconfig(t, dataDir, ns, admin)
		writeFile(t, dataDir, filepath.Base(platform.GatewayURLFile(dataDir)), url+"\n")
		r := cli{kubeconfig: kubeconfig}.run(t, "", "fn", "list", "--server", "https://127.0.0.1:1")
		if r.code != exitError || !strings.Contains(r.err, "no gateway") {
			t.Errorf("a kubeconfig pointed at another API server used the platform's gateway: exit %d, %q", r.code, r.err)
		}
	})
}

// syncWriter lets a test read what a running command writes.
type syncWriter struct {
	mu sync.Mutex
	w  bytes.Buffer
}

func (s *syncWriter) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.w.Write(p)
}

func (s *syncWriter) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.w.String()
}

// TestFnApplyEnvSources: --env-from and --env-value-from reach the gateway as the
// Function's envFrom and envValueFrom, the function reads the Secret's and the
// ConfigMap's values, and an apply without them drops them, as apply replaces the spec.
func TestFnApplyEnvSources(t *testing.T) {
	c, ns, _ := adminCLI(t)
	ctx := kubetest.Context(t)
	if _, err := env.Kube.CoreV1().Secrets(ns).Create(ctx, &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: "db"}, StringData: map[string]string{"user": "alice", "password": "s3cret"}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	if _, err := env.Kube.CoreV1().ConfigMaps(ns).Create(ctx, &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "settings"}, Data: map[string]string{"region": "eu-1"}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	path := writeFile(t, t.TempDir(), "envs.py", `import os

def sync(request):
    return {"status": {k: os.environ.get(k, "<unset>") for k in ("user", "PASSWORD", "REGION")}}
`)
	c.run(t, "", "fn", "apply", "-f", path, "--env-from", "secret/db", "--env-value-from", "PASSWORD=secret/db/password", "--env-value-from", "REGION=configmap/settings/region").must(t)
	var fn struct {
		Spec struct {
			EnvFrom      []map[string]any
			EnvValueFrom map[string]any
		}
	}
	if err := json.Unmarshal([]byte(c.run(t, "", "fn", "get", "envs", "-o", "json").must(t).out), &fn); err != nil {
		t.Fatal(err)
	}
	if len(fn.Spec.EnvFrom) != 1 || len(fn.Spec.EnvValueFrom) != 2 {
		t.Errorf("stored envFrom %v, envValueFrom %v", fn.Spec.EnvFrom, fn.Spec.EnvValueFrom)
	}
	status := func() map[string]string {
		var resp struct{ Status map[string]string }
		out := c.run(t, "", "fn", "invoke", "envs", "-d", `{"parent": {}, "children": {}}`).must(t).out
		if err := json.Unmarshal([]byte(out), &resp); err != nil {
			t.Fatalf("invoke printed %q: %v", out, err)
		}
		return resp.Status
	}
	if got, want := status(), map[string]string{"user": "alice", "PASSWORD": "s3cret", "REGION": "eu-1"}; !maps.Equal(got, want) {
		t.Errorf("the function saw %v, want %v", got, want)
	}

	c.run(t, "", "fn", "apply", "-f", path).must(t)
	if got, want := status(), map[string]string{"user": "<unset>", "PASSWORD": "<unset>", "REGION": "<unset>"}; !maps.Equal(got, want) {
		t.Errorf("after an apply without the flags the function saw %v, want %v", got, want)
	}
	if r := c.run(t, "", "fn", "apply", "-f", path, "--env-from", "vault/db"); r.code != exitUsage || !strings.Contains(r.err, "--env-from") {
		t.Errorf("--env-from vault/db: exit %d, %q", r.code, r.err)
	}
}
