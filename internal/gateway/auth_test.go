package gateway

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"net/http"
	"net/http/httptest"
	"strconv"
	"sync/atomic"
	"testing"
	"time"

	authenticationv1 "k8s.io/api/authentication/v1"
	authorizationv1 "k8s.io/api/authorization/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/kubernetes/fake"
	clienttesting "k8s.io/client-go/testing"

	"github.com/metalambda/metalambda/internal/httpapi"
)

// reviewAPI answers TokenReviews (only goodToken is accepted) and SubjectAccessReviews
// (everything is allowed), and counts them.
type reviewAPI struct {
	kube           *fake.Clientset
	tokenReviews   atomic.Int64
	accessReviews  atomic.Int64
	acceptedTokens map[string]bool
	// refused are the verbs SubjectAccessReviews of users named "viewer" refuse
	// ("get /metrics" for a path).
	refused map[string]bool
}

const (
	goodToken   = "good-token"
	viewerToken = "viewer-token" // user "viewer": what refused names is refused
)

func newReviewAPI() *reviewAPI {
	api := &reviewAPI{kube: fake.NewClientset(), acceptedTokens: map[string]bool{goodToken: true, viewerToken: true}, refused: map[string]bool{}}
	api.kube.PrependReactor("create", "tokenreviews", func(a clienttesting.Action) (bool, runtime.Object, error) {
		api.tokenReviews.Add(1)
		tr := a.(clienttesting.CreateAction).GetObject().(*authenticationv1.TokenReview)
		if api.acceptedTokens[tr.Spec.Token] {
			tr.Status = authenticationv1.TokenReviewStatus{Authenticated: true, User: authenticationv1.UserInfo{Username: "dev", Groups: []string{"devs"}}}
			if tr.Spec.Token == viewerToken {
				tr.Status.User.Username = "viewer"
			}
		}
		return true, tr, nil
	})
	api.kube.PrependReactor("create", "subjectaccessreviews", func(a clienttesting.Action) (bool, runtime.Object, error) {
		api.accessReviews.Add(1)
		sar := a.(clienttesting.CreateAction).GetObject().(*authorizationv1.SubjectAccessReview)
		verb := ""
		if ra := sar.Spec.ResourceAttributes; ra != nil {
			verb = ra.Verb
		} else if nra := sar.Spec.NonResourceAttributes; nra != nil {
			verb = nra.Verb + " " + nra.Path
		}
		sar.Status.Allowed = sar.Spec.User != "viewer" || !api.refused[verb]
		return true, sar, nil
	})
	return api
}

func testAuthOptions(size int) authOptions {
	return authOptions{ttl: 10 * time.Second, negativeTTL: 2 * time.Second, cacheSize: size, failures: failureLimits{Burst: 5, Rate: 1}}
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

// TestAuthCachesAreBounded: 20,000 random tokens, each from its own address so that no
// rate limit stops them, leave at most the bound in every cache.
func TestAuthCachesAreBounded(t *testing.T) {
	const bound, tokens = 1000, 20000
	api := newReviewAPI()
	a := newAuthorizer(api.kube, testAuthOptions(bound))
	for i := range tokens {
		addr := "10." + strconv.Itoa(i>>16&255) + "." + strconv.Itoa(i>>8&255) + "." + strconv.Itoa(i&255) + ":1234"
		if _, err := a.authorize(context.Background(), requestWith(randomToken(t), addr), "list", "ns"); err == nil || err.Status != http.StatusUnauthorized {
			t.Fatalf("random token: %v, want 401", err)
		}
	}
	if got := api.tokenReviews.Load(); got != tokens {
		t.Errorf("%d TokenReviews for %d random tokens", got, tokens)
	}
	for name, n := range map[string]int{"tokens": a.users.Len(), "decisions": a.decisions.Len(), "clients": a.failures.clients.Len()} {
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
	api := newReviewAPI()
	a := newAuthorizer(api.kube, testAuthOptions(100))
	now := time.Unix(1000, 0)
	a.now = func() time.Time { return now }
	a.failures.now = a.now
	call := func(token string) *httpapi.Error {
		_, err := a.authorize(context.Background(), requestWith(token, "10.0.0.1:1"), "get", "ns")
		return err
	}
	for range 3 {
		if err := call(goodToken); err != nil {
			t.Fatalf("good token: %v", err)
		}
		if err := call("bad"); err == nil || err.Status != http.StatusUnauthorized {
			t.Fatalf("bad token: %v, want 401", err)
		}
	}
	if tr, sar := api.tokenReviews.Load(), api.accessReviews.Load(); tr != 2 || sar != 1 {
		t.Fatalf("within the TTLs: %d TokenReviews and %d SubjectAccessReviews, want 2 and 1", tr, sar)
	}
	now = now.Add(3 * time.Second) // past the negative TTL, within the TTL
	_, _ = call(goodToken), call("bad")
	if tr := api.tokenReviews.Load(); tr != 3 {
		t.Fatalf("after the negative TTL: %d TokenReviews, want 3 (the refused token again)", tr)
	}
	now = now.Add(10 * time.Second) // past the TTL
	_ = call(goodToken)
	if tr, sar := api.tokenReviews.Load(), api.accessReviews.Load(); tr != 4 || sar != 2 {
		t.Fatalf("after the TTL: %d TokenReviews and %d SubjectAccessReviews, want 4 and 2", tr, sar)
	}
}

// TestFailedAuthenticationsAreRateLimited: after the burst a client gets 429 with
// Retry-After, without a TokenReview, until its bucket refills; a token the API
// accepted recently still works from there, and other clients are not held back.
func TestFailedAuthenticationsAreRateLimited(t *testing.T) {
	api := newReviewAPI()
	a := newAuthorizer(api.kube, testAuthOptions(100))
	now := time.Unix(1000, 0)
	a.now = func() time.Time { return now }
	a.failures.now = a.now
	g := &Gateway{auth: a}
	h := g.authorized("list", func(w http.ResponseWriter, _ *http.Request) { w.WriteHeader(http.StatusOK) })
	serve := func(token, addr string) *httptest.ResponseRecorder {
		w := httptest.NewRecorder()
		h(w, requestWith(token, addr))
		return w
	}
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
	reviews := api.tokenReviews.Load()
	w := serve("bad-again", "10.0.0.1:3")
	if w.Code != http.StatusTooManyRequests || w.Header().Get("Retry-After") != "1" {
		t.Fatalf("failure past the burst = %d, Retry-After %q; want 429 and 1", w.Code, w.Header().Get("Retry-After"))
	}
	if api.tokenReviews.Load() != reviews {
		t.Errorf("a held-back client still cost a TokenReview")
	}
	if w := serve(goodToken, "10.0.0.1:4"); w.Code != http.StatusOK {
		t.Errorf("a recently accepted token from a held-back address = %d, want 200", w.Code)
	}
	if w := serve("bad-elsewhere", "10.0.0.2:1"); w.Code != http.StatusUnauthorized {
		t.Errorf("another client = %d, want 401", w.Code)
	}
	now = now.Add(time.Second)
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
