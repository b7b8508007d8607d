package dashboard

import (
	"fmt"
	"html"
	"io"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strings"
	"sync/atomic"
	"testing"

	authenticationv1 "k8s.io/api/authentication/v1"
	"k8s.io/client-go/rest"
)

// fakePythonLambdaAPI is a Kubernetes API that knows one PythonLambda, demo/hello,
// served at host.
func fakePythonLambdaAPI(t *testing.T, host string) *httptest.Server {
	t.Helper()
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path != "/apis/example.com/v1/namespaces/demo/pythonlambdas/hello" {
			http.NotFound(w, r)
			return
		}
		w.Header().Set("Content-Type", "application/json")
		_, _ = io.WriteString(w, `{"apiVersion":"example.com/v1","kind":"PythonLambda","metadata":{"name":"hello","namespace":"demo"},"spec":{"host":"`+host+`"}}`)
	}))
	t.Cleanup(srv.Close)
	return srv
}

// recordingServer counts the requests it gets.
func recordingServer(t *testing.T) (*httptest.Server, *atomic.Int32) {
	t.Helper()
	var hits atomic.Int32
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		hits.Add(1)
		_, _ = io.WriteString(w, `{"secret":"from the victim"}`)
	}))
	t.Cleanup(srv.Close)
	return srv, &hits
}

// postTry sends "try it" of demo/hello with path and body, logged in, as htmx does
// when htmx is set.
func postTry(t *testing.T, h *testServer, path, body string, htmx bool) *httptest.ResponseRecorder {
	t.Helper()
	cookie, csrf := login(t, h)
	form := url.Values{"path": {path}, "body": {body}}
	r := httptest.NewRequest(http.MethodPost, Prefix+"/pythonlambdas/demo/hello/try", strings.NewReader(form.Encode()))
	r.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	r.Header.Set(csrfHeader, csrf)
	if htmx {
		r.Header.Set("HX-Request", "true")
	}
	r.AddCookie(cookie)
	return serve(h, r)
}

// A PythonLambda that answers with a redirect to a loopback service must not make
// the dashboard send the user's request (body included, for a 307) there: the user
// sees the redirect itself.
func TestTryItDoesNotFollowRedirects(t *testing.T) {
	for _, status := range []int{http.StatusMovedPermanently, http.StatusFound, http.StatusSeeOther, http.StatusTemporaryRedirect, http.StatusPermanentRedirect} {
		t.Run(http.StatusText(status), func(t *testing.T) {
			victim, hits := recordingServer(t)
			var gotHost atomic.Value
			ingress := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				gotHost.Store(r.Host)
				http.Redirect(w, r, victim.URL+"/v3/kv/put", status)
			}))
			defer ingress.Close()
			api := fakePythonLambdaAPI(t, "hello.example")
			h, _ := testDashboardWith(t, func(o *Options) {
				o.Config.Host = api.URL
				o.IngressAddress = ingress.Listener.Addr().String()
			})
			rec := postTry(t, h, "/", `{"key":"Zm9v","value":"YmFy"}`, false)
			if n := hits.Load(); n != 0 {
				t.Fatalf("the redirect's target got %d requests", n)
			}
			if gotHost.Load() != "hello.example" {
				t.Errorf("the ingress got Host %v, want hello.example", gotHost.Load())
			}
			body := rec.Body.String()
			for _, want := range []string{fmt.Sprintf("%d %s", status, http.StatusText(status)), "The answer redirects to <code>" + victim.URL + "/v3/kv/put</code>"} {
				if !strings.Contains(body, want) {
					t.Errorf("the answer does not show %q:\n%s", want, body)
				}
			}
			if rec.Code != http.StatusOK || strings.Contains(body, "from the victim") {
				t.Errorf("answer %d %s, want 200 with the redirect alone", rec.Code, body)
			}
		})
	}
}

// A refused connection is shown with what was refused and why: 502 to a plain
// request, 200 to htmx (which swaps only 2xx answers).
func TestTryItShowsARefusedDestination(t *testing.T) {
	ingress, hits := recordingServer(t)
	api := fakePythonLambdaAPI(t, "hello.example")
	for _, tt := range []struct {
		name     string
		htmx     bool
		wantCode int
	}{
		{"plain", false, http.StatusBadGateway},
		{"htmx", true, http.StatusOK},
	} {
		t.Run(tt.name, func(t *testing.T) {
			h, _ := testDashboardWith(t, func(o *Options) {
				o.Config.Host = api.URL
				o.IngressAddress = ingress.Listener.Addr().String()
			})
			// A client that allows another address than the ingress's: as if a
			// request went elsewhere than the ingress.
			var err error
			if h.d.try, err = tryClient("192.0.2.1:80", nil); err != nil {
				t.Fatal(err)
			}
			rec := postTry(t, h, "/", "", tt.htmx)
			want := html.EscapeString(`"try it" did not call the ingress: refusing to connect to ` + ingress.Listener.Addr().String() + `: loopback addresses are not reachable from "try it".`)
			if rec.Code != tt.wantCode || !strings.Contains(rec.Body.String(), want) {
				t.Errorf("answer %d %s\nwant %d with %s", rec.Code, rec.Body.String(), tt.wantCode, want)
			}
			if n := hits.Load(); n != 0 {
				t.Errorf("the ingress got %d requests", n)
			}
		})
	}
}

func TestTryClientAllowsTheIngressAlone(t *testing.T) {
	ingress, ingressHits := recordingServer(t)
	other, otherHits := recordingServer(t)
	client, err := tryClient(ingress.Listener.Addr().String(), nil)
	if err != nil {
		t.Fatal(err)
	}
	resp, err := client.Get(ingress.URL)
	if err != nil {
		t.Fatalf("the ingress: %v", err)
	}
	resp.Body.Close()
	if _, err := client.Get(other.URL); err == nil || !strings.Contains(err.Error(), "loopback addresses are not reachable") {
		t.Errorf("another loopback server: error %v, want it refused", err)
	}
	if ingressHits.Load() != 1 || otherHits.Load() != 0 {
		t.Errorf("requests: %d to the ingress, %d to another server; want 1 and 0", ingressHits.Load(), otherHits.Load())
	}
}

func TestNewRefusesABadIngressAddress(t *testing.T) {
	opts := Defaults()
	opts.Config, opts.IngressAddress = &rest.Config{}, "no-port"
	opts.Authenticate = func(*http.Request, string) (*authenticationv1.UserInfo, error) { return nil, nil }
	_, err := New(opts)
	if err == nil {
		t.Error("New accepted the ingress address no-port")
	}
}
