//go:build integration

package dashboard_test

// The browser tests' harness: one local platform (control plane, engine, gateway with
// the dashboard, ingress and local node) for the whole package, started by the first
// test that asks for it, and a headless chromium per test.
//
//	go test -tags integration -run TestDashboard ./internal/dashboard/ -artifacts -outputdir=out
//
// keeps every test's screenshots under out/; -update-docs also copies them to
// docs/images/ for docs/dashboard.md.

import (
	"context"
	"flag"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/chromedp/chromedp"
	"k8s.io/client-go/kubernetes"

	"github.com/metalambda/metalambda/functions"
	"github.com/metalambda/metalambda/internal/gateway/lambda"
	"github.com/metalambda/metalambda/internal/kubetest"
	"github.com/metalambda/metalambda/internal/local/cluster"
	"github.com/metalambda/metalambda/internal/local/node"
	"github.com/metalambda/metalambda/internal/local/platform"
)

var updateDocs = flag.Bool("update-docs", false, "copy the browser tests' screenshots into docs/images/")

// Bridge and pod subnet of this package's local node, apart from other packages'.
const (
	testBridge = "mlweb0"
	testCIDR   = "10.244.221.0/24"
)

// env is the running platform the browser tests share, with the kit's clients for
// it.
type env struct {
	*kubetest.Env
	p         *platform.Platform
	URL       string // the dashboard, ending in /ui/
	Ingress   string // host:port of the ingress router
	AdminUser string
}

var (
	shared     *env
	sharedErr  error
	sharedOnce sync.Once
	sharedDir  string
)

func TestMain(m *testing.M) {
	lambda.ServeWorker() // the platform's sandboxes start this binary as their launcher and workers
	flag.Parse()
	code := m.Run()
	if shared != nil {
		shared.p.Stop()
	}
	if sharedDir != "" {
		_ = os.RemoveAll(sharedDir)
	}
	os.Exit(code)
}

// platformEnv is the package's platform, started on first use.
func platformEnv(t *testing.T) *env {
	t.Helper()
	sharedOnce.Do(func() { shared, sharedErr = startPlatform() })
	if sharedErr != nil {
		t.Fatalf("starting the platform: %v", sharedErr)
	}
	return shared
}

func startPlatform() (*env, error) {
	dir, err := os.MkdirTemp("", "dashboard-platform-")
	if err != nil {
		return nil, err
	}
	sharedDir = dir
	opts := platform.Defaults()
	opts.DataDir, opts.BinDir, opts.Builtins = filepath.Join(dir, "data"), os.Getenv(cluster.BinDirEnv), functions.Builtins()
	opts.IngressAddress, opts.GatewayAddress = kubetest.FreeAddr(nil), kubetest.FreeAddr(nil)
	opts.Node = func(kube kubernetes.Interface, dataDir string) (platform.NodeRunner, error) {
		o := node.Defaults()
		o.Bridge, o.PodCIDR, o.StateDir = testBridge, testCIDR, filepath.Join(dataDir, "node")
		return node.New(kube, o)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	var out strings.Builder
	p, err := platform.Start(ctx, opts, &out)
	if err != nil {
		return nil, fmt.Errorf("%w\n%s", err, out.String())
	}
	e := &env{p: p, URL: p.DashboardURL(), Ingress: opts.IngressAddress}
	e.Env, err = kubetest.Connect(p.Kubeconfig)
	return e, err
}

// adminToken is a token of the platform's dashboard admin (cluster-admin), the one
// `metalambda up` tells users to create.
func (e *env) adminToken(t *testing.T) string {
	t.Helper()
	return e.Token(t, platform.GatewayNamespace, platform.DashboardAdmin)
}

// apply applies a file of the repository (a path from its root).
func (e *env) apply(t *testing.T, path string) {
	t.Helper()
	e.ApplyFile(t, filepath.Join("..", "..", "..", path))
}

// chromium is the browser binary, or "" when none is installed.
func chromium() string {
	for _, name := range []string{"chromium", "chromium-browser", "google-chrome", "google-chrome-stable"} {
		if p, err := exec.LookPath(name); err == nil {
			return p
		}
	}
	return ""
}

// newBrowser is a headless chromium at 1280x800 (width and height may be changed with
// size) driven by chromedp; the test's end closes it and its processes. Without
// chromium the test fails in CI and is skipped, loudly, elsewhere.
func newBrowser(t *testing.T, size ...int) context.Context {
	t.Helper()
	bin := chromium()
	if bin == "" {
		msg := "chromium is not installed: the dashboard's browser tests cannot run (hack/setup-host.sh installs it)"
		if os.Getenv("CI") != "" {
			t.Fatal(msg)
		}
		fmt.Fprintf(os.Stderr, "\n!!! SKIPPED: %s !!!\n\n", msg)
		t.Skip(msg)
	}
	// Chromium puts its singleton socket in TMPDIR, whose path must stay short (a Unix
	// socket's path is at most 107 bytes): t.TempDir's is too long.
	tmp, err := os.MkdirTemp("", "chromium")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = os.RemoveAll(tmp) }) // runs after the browser is gone
	w, h := 1280, 800
	if len(size) == 2 {
		w, h = size[0], size[1]
	}
	opts := append(chromedp.DefaultExecAllocatorOptions[:],
		chromedp.ExecPath(bin),
		chromedp.UserDataDir(t.TempDir()),
		chromedp.WindowSize(w, h),
		chromedp.NoSandbox,          // the tests run as root, where chromium's sandbox refuses to start
		chromedp.Env("TMPDIR="+tmp), // what chromium leaves in its temporary directory goes with the test
	)
	allocCtx, cancelAlloc := chromedp.NewExecAllocator(context.Background(), opts...)
	ctx, cancelCtx := chromedp.NewContext(allocCtx, chromedp.WithErrorf(t.Logf))
	t.Cleanup(func() {
		cancelCtx()
		cancelAlloc() // kills this browser's process group and waits for it
	})
	// The first Do starts the browser, which lives as long as ctx: no timeout on it.
	if err := chromedp.Do(ctx); err != nil {
		t.Fatalf("starting %s: %v", bin, err)
	}
	return ctx
}

// run runs browser actions within a minute, failing the test with what it was doing.
func run(t *testing.T, ctx context.Context, what string, actions ...chromedp.Action[chromedp.Void]) {
	t.Helper()
	ctx, cancel := context.WithTimeout(ctx, time.Minute)
	defer cancel()
	if err := chromedp.Do(ctx, actions...); err != nil {
		t.Fatalf("%s: %v", what, err)
	}
}

// value runs one browser action that answers a value, within a minute.
func value[T any](t *testing.T, ctx context.Context, what string, action chromedp.Action[T]) T {
	t.Helper()
	ctx, cancel := context.WithTimeout(ctx, time.Minute)
	defer cancel()
	v, err := chromedp.Run(ctx, action)
	if err != nil {
		t.Fatalf("%s: %v", what, err)
	}
	return v
}

// login logs the browser in to the dashboard with token and waits for the overview.
func login(t *testing.T, ctx context.Context, e *env, token string) {
	t.Helper()
	run(t, ctx, "log in",
		chromedp.Navigate(e.URL+"login"),
		chromedp.WaitVisible(chromedp.CSS(`#token`)),
		chromedp.SendKeys(chromedp.CSS(`#token`), token),
		chromedp.Submit(chromedp.CSS(`#token`)),
		chromedp.WaitVisible(chromedp.CSS(`[data-testid=user]`)),
	)
}

// waitText waits until the element sel (a CSS selector) contains text.
func waitText(t *testing.T, ctx context.Context, sel, text string, timeout time.Duration) {
	t.Helper()
	deadline := time.Now().Add(timeout)
	var got string
	for time.Now().Before(deadline) {
		tctx, cancel := context.WithTimeout(ctx, 5*time.Second)
		text1, err := chromedp.Run(tctx, chromedp.Text(chromedp.CSS(sel), chromedp.NodeVisible))
		cancel()
		if err == nil {
			got = text1
		}
		if err == nil && strings.Contains(got, text) {
			return
		}
		time.Sleep(500 * time.Millisecond)
	}
	t.Fatalf("%s does not show %q within %s; it shows:\n%s", sel, text, timeout, got)
}

// screenshot saves the page as <name>.png in the test's artifact directory and, with
// -update-docs, as docs/images/dashboard-<name>.png.
func screenshot(t *testing.T, ctx context.Context, name string) {
	t.Helper()
	png := value(t, ctx, "screenshot "+name, chromedp.FullScreenshot(100))
	path := filepath.Join(t.ArtifactDir(), name+".png")
	if err := os.WriteFile(path, png, 0o644); err != nil {
		t.Fatal(err)
	}
	t.Logf("screenshot: %s", path)
	if *updateDocs {
		doc := filepath.Join("..", "..", "..", "docs", "images", "dashboard-"+name+".png")
		if err := os.MkdirAll(filepath.Dir(doc), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(doc, png, 0o644); err != nil {
			t.Fatal(err)
		}
	}
}
