package httpapi

import (
	"crypto/rand"
	"encoding/hex"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/util/wait"

	"github.com/metalambda/metalambda/internal/httpapi/httpapitest"
)

const goodToken = httpapitest.GoodToken

func testAuthOptions(size int) AuthOptions {
	o := AuthOptions{TTL: 10 * time.Second, NegativeTTL: 2 * time.Second, CacheSize: size, Failures: FailureLimits{Burst: 5, Rate: 1},
		RetryBackoff: &wait.Backoff{Duration: time.Millisecond, Steps: 1}}
	o.UnknownTokens = FailureLimits{Burst: 1 << 20, Rate: 1} // tests that want it set it lower
	return o
}

func newAuthorizer(t *testing.T, api *httpapitest.Reviews, o AuthOptions) *Auth {
	t.Helper()
	a, err := NewAuth(api.Kube, o)
	if err != nil {
		t.Fatal(err)
	}
	return a
}

func requestWith(token, addr string) *http.Request {
	r := httptest.NewRequest(http.MethodGet, "/v1/namespaces/ns/functions", nil)
	r.RemoteAddr = addr
	if token != "" {
		r.Header.Set("Authorization", "Bearer "+token)
	}
	return r
}

func randomToken(t *testing.T) string {
	b := make([]byte, 16)
	if _, err := rand.Read(b); err != nil {
		t.Fatal(err)
	}
	return hex.EncodeToString(b)
}

// functionAccess is what the gateway's management API asks for.
func functionAccess(verb string) func(*http.Request) Access {
	return func(*http.Request) Access {
		return Access{Verb: verb, Group: "metalambda.dev", Resource: "functions", Namespace: "ns"}
	}
}

// authorize is a test's call of Check for functions in namespace.
func (a *Auth) authorize(r *http.Request, verb, namespace string) *Error {
	_, err := a.Check(r, Access{Verb: verb, Group: "metalambda.dev", Resource: "functions", Namespace: namespace})
	return err
}

// TestAuthCachesAreBounded: 20,000 random tokens, each from its own address so that no
// rate limit stops them, leave at most the bound in every cache.
func TestAuthCachesAreBounded(t *testing.T) {
	const bound, tokens = 1000, 20000
	api := httpapitest.NewReviews(t)
	a := newAuthorizer(t, api, testAuthOptions(bound))
	for i := range tokens {
		addr := "10." + strconv.Itoa(i>>16&255) + "." + strconv.Itoa(i>>8&255) + "." + strconv.Itoa(i&255) + ":1234"
		if err := a.authorize(requestWith(randomToken(t), addr), "list", "ns"); err == nil || err.Status != http.StatusUnauthorized {
			t.Fatalf("random token: %v, want 401", err)
		}
	}
	if got := api.TokenReviews.Load(); got != tokens {
		t.Errorf("%d TokenReviews for %d random tokens", got, tokens)
	}
	for name, n := range map[string]int{"tokens": a.users.Len(), "decisions": a.decisions.Len(), "clients": a.failures.clients.lru.Len()} {
		if n > bound {
			t.Errorf("%s cache holds %d entries, over its bound of %d", name, n, bound)
		}
	}
	if a.users.Len() != bound {
		t.Errorf("tokens cache holds %d entries, want it full at %d", a.users.Len(), bound)
	}
}

// TestAuthCacheTTLs: an accepted token is reused for the TTL, a refused one for the
// negative TTL only.
func TestAuthCacheTTLs(t *testing.T) {
	api := httpapitest.NewReviews(t)
	a := newAuthorizer(t, api, testAuthOptions(100))
	now := fakeClock(a)
	call := func(token string) *Error {
		return a.authorize(requestWith(token, "10.0.0.1:1"), "get", "ns")
	}
	for range 3 {
		if err := call(goodToken); err != nil {
			t.Fatalf("good token: %v", err)
		}
		if err := call("bad"); err == nil || err.Status != http.StatusUnauthorized {
			t.Fatalf("bad token: %v, want 401", err)
		}
	}
	if tr, sar := api.TokenReviews.Load(), api.AccessReviews.Load(); tr != 2 || sar != 1 {
		t.Fatalf("within the TTLs: %d TokenReviews and %d SubjectAccessReviews, want 2 and 1", tr, sar)
	}
	*now = now.Add(3 * time.Second) // past the negative TTL, within the TTL
	_, _ = call(goodToken), call("bad")
	if tr := api.TokenReviews.Load(); tr != 3 {
		t.Fatalf("after the negative TTL: %d TokenReviews, want 3 (the refused token again)", tr)
	}
	*now = now.Add(10 * time.Second) // past the TTL
	_ = call(goodToken)
	if tr, sar := api.TokenReviews.Load(), api.AccessReviews.Load(); tr != 4 || sar != 2 {
		t.Fatalf("after the TTL: %d TokenReviews and %d SubjectAccessReviews, want 4 and 2", tr, sar)
	}
}

// TestFailedAuthenticationsAreRateLimited: after the burst a client gets 429 with
// Retry-After, without a TokenReview, until its bucket refills; a token the API
// accepted recently still works from there, and other clients are not held back.
func TestFailedAuthenticationsAreRateLimited(t *testing.T) {
	api := httpapitest.NewReviews(t)
	a := newAuthorizer(t, api, testAuthOptions(100))
	now := fakeClock(a)
	h := a.Require(functionAccess("list"))(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) { w.WriteHeader(http.StatusOK) }))
	serve := server(h)
	if w := serve(goodToken, "10.0.0.1:1"); w.Code != http.StatusOK {
		t.Fatalf("good token = %d", w.Code)
	}
	for i := range 5 {
		token := "bad-" + strconv.Itoa(i)
		if i == 4 {
			token = "" // no token at all counts as a failure too
		}
		if w := serve(token, "10.0.0.1:2"); w.Code != http.StatusUnauthorized {
			t.Fatalf("failure %d = %d, want 401", i+1, w.Code)
		}
	}
	reviews := api.TokenReviews.Load()
	w := serve("bad-again", "10.0.0.1:3")
	if w.Code != http.StatusTooManyRequests || w.Header().Get("Retry-After") != "1" {
		t.Fatalf("failure past the burst = %d, Retry-After %q; want 429 and 1", w.Code, w.Header().Get("Retry-After"))
	}
	if api.TokenReviews.Load() != reviews {
		t.Errorf("a held-back client still cost a TokenReview")
	}
	if w := serve(goodToken, "10.0.0.1:4"); w.Code != http.StatusOK {
		t.Errorf("a recently accepted token from a held-back address = %d, want 200", w.Code)
	}
	if w := serve("bad-elsewhere", "10.0.0.2:1"); w.Code != http.StatusUnauthorized {
		t.Errorf("another client = %d, want 401", w.Code)
	}
	*now = now.Add(time.Second)
	if w := serve("bad-later", "10.0.0.1:5"); w.Code != http.StatusUnauthorized {
		t.Errorf("a second later = %d, want 401 (one more attempt allowed)", w.Code)
	}
}

func TestRetryAfterSeconds(t *testing.T) {
	for _, tt := range []struct {
		d    time.Duration
		want int
	}{{0, 1}, {time.Millisecond, 1}, {time.Second, 1}, {1500 * time.Millisecond, 2}, {10 * time.Second, 10}} {
		if got := retryAfterSeconds(tt.d); got != tt.want {
			t.Errorf("retryAfterSeconds(%v) = %d, want %d", tt.d, got, tt.want)
		}
	}
}

// TestRequire: the middleware answers 401 without a token or with one the API
// refuses, 403 when the SubjectAccessReview denies, 502 when the API does not answer,
// and lets an allowed request through with its caller.
func TestRequire(t *testing.T) {
	api := httpapitest.NewReviews(t)
	api.Refused["delete"] = true
	a := newAuthorizer(t, api, testAuthOptions(100))
	var seen *Caller
	h := a.Require(func(r *http.Request) Access {
		return Access{Verb: r.URL.Query().Get("verb"), Group: "metalambda.dev", Resource: "functions", Namespace: "ns"}
	})(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		seen = CallerFrom(r.Context())
		w.WriteHeader(http.StatusOK)
	}))
	for i, tt := range []struct {
		name, token, verb string
		want              int
		says              string
	}{
		{"no token", "", "get", 401, "bearer token is required"},
		{"a token the API refuses", "nonsense", "get", 401, "does not accept"},
		{"a denied verb", httpapitest.ViewerToken, "delete", 403, `user "viewer" may not delete functions.metalambda.dev in namespace "ns"`},
		{"an allowed verb", httpapitest.ViewerToken, "get", 200, ""},
	} {
		t.Run(tt.name, func(t *testing.T) {
			seen = nil
			r := requestWith(tt.token, "10.0.0."+strconv.Itoa(i)+":1")
			r.URL.RawQuery = "verb=" + tt.verb
			w := httptest.NewRecorder()
			h.ServeHTTP(w, r)
			said := ""
			if err := ResponseError(w.Result()); err != nil {
				said = err.Error()
			}
			if w.Code != tt.want || !strings.Contains(said, tt.says) {
				t.Errorf("%d %q, want %d saying %q", w.Code, said, tt.want, tt.says)
			}
			if tt.want == 200 && (seen == nil || seen.User.Username != "viewer" || seen.Token != tt.token) {
				t.Errorf("the handler saw caller %+v, want viewer with its token", seen)
			}
		})
	}
	t.Run("the API failing", func(t *testing.T) {
		api.Failing.Store(true)
		defer api.Failing.Store(false)
		w := httptest.NewRecorder()
		h.ServeHTTP(w, requestWith("never-seen", "10.0.1.1:1"))
		if w.Code != http.StatusBadGateway || !strings.Contains(w.Body.String(), "kubernetes_unavailable") {
			t.Errorf("%d %s, want 502 kubernetes_unavailable", w.Code, w.Body)
		}
	})
}

// TestPathAccess: a path that is no resource is asked as nonResourceAttributes.
func TestPathAccess(t *testing.T) {
	api := httpapitest.NewReviews(t)
	api.Refused["get /metrics"] = true
	a := newAuthorizer(t, api, testAuthOptions(100))
	metrics := Access{Verb: "get", Path: "/metrics", Denied: func(u string) string { return "user " + u + " may not read the metrics" }}
	if _, err := a.Check(requestWith(httpapitest.ViewerToken, "10.0.0.1:1"), metrics); err == nil || err.Status != 403 || err.Message != "user viewer may not read the metrics" {
		t.Errorf("viewer: %v, want 403 with the Denied message", err)
	}
	if _, err := a.Check(requestWith(goodToken, "10.0.0.1:1"), metrics); err != nil {
		t.Errorf("dev: %v", err)
	}
}
