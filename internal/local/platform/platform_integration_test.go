//go:build integration

package platform

import (
	"bytes"
	"context"
	"io"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"

	"github.com/metalambda/metalambda/functions"
	"github.com/metalambda/metalambda/internal/kubetest"
	"github.com/metalambda/metalambda/internal/local/cluster"
)

// testOptions are the options of a test's platform: the command's defaults and
// builtins, with data in dataDir and free loopback ports.
func testOptions(t *testing.T, dataDir string) Options {
	opts := Defaults()
	opts.DataDir, opts.BinDir, opts.Builtins = dataDir, os.Getenv(cluster.BinDirEnv), functions.Builtins()
	opts.IngressAddress, opts.GatewayAddress = kubetest.FreeAddr(t), kubetest.FreeAddr(t)
	return opts
}

// TestUpRestartDown starts the platform without the local node, checks what it
// installed and serves, restarts it on the same data directory, and stops it.
func TestUpRestartDown(t *testing.T) {
	opts := testOptions(t, filepath.Join(t.TempDir(), "data"))
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	var out bytes.Buffer
	p, err := Start(ctx, opts, &out)
	if err != nil {
		t.Fatalf("start: %v\n%s", err, out.String())
	}
	defer p.Stop()
	var status bytes.Buffer
	p.Status(&status)
	for _, want := range []string{"export KUBECONFIG=" + p.Kubeconfig, "curl --resolve example.com:", "local node   off", "engine API   " + p.EngineURL(),
		"dashboard    http://" + opts.GatewayAddress + "/ui/", DashboardTokenCommand} {
		if !strings.Contains(status.String(), want) {
			t.Errorf("status lacks %q:\n%s", want, status.String())
		}
	}
	env := connect(t, p.Kubeconfig)
	dyn := env.Dynamic
	functions := schema.GroupVersionResource{Group: "metalambda.dev", Version: "v1alpha1", Resource: "functions"}
	for _, name := range []string{"pythonlambda", "immortalcontainer"} {
		if _, err := dyn.Resource(functions).Namespace(GatewayNamespace).Get(ctx, name, metav1.GetOptions{}); err != nil {
			t.Errorf("bundled operator function %s: %v", name, err)
		}
	}
	if code, body := get(t, "http://"+opts.GatewayAddress+"/healthz", ""); code != 200 {
		t.Errorf("gateway /healthz = %d %s", code, body)
	}
	if code, body := get(t, p.DashboardURL()+"login", ""); code != 200 || !strings.Contains(body, "Bearer token") {
		t.Errorf("dashboard login page = %d %.200s", code, body)
	}
	if _, err := env.Kube.CoreV1().ServiceAccounts(GatewayNamespace).Get(ctx, DashboardAdmin, metav1.GetOptions{}); err != nil {
		t.Errorf("the dashboard admin's ServiceAccount: %v", err)
	}
	if data, err := os.ReadFile(GatewayURLFile(opts.DataDir)); err != nil || string(data) != "http://"+opts.GatewayAddress+"\n" {
		t.Errorf("%s = %q, %v; want the gateway's URL http://%s", GatewayURLFile(opts.DataDir), data, err, opts.GatewayAddress)
	}
	if code, body := get(t, "http://"+opts.IngressAddress+"/", "nowhere.example"); code != 404 || !strings.Contains(body, "no Ingress serves host") {
		t.Errorf("ingress unknown host = %d %q", code, body)
	}
	token := checkHookToken(t, opts, "")
	checkEngineAPI(t, ctx, p)
	// Keep a marker object, restart on the same data directory, find it again.
	marker := schema.GroupVersionResource{Version: "v1", Resource: "configmaps"}
	if _, err := dyn.Resource(marker).Namespace("default").Apply(ctx, "kept", mustUnstructured(`{"apiVersion":"v1","kind":"ConfigMap","metadata":{"name":"kept"},"data":{"k":"v"}}`), metav1.ApplyOptions{FieldManager: "test"}); err != nil {
		t.Fatal(err)
	}
	p.Stop()
	if _, err := net.Dial("tcp", opts.GatewayAddress); err == nil {
		t.Fatal("the gateway still answers after Stop")
	}
	p, err = Start(ctx, opts, io.Discard)
	if err != nil {
		t.Fatalf("restart: %v", err)
	}
	defer p.Stop()
	if _, err := connect(t, p.Kubeconfig).Dynamic.Resource(marker).Namespace("default").Get(ctx, "kept", metav1.GetOptions{}); err != nil {
		t.Fatalf("the ConfigMap did not survive a restart: %v", err)
	}
	checkHookToken(t, opts, token)
}

// checkHookToken checks that the platform's /hooks refuse calls without the token in
// its data directory, kept private, and accept it; want, when set, is the token of an
// earlier start. It returns the token.
func checkHookToken(t *testing.T, opts Options, want string) string {
	t.Helper()
	info, err := os.Stat(HookTokenFile(opts.DataDir))
	if err != nil || info.Mode().Perm() != 0o600 {
		t.Fatalf("hook token file: %v, mode %v; want 0600", err, info.Mode().Perm())
	}
	data, _ := os.ReadFile(HookTokenFile(opts.DataDir))
	token := strings.TrimSpace(string(data))
	if want != "" && token != want {
		t.Errorf("the hook token changed across a restart")
	}
	url := "http://" + opts.GatewayAddress + "/hooks/" + GatewayNamespace + "/pythonlambda"
	for _, tt := range []struct {
		auth      string
		wantAuthz bool
	}{{"", false}, {"Bearer wrong", false}, {"Bearer " + token, true}} {
		req, _ := http.NewRequest(http.MethodPost, url, strings.NewReader(`{"parent": {}, "children": {}}`))
		if tt.auth != "" {
			req.Header.Set("Authorization", tt.auth)
		}
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if (resp.StatusCode != http.StatusUnauthorized) != tt.wantAuthz {
			t.Errorf("/hooks with Authorization %q = %d", tt.auth, resp.StatusCode)
		}
	}
	return token
}

func TestCheckNamesTheProblem(t *testing.T) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	o := Options{DataDir: t.TempDir(), IngressAddress: l.Addr().String(), GatewayAddress: kubetest.FreeAddr(t)}
	err = o.Check()
	if err == nil || !strings.Contains(err.Error(), "ingress address "+l.Addr().String()+" is not free") || !strings.Contains(err.Error(), "make kube") {
		t.Fatalf("Check() = %v, want the taken port and the missing binaries named", err)
	}
}

func get(t *testing.T, url, host string) (int, string) {
	t.Helper()
	req, _ := http.NewRequest(http.MethodGet, url, nil)
	if host != "" {
		req.Host = host
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(body)
}
