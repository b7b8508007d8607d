package ingress

import (
	"context"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	networkingv1 "k8s.io/api/networking/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
)

func TestParseWakeTarget(t *testing.T) {
	tests := []struct {
		value   string
		want    schema.GroupVersionResource
		name    string
		wantErr string
	}{
		{value: "pythonlambdas.v1.example.com/demo", want: schema.GroupVersionResource{Group: "example.com", Version: "v1", Resource: "pythonlambdas"}, name: "demo"},
		{value: "configmaps.v1/a.b", want: schema.GroupVersionResource{Version: "v1", Resource: "configmaps"}, name: "a.b"},
		{value: "pythonlambdas/demo", wantErr: `annotation metalambda.dev/wake-target "pythonlambdas/demo" is not <resource>.<version>.<group>/<name>`},
		{value: "pythonlambdas.v1.example.com", wantErr: "is not <resource>.<version>.<group>/<name>"},
		{value: ".v1/demo", wantErr: "is not <resource>.<version>.<group>/<name>"},
		{value: "pythonlambdas.v1.example.com/Demo", wantErr: `name "Demo": a lowercase RFC 1123 subdomain`},
	}
	for _, tt := range tests {
		got, err := parseWakeTarget("ns", tt.value)
		if tt.wantErr != "" {
			if err == nil || !strings.Contains(err.Error(), tt.wantErr) {
				t.Errorf("parseWakeTarget(%q) error = %v, want %q", tt.value, err, tt.wantErr)
			}
			continue
		}
		if err != nil || got.resource != tt.want || got.name != tt.name || got.namespace != "ns" || got.key != "ns/"+tt.value {
			t.Errorf("parseWakeTarget(%q) = %+v, %v", tt.value, got, err)
		}
	}
}

// patches records demand writes; fail makes the next one fail.
type patches struct {
	mu   sync.Mutex
	got  []string // key@seconds after epoch
	fail error
}

func (p *patches) patch(_ context.Context, t *wakeTarget, at time.Time) error {
	p.mu.Lock()
	defer p.mu.Unlock()
	if err := p.fail; err != nil {
		p.fail = nil
		return err
	}
	p.got = append(p.got, t.key+"@"+at.Sub(epoch).String())
	return nil
}

func (p *patches) take() []string {
	p.mu.Lock()
	defer p.mu.Unlock()
	out := p.got
	p.got = nil
	return out
}

// TestDemandWrites: steady traffic writes once per flush, at the latest request; a
// request in flight writes at each flush; a wake writes at once, once per interval.
func TestDemandWrites(t *testing.T) {
	p := &patches{}
	d := newDemand(p.patch, time.Second)
	clock := epoch
	d.now = func() time.Time { return clock }
	a, _ := parseWakeTarget("ns", "pythonlambdas.v1.example.com/a")
	b, _ := parseWakeTarget("ns", "pythonlambdas.v1.example.com/b")
	ctx := t.Context()
	step := func(d time.Duration) { clock = clock.Add(d) }

	for range 3 { // three quick requests to a
		d.begin(a)
		step(100 * time.Millisecond)
		d.end(a)
	}
	d.begin(b) // a long one to b
	step(700 * time.Millisecond)
	d.flush(ctx)
	if diff := cmp.Diff([]string{"ns/pythonlambdas.v1.example.com/a@200ms", "ns/pythonlambdas.v1.example.com/b@1s"}, sorted(p.take())); diff != "" {
		t.Errorf("first flush (-want +got):\n%s", diff)
	}
	step(time.Second)
	d.flush(ctx)
	if diff := cmp.Diff([]string{"ns/pythonlambdas.v1.example.com/b@2s"}, p.take()); diff != "" {
		t.Errorf("second flush: only the request in flight (-want +got):\n%s", diff)
	}
	d.end(b)
	step(time.Second)
	d.flush(ctx)
	if got := p.take(); len(got) != 0 {
		t.Errorf("third flush wrote %v, want nothing", got)
	}

	// A wake writes at once; another within the interval finds it written.
	if err := d.wake(ctx, a); err != nil {
		t.Fatal(err)
	}
	step(500 * time.Millisecond)
	if err := d.wake(ctx, a); err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff([]string{"ns/pythonlambdas.v1.example.com/a@3s"}, p.take()); diff != "" {
		t.Errorf("wakes (-want +got):\n%s", diff)
	}
	// A failed wake is an error and is not remembered as written.
	p.fail = errors.New("forbidden")
	step(time.Second)
	if err := d.wake(ctx, b); err == nil {
		t.Error("wake with a failing write: no error")
	}
	if err := d.wake(ctx, b); err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff([]string{"ns/pythonlambdas.v1.example.com/b@4.5s"}, p.take()); diff != "" {
		t.Errorf("wake after a failure (-want +got):\n%s", diff)
	}
}

func sorted(s []string) []string {
	out := slices.Clone(s)
	slices.Sort(out)
	return out
}

func isHeld(r *Router, key string) bool {
	r.held.mu.Lock()
	defer r.held.mu.Unlock()
	return r.held.n[key] > 0
}

func wakeAnnotated(value string) ingressOption {
	return func(ing *networkingv1.Ingress) { ing.Annotations = map[string]string{WakeTargetAnnotation: value} }
}

// TestServeHTTPHold drives held requests with a hand-built table: the demand write
// stands in for the scaler, and a new table for the endpoint it brings.
func TestServeHTTPHold(t *testing.T) {
	dial := startBackends(t, map[string]string{"10.0.0.1:8080": "woken"})
	cold := world{
		ingresses: []*networkingv1.Ingress{
			newIngress("sleepy", rule("sleepy.example.com", prefix("/", "sleepy")), wakeAnnotated("pythonlambdas.v1.example.com/sleepy")),
			newIngress("never", rule("never.example.com", prefix("/", "never")), wakeAnnotated("pythonlambdas.v1.example.com/never")),
			newIngress("bad", rule("bad.example.com", prefix("/", "bad")), wakeAnnotated("pythonlambdas/bad")),
			newIngress("plain", rule("plain.example.com", prefix("/", "plain"))),
		},
		services: []*corev1.Service{newService("sleepy"), newService("never"), newService("bad"), newService("plain")},
	}
	warm := cold
	warm.slices = []*discoveryv1.EndpointSlice{newSlice("sleepy-1", "sleepy", ready("10.0.0.1"))}

	r := newTestRouter(t, nil, func(o *Options) { o.Dial, o.HoldTimeout, o.MaxHeld = dial, time.Second, 1 })
	var mu sync.Mutex
	var woken []string
	r.demand = newDemand(func(_ context.Context, wt *wakeTarget, _ time.Time) error {
		mu.Lock()
		woken = append(woken, wt.name)
		mu.Unlock()
		if wt.name == "sleepy" {
			go func() { // the scaler: an endpoint comes up a little later
				time.Sleep(50 * time.Millisecond)
				r.table.Store(buildTable(warm, "", r.table.Load()))
				r.rebuilt.notify()
			}()
		}
		return nil
	}, time.Minute)
	r.table.Store(buildTable(cold, "", nil))
	srv := httptest.NewServer(r)
	t.Cleanup(srv.Close)

	t.Run("a request without endpoints answers 503 at once without the annotation", func(t *testing.T) {
		checkAnswer(t, srv.URL+"/", "plain.example.com", response{code: 503, body: "backend ns/plain:80 of Ingress ns/plain is unavailable: no ready endpoints"})
	})
	t.Run("a malformed annotation is named", func(t *testing.T) {
		checkAnswer(t, srv.URL+"/", "bad.example.com", response{code: 503,
			body: `backend ns/bad:80 of Ingress ns/bad is unavailable: no ready endpoints, and the Ingress's annotation metalambda.dev/wake-target "pythonlambdas/bad" is not <resource>.<version>.<group>/<name>`})
	})
	t.Run("a held request is answered once an endpoint is ready", func(t *testing.T) {
		got, err := get(t.Context(), srv.URL+"/x", "sleepy.example.com")
		if err != nil || got.code != 200 || got.echo.Backend != "woken" || got.echo.Path != "/x" {
			t.Errorf("held request: %+v, %v", got, err)
		}
	})
	t.Run("past HoldTimeout: 503 with Retry-After", func(t *testing.T) {
		code, retry, body := getWithRetryAfter(t, srv.URL+"/", "never.example.com")
		want := "backend ns/never:80 of Ingress ns/never: ns/pythonlambdas.v1.example.com/never is scaled to zero and waking it failed: no endpoint became ready in time (waited 1s, Options.HoldTimeout)"
		if code != 503 || retry != "1" || body != want {
			t.Errorf("answered %d, Retry-After %q, %q; want 503, 1, %q", code, retry, body, want)
		}
	})
	t.Run("past MaxHeld: 503 with Retry-After at once", func(t *testing.T) {
		first := make(chan int)
		go func() {
			code, _, _ := getWithRetryAfter(t, srv.URL+"/", "never.example.com")
			first <- code
		}()
		for !isHeld(r, "ns/pythonlambdas.v1.example.com/never") {
			time.Sleep(5 * time.Millisecond)
		}
		code, retry, body := getWithRetryAfter(t, srv.URL+"/", "never.example.com")
		if code != 503 || retry != "1" || !strings.Contains(body, "too many requests are already held (1, Options.MaxHeld)") {
			t.Errorf("second request: %d, Retry-After %q, %q", code, retry, body)
		}
		if code := <-first; code != 503 {
			t.Errorf("first request: %d, want 503 after its hold", code)
		}
	})
	mu.Lock()
	defer mu.Unlock()
	if diff := cmp.Diff([]string{"sleepy", "never"}, woken); diff != "" {
		t.Errorf("demand writes (-want +got):\n%s", diff)
	}
}

func getWithRetryAfter(t *testing.T, url, host string) (int, string, string) {
	req, _ := http.NewRequestWithContext(t.Context(), http.MethodGet, url, nil)
	req.Host = host
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Error(err)
		return 0, "", ""
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, resp.Header.Get("Retry-After"), strings.TrimSpace(string(body))
}
