//go:build integration

package ingress

import (
	"context"
	"fmt"
	"net/http"
	"net/http/httptest"
	"testing"
	"time"

	discoveryv1 "k8s.io/api/discovery/v1"
	networkingv1 "k8s.io/api/networking/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/util/retry"

	"github.com/metalambda/metalambda/internal/kubetest"
	"github.com/metalambda/metalambda/internal/local/cluster"
)

var env *kubetest.Env

func TestMain(m *testing.M) { kubetest.Main(m, &env, cluster.Defaults()) }

// settle is how long a change may take to reach the router on a busy machine.
const settle = 60 * time.Second

// managedBy marks the test's EndpointSlices so the EndpointSlice controller leaves them.
const managedBy = "ingress-test.metalambda.dev"

// startRouter runs a router on the test cluster, waits until it is ready and serves it
// over HTTP; it returns the server's URL.
func startRouter(t *testing.T, change func(*Options)) string {
	t.Helper()
	r := newTestRouter(t, env.Kube, change)
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- r.Run(ctx) }()
	t.Cleanup(func() {
		cancel()
		if err := <-done; err != nil {
			t.Errorf("Run: %v", err)
		}
	})
	kubetest.Eventually(t, settle, "the router is ready", func(context.Context) (bool, error) { return r.Ready(), nil })
	srv := httptest.NewServer(r)
	t.Cleanup(srv.Close)
	return srv.URL
}

// objects creates Services, EndpointSlices and Ingresses in ns.
type objects struct {
	t  *testing.T
	ns string
}

func (o objects) service(name string) {
	o.t.Helper()
	svc := newService(name)
	svc.Namespace = o.ns
	if _, err := env.Kube.CoreV1().Services(o.ns).Create(kubetest.Context(o.t), svc, metav1.CreateOptions{}); err != nil {
		o.t.Fatalf("create Service %s: %v", name, err)
	}
}

func (o objects) slice(name, service string, endpoints ...sliceEndpoint) *discoveryv1.EndpointSlice {
	o.t.Helper()
	s := newSlice(name, service, endpoints...)
	s.Namespace = o.ns
	s.Labels[discoveryv1.LabelManagedBy] = managedBy
	created, err := env.Kube.DiscoveryV1().EndpointSlices(o.ns).Create(kubetest.Context(o.t), s, metav1.CreateOptions{})
	if err != nil {
		o.t.Fatalf("create EndpointSlice %s: %v", name, err)
	}
	return created
}

func (o objects) ingress(ing *networkingv1.Ingress) {
	o.t.Helper()
	ing.Namespace = o.ns
	if _, err := env.Kube.NetworkingV1().Ingresses(o.ns).Create(kubetest.Context(o.t), ing, metav1.CreateOptions{}); err != nil {
		o.t.Fatalf("create Ingress %s: %v", ing.Name, err)
	}
}

// want describes an answer: the status code, and the backend that answered or the
// router's error body.
type want struct {
	code    int
	backend string
	body    string
}

func (w want) check(r response) error {
	if r.code != w.code || r.echo.Backend != w.backend || (w.body != "" && r.body != w.body) {
		return fmt.Errorf("answered %d from backend %q: %q", r.code, r.echo.Backend, r.body)
	}
	return nil
}

func ok(backend string) want { return want{code: http.StatusOK, backend: backend} }

// eventually waits until GET path with Host host is answered as w says, and returns
// that answer.
func eventually(t *testing.T, base, host, path string, w want) response {
	t.Helper()
	var last response
	what := fmt.Sprintf("GET %s (Host %s) answers %d %q%s", path, host, w.code, w.backend, w.body)
	kubetest.Eventually(t, settle, what, func(ctx context.Context) (bool, error) {
		var err error
		if last, err = get(ctx, base+path, host); err != nil {
			return false, err
		}
		err = w.check(last)
		return err == nil, err
	})
	return last
}

// backendsAnswering sends n requests and counts the answers per backend.
func backendsAnswering(ctx context.Context, base, host, path string, n int) (map[string]int, error) {
	seen := map[string]int{}
	for range n {
		r, err := get(ctx, base+path, host)
		if err != nil {
			return seen, err
		}
		if r.code != http.StatusOK {
			return seen, fmt.Errorf("answered %d: %q", r.code, r.body)
		}
		seen[r.echo.Backend]++
	}
	return seen, nil
}

func TestRoutesByHostAndPath(t *testing.T) {
	ns := env.Namespace(t)
	base := startRouter(t, func(o *Options) {
		o.Dial = startBackends(t, map[string]string{"10.200.0.1:8080": "api", "10.200.0.3:8080": "web"})
	})
	app, admin := ns+".app.test", ns+".admin.test"
	o := objects{t, ns}
	o.service("api")
	o.service("web")
	o.slice("api-1", "api", ready("10.200.0.1"))
	o.slice("web-1", "web", ready("10.200.0.3"))
	o.ingress(newIngress("ing",
		rule(app, prefix("/api", "api"), prefix("/", "web")),
		rule(admin, exact("/only", "api")),
	))

	got := eventually(t, base, app+":8080", "/api/v1", ok("api"))
	if got.echo.Host != app+":8080" || got.echo.ForwardedHost != app+":8080" || got.echo.ForwardedProto != "http" || got.echo.ForwardedFor != "127.0.0.1" {
		t.Errorf("the backend received Host %q, X-Forwarded-Host %q, -Proto %q, -For %q; want the client's Host %q, http and 127.0.0.1",
			got.echo.Host, got.echo.ForwardedHost, got.echo.ForwardedProto, got.echo.ForwardedFor, app+":8080")
	}
	eventually(t, base, app, "/apiary", ok("web"))
	eventually(t, base, app, "/", ok("web"))
	eventually(t, base, admin, "/only", ok("api"))
	eventually(t, base, admin, "/only/more", want{code: 404, body: fmt.Sprintf("no Ingress serves host %q path %q", admin, "/only/more")})
}

func TestSpreadsAcrossReadyEndpoints(t *testing.T) {
	ns := env.Namespace(t)
	base := startRouter(t, func(o *Options) {
		o.Dial = startBackends(t, map[string]string{"10.200.0.1:8080": "one", "10.200.0.2:8080": "two"})
	})
	host := ns + ".spread.test"
	o := objects{t, ns}
	o.service("web")
	slice := o.slice("web-1", "web", ready("10.200.0.1"), ready("10.200.0.2"))
	o.ingress(newIngress("ing", rule(host, prefix("/", "web"))))

	kubetest.Eventually(t, settle, "both endpoints answer", func(ctx context.Context) (bool, error) {
		seen, err := backendsAnswering(ctx, base, host, "/", 10)
		return seen["one"] > 0 && seen["two"] > 0, err
	})

	slice.Endpoints[1].Conditions.Ready = ptrTo(false)
	if _, err := env.Kube.DiscoveryV1().EndpointSlices(ns).Update(kubetest.Context(t), slice, metav1.UpdateOptions{}); err != nil {
		t.Fatalf("mark 10.200.0.2 not ready: %v", err)
	}
	kubetest.Eventually(t, settle, "only the ready endpoint answers", func(ctx context.Context) (bool, error) {
		seen, err := backendsAnswering(ctx, base, host, "/", 10)
		return seen["one"] == 10, err
	})
	seen, err := backendsAnswering(kubetest.Context(t), base, host, "/", 20)
	if err != nil || seen["two"] > 0 {
		t.Errorf("after the endpoint went unready: answers per backend %v, err %v; want none from two", seen, err)
	}
}

func TestUnknownHost(t *testing.T) {
	ns := env.Namespace(t)
	base := startRouter(t, func(o *Options) { o.Dial = startBackends(t, nil) })
	host := ns + ".nobody.test"
	got, err := get(kubetest.Context(t), base+"/x?q=1", host+":80")
	if err != nil {
		t.Fatal(err)
	}
	if w := (want{code: 404, body: fmt.Sprintf(`no Ingress serves host %q path "/x"`, host)}); w.check(got) != nil {
		t.Errorf("unknown host: %v; want 404 %q", w.check(got), w.body)
	}
}

func TestUnavailableBackends(t *testing.T) {
	ns := env.Namespace(t)
	base := startRouter(t, func(o *Options) { o.Dial = startBackends(t, map[string]string{"10.200.0.1:8080": "idle"}) })
	host := ns + ".unavailable.test"
	o := objects{t, ns}
	o.service("idle")
	o.service("broken")
	slice := o.slice("idle-1", "idle", notReady("10.200.0.1"))
	o.slice("broken-1", "broken", ready("10.200.0.9"))
	o.ingress(newIngress("ing", rule(host, prefix("/idle", "idle"), prefix("/missing", "missing"), prefix("/broken", "broken"))))

	unavailable := func(backend, why string) want {
		return want{code: 503, body: fmt.Sprintf("backend %s/%s:80 of Ingress %s/ing is unavailable: %s", ns, backend, ns, why)}
	}
	eventually(t, base, host, "/idle", unavailable("idle", "no ready endpoints"))
	eventually(t, base, host, "/missing", unavailable("missing", "no such Service"))
	eventually(t, base, host, "/broken", want{code: 502, body: fmt.Sprintf(
		"backend %s/broken:80: endpoint 10.200.0.9:8080 failed: dial tcp 10.200.0.9:8080: connection refused (no test server)", ns)})

	slice.Endpoints[0].Conditions.Ready = ptrTo(true)
	if _, err := env.Kube.DiscoveryV1().EndpointSlices(ns).Update(kubetest.Context(t), slice, metav1.UpdateOptions{}); err != nil {
		t.Fatalf("mark 10.200.0.1 ready: %v", err)
	}
	eventually(t, base, host, "/idle", ok("idle"))
}

func TestIngressChangesTakeEffect(t *testing.T) {
	ns := env.Namespace(t)
	base := startRouter(t, func(o *Options) {
		o.Dial = startBackends(t, map[string]string{"10.200.0.1:8080": "v1", "10.200.0.2:8080": "v2"})
	})
	host := ns + ".change.test"
	o := objects{t, ns}
	o.service("v1")
	o.service("v2")
	o.slice("v1-1", "v1", ready("10.200.0.1"))
	o.slice("v2-1", "v2", ready("10.200.0.2"))
	o.ingress(newIngress("ing", rule(host, prefix("/v1", "v1"))))
	eventually(t, base, host, "/v1", ok("v1"))
	eventually(t, base, host, "/v2", want{code: 404, body: fmt.Sprintf("no Ingress serves host %q path %q", host, "/v2")})

	ingresses := env.Kube.NetworkingV1().Ingresses(ns)
	err := retry.RetryOnConflict(retry.DefaultRetry, func() error {
		ing, err := ingresses.Get(kubetest.Context(t), "ing", metav1.GetOptions{})
		if err != nil {
			return err
		}
		ing.Spec.Rules[0].HTTP.Paths = append(ing.Spec.Rules[0].HTTP.Paths, prefix("/v2", "v2"))
		_, err = ingresses.Update(kubetest.Context(t), ing, metav1.UpdateOptions{})
		return err
	})
	if err != nil {
		t.Fatalf("add path /v2: %v", err)
	}
	eventually(t, base, host, "/v2/x", ok("v2"))
	eventually(t, base, host, "/v1", ok("v1"))

	if err := ingresses.Delete(kubetest.Context(t), "ing", metav1.DeleteOptions{}); err != nil {
		t.Fatalf("delete the Ingress: %v", err)
	}
	eventually(t, base, host, "/v1", want{code: 404, body: fmt.Sprintf("no Ingress serves host %q path %q", host, "/v1")})
}

func TestClassName(t *testing.T) {
	ns := env.Namespace(t)
	base := startRouter(t, func(o *Options) {
		o.ClassName, o.Dial = "metalambda", startBackends(t, map[string]string{"10.200.0.1:8080": "web"})
	})
	ours, theirs := ns+".ours.test", ns+".theirs.test"
	o := objects{t, ns}
	o.service("web")
	o.slice("web-1", "web", ready("10.200.0.1"))
	o.ingress(newIngress("theirs", class("nginx"), rule(theirs, prefix("/", "web"))))
	o.ingress(newIngress("ours", class("metalambda"), rule(ours, prefix("/", "web"))))
	eventually(t, base, ours, "/", ok("web"))
	// The router's watch delivers objects in the order they were written: once ours
	// answers, theirs is in the routing table too, ignored.
	got, err := get(kubetest.Context(t), base+"/", theirs)
	if err != nil {
		t.Fatal(err)
	}
	if w := (want{code: 404, body: fmt.Sprintf("no Ingress serves host %q path %q", theirs, "/")}); w.check(got) != nil {
		t.Errorf("an Ingress of another class: %v; want 404 %q", w.check(got), w.body)
	}
}

func ptrTo[T any](v T) *T { return &v }

// TestServingTerminatingEndpointWhileNoneIsReady replaces a backend's pod as a
// rollout does: the old endpoint terminates (still serving, as a draining pod
// does) before the new one is ready. The router keeps sending requests to the old
// one, as kube-proxy does, and only to the new one once it is ready.
func TestServingTerminatingEndpointWhileNoneIsReady(t *testing.T) {
	ns := env.Namespace(t)
	base := startRouter(t, func(o *Options) {
		o.Dial = startBackends(t, map[string]string{"10.200.0.1:8080": "old", "10.200.0.2:8080": "new"})
	})
	host := ns + ".replaced.test"
	o := objects{t, ns}
	o.service("app")
	slice := o.slice("app-1", "app", draining("10.200.0.1"), notReady("10.200.0.2"))
	o.ingress(newIngress("ing", rule(host, prefix("/", "app"))))
	eventually(t, base, host, "/", ok("old"))

	slice.Endpoints[1].Conditions.Ready = ptrTo(true)
	if _, err := env.Kube.DiscoveryV1().EndpointSlices(ns).Update(kubetest.Context(t), slice, metav1.UpdateOptions{}); err != nil {
		t.Fatalf("mark 10.200.0.2 ready: %v", err)
	}
	eventually(t, base, host, "/", ok("new"))
	for range 5 {
		got, err := get(kubetest.Context(t), base+"/", host+":80")
		if err != nil {
			t.Fatal(err)
		}
		if err := ok("new").check(got); err != nil {
			t.Errorf("with a ready endpoint, a request went elsewhere: %v", err)
		}
	}
}
