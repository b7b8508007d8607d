package httpapi

import (
	"net/http"
	"net/http/httptest"
	"net/netip"
	"strconv"
	"sync"
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/util/wait"

	"github.com/metalambda/metalambda/internal/httpapi/httpapitest"
)

// The tests of the red-team review's findings: each failed on the code before its fix.
// They count reviews and answers, never time: a held API (Reviews.Hold) stands for
// a slow one.

// fakeClock makes a's clocks a fake one that only tests move.
func fakeClock(a *Auth) *time.Time {
	now := time.Unix(1000, 0)
	a.now = func() time.Time { return now }
	a.failures.now = a.now
	return &now
}

// server serves one request of token from addr with h.
func server(h http.Handler) func(token, addr string) *httptest.ResponseRecorder {
	return func(token, addr string) *httptest.ResponseRecorder {
		w := httptest.NewRecorder()
		h.ServeHTTP(w, requestWith(token, addr))
		return w
	}
}

// sprayAuth is an authorizer whose global budget of unknown tokens is 10, then
// one a second, on a fake clock.
func sprayAuth(t *testing.T) (*httpapitest.Reviews, *Auth, *time.Time) {
	api := httpapitest.NewReviews(t)
	o := testAuthOptions(1000)
	o.UnknownTokens = FailureLimits{Burst: 10, Rate: 1}
	a := newAuthorizer(t, api, o)
	return api, a, fakeClock(a)
}

// eventually polls cond until it holds or a generous deadline passes; a test that
// uses it asserts counts afterwards, so that the deadline only decides how long the
// old code's failure takes to show.
func eventually(cond func() bool) bool {
	for deadline := time.Now().Add(2 * time.Second); time.Now().Before(deadline); time.Sleep(time.Millisecond) {
		if cond() {
			return true
		}
	}
	return cond()
}

// concurrently serves the requests at once through h, with api held until every
// request is either held by it or answered, and returns the answers' statuses.
func concurrently(api *httpapitest.Reviews, h http.Handler, reqs []*http.Request) []*httptest.ResponseRecorder {
	out := make([]*httptest.ResponseRecorder, len(reqs))
	var wg sync.WaitGroup
	var mu sync.Mutex
	answered := 0
	for i, r := range reqs {
		wg.Go(func() {
			w := httptest.NewRecorder()
			h.ServeHTTP(w, r)
			mu.Lock()
			out[i] = w
			answered++
			mu.Unlock()
		})
	}
	eventually(func() bool {
		mu.Lock()
		defer mu.Unlock()
		return int(api.Held.Load())+answered >= len(reqs)
	})
	close(api.Hold)
	wg.Wait()
	return out
}

func okHandler(a *Auth) http.Handler {
	return a.Require(functionAccess("list"))(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) { w.WriteHeader(http.StatusOK) }))
}

func statuses(ws []*httptest.ResponseRecorder) map[int]int {
	out := map[int]int{}
	for _, w := range ws {
		out[w.Code]++
	}
	return out
}

// F1: requests that need the same review at once cost one TokenReview (and one
// SubjectAccessReview), not one each.
func TestIdenticalReviewsAreSentOnce(t *testing.T) {
	api := httpapitest.NewReviews(t)
	api.Hold = make(chan struct{})
	a := newAuthorizer(t, api, testAuthOptions(100))
	var reqs []*http.Request
	for i := range 10 {
		reqs = append(reqs, requestWith(goodToken, "10.0.0."+strconv.Itoa(i)+":1"))
	}
	got := statuses(concurrently(api, okHandler(a), reqs))
	if got[http.StatusOK] != 10 {
		t.Errorf("answers %v, want 10 × 200", got)
	}
	if tr, sar := api.TokenReviews.Load(), api.AccessReviews.Load(); tr != 1 || sar != 1 {
		t.Errorf("%d TokenReviews and %d SubjectAccessReviews for one token at once, want 1 and 1", tr, sar)
	}
}

// F1: no more reviews than MaxInFlightReviews are in flight; more answer 503 with
// Retry-After at once, without asking the API.
func TestReviewsInFlightAreBounded(t *testing.T) {
	api := httpapitest.NewReviews(t)
	api.Hold = make(chan struct{})
	o := testAuthOptions(100)
	o.MaxInFlightReviews = 2
	a := newAuthorizer(t, api, o)
	var reqs []*http.Request
	for i := range 8 {
		reqs = append(reqs, requestWith(randomToken(t), "10.0.0."+strconv.Itoa(i)+":1"))
	}
	ws := concurrently(api, okHandler(a), reqs)
	if got := statuses(ws); got[http.StatusUnauthorized] != 2 || got[http.StatusServiceUnavailable] != 6 {
		t.Errorf("answers %v, want 2 × 401 and 6 × 503", got)
	}
	for _, w := range ws {
		if w.Code == http.StatusServiceUnavailable && w.Header().Get("Retry-After") != "1" {
			t.Errorf("503 with Retry-After %q, want 1", w.Header().Get("Retry-After"))
		}
	}
	if n := api.Calls.Load(); n != 2 {
		t.Errorf("the API got %d reviews at once, want 2", n)
	}
}

// F1: after the API failed a review (its retries spent), reviews answer 503 with
// Retry-After without asking it, until the cooldown has passed; a cached token still
// works meanwhile.
func TestAFailingAPIIsNotAskedDuringTheCooldown(t *testing.T) {
	api := httpapitest.NewReviews(t)
	o := testAuthOptions(100)
	o.RetryBackoff = &wait.Backoff{Duration: time.Millisecond, Steps: 3}
	o.FailureCooldown = 5 * time.Second
	a := newAuthorizer(t, api, o)
	now := fakeClock(a)
	h := okHandler(a)
	serve := server(h)
	if w := serve(goodToken, "10.0.0.1:1"); w.Code != http.StatusOK {
		t.Fatalf("good token = %d", w.Code)
	}
	api.Failing.Store(true)
	before := api.Calls.Load()
	if w := serve("never-seen", "10.0.1.1:1"); w.Code != http.StatusBadGateway || w.Header().Get("Retry-After") != "5" {
		t.Fatalf("the first failure = %d, Retry-After %q; want 502 and 5", w.Code, w.Header().Get("Retry-After"))
	}
	if n := api.Calls.Load() - before; n != 3 {
		t.Fatalf("the first failure cost %d calls, want 3 (the retries)", n)
	}
	for i := range 20 {
		w := serve(randomToken(t), "10.0.2."+strconv.Itoa(i)+":1")
		if w.Code != http.StatusServiceUnavailable || w.Header().Get("Retry-After") == "" {
			t.Fatalf("during the cooldown = %d, Retry-After %q; want 503 with Retry-After", w.Code, w.Header().Get("Retry-After"))
		}
	}
	if n := api.Calls.Load() - before; n != 3 {
		t.Errorf("20 requests during the cooldown cost %d more calls, want none", n-3)
	}
	if w := serve(goodToken, "10.0.0.1:1"); w.Code != http.StatusOK {
		t.Errorf("a cached token during the cooldown = %d, want 200", w.Code)
	}
	*now = now.Add(5 * time.Second)
	api.Failing.Store(false)
	if w := serve(randomToken(t), "10.0.3.1:1"); w.Code != http.StatusUnauthorized {
		t.Errorf("after the cooldown = %d, want 401 (the API asked again)", w.Code)
	}
}

// F1: a review the API failed counts as a failure of the client, so that a client
// cannot keep a failing API busy with retries.
func TestFailedReviewsCountAsFailures(t *testing.T) {
	api := httpapitest.NewReviews(t)
	api.Failing.Store(true)
	a := newAuthorizer(t, api, testAuthOptions(100))
	fakeClock(a)
	for i := range 5 {
		if err := a.authorize(requestWith(randomToken(t), "10.0.0.1:1"), "list", "ns"); err == nil || err.Status != http.StatusBadGateway {
			t.Fatalf("failure %d: %v, want 502", i+1, err)
		}
		a.gate.openUntil = time.Time{} // the next review asks the API again, at the same instant

	}
	before := api.Calls.Load()
	if err := a.authorize(requestWith(randomToken(t), "10.0.0.1:1"), "list", "ns"); err == nil || err.Status != http.StatusTooManyRequests {
		t.Errorf("past the burst: %v, want 429", err)
	}
	if api.Calls.Load() != before {
		t.Error("a held-back client still cost a review")
	}
}

// F2: concurrent bad tokens from one client cost no more TokenReviews than its burst:
// the budget is taken before the review, not after.
func TestConcurrentBadTokensAreLimited(t *testing.T) {
	api := httpapitest.NewReviews(t)
	api.Hold = make(chan struct{})
	a := newAuthorizer(t, api, testAuthOptions(100)) // a burst of 5
	fakeClock(a)
	var reqs []*http.Request
	for range 20 {
		reqs = append(reqs, requestWith(randomToken(t), "10.0.0.1:1"))
	}
	got := statuses(concurrently(api, okHandler(a), reqs))
	if got[http.StatusUnauthorized] != 5 || got[http.StatusTooManyRequests] != 15 {
		t.Errorf("answers %v, want 5 × 401 and 15 × 429", got)
	}
	if n := api.TokenReviews.Load(); n != 5 {
		t.Errorf("%d TokenReviews, want 5", n)
	}
}

// F2: a token the API accepts costs the client nothing of its budget.
func TestAcceptedTokensAreNotCounted(t *testing.T) {
	api := httpapitest.NewReviews(t)
	a := newAuthorizer(t, api, testAuthOptions(100))
	fakeClock(a)
	api.Accepted = map[string]bool{}
	for i := range 10 {
		token := "good-" + strconv.Itoa(i)
		api.Accepted[token] = true
		if err := a.authorize(requestWith(token, "10.0.0.1:1"), "list", "ns"); err != nil {
			t.Fatalf("accepted token %d: %v", i, err)
		}
	}
}

// F3: an IPv6 client is one client per /64, whatever address of it it uses.
func TestIPv6ClientsAreLimitedPer64(t *testing.T) {
	api := httpapitest.NewReviews(t)
	a := newAuthorizer(t, api, testAuthOptions(100))
	fakeClock(a)
	for i := range 10 {
		a.authorize(requestWith(randomToken(t), "[2001:db8:1:2::"+strconv.FormatInt(int64(i+1), 16)+"]:1"), "list", "ns")
	}
	if n := api.TokenReviews.Load(); n != 5 {
		t.Errorf("10 addresses of one /64 cost %d TokenReviews, want its burst of 5", n)
	}
	if err := a.authorize(requestWith(randomToken(t), "[2001:db8:1:3::1]:1"), "list", "ns"); err == nil || err.Status != http.StatusUnauthorized {
		t.Errorf("another /64: %v, want 401", err)
	}
}

// F3: clients that change address cannot have the API review unknown tokens without
// bound: a global budget holds back all of them.
func TestUnknownTokensAreLimitedOverAllClients(t *testing.T) {
	api, a, _ := sprayAuth(t)
	limited := 0
	for i := range 30 {
		err := a.authorize(requestWith(randomToken(t), "10.0.1."+strconv.Itoa(i)+":1"), "list", "ns")
		if err != nil && err.Status == http.StatusTooManyRequests && err.RetryAfter > 0 {
			limited++
		}
	}
	if n := api.TokenReviews.Load(); n != 10 || limited != 20 {
		t.Errorf("30 random tokens from 30 addresses cost %d TokenReviews (%d held back), want 10 (20)", n, limited)
	}
	if err := a.authorize(requestWith(goodToken, "10.0.2.1:1"), "list", "ns"); err == nil || err.Status != http.StatusTooManyRequests {
		t.Errorf("an unknown good token with the global budget spent: %v, want 429", err)
	}
}

// F3, its flip side: clients that spend the global budget of unknown tokens do
// not keep a token the API accepted before (the engine's, a user's) from being
// reviewed again once its cache entry expires.
func TestSprayingDoesNotLockOutAcceptedTokens(t *testing.T) {
	api, a, now := sprayAuth(t)
	if err := a.authorize(requestWith(goodToken, "10.0.3.1:1"), "list", "ns"); err != nil {
		t.Fatal(err)
	}
	*now = now.Add(time.Minute) // past the cache's TTL, within the budget's refill of one token a second
	for i := range 70 {
		_ = a.authorize(requestWith(randomToken(t), "10.0.4."+strconv.Itoa(i)+":1"), "list", "ns")
	}
	before := api.TokenReviews.Load()
	if err := a.authorize(requestWith(goodToken, "10.0.3.1:1"), "list", "ns"); err != nil {
		t.Errorf("a token accepted a minute ago, with the global budget spent: %v, want it reviewed again and allowed", err)
	}
	if api.TokenReviews.Load() != before+1 {
		t.Errorf("the accepted token was not reviewed again (%d reviews, want %d)", api.TokenReviews.Load(), before+1)
	}
	if err := a.authorize(requestWith(randomToken(t), "10.0.5.1:1"), "list", "ns"); err == nil || err.Status != http.StatusTooManyRequests {
		t.Errorf("an unknown token with the global budget spent: %v, want 429", err)
	}
}

// F3: X-Forwarded-For names the client only when a trusted proxy sends it.
func TestClientAddress(t *testing.T) {
	proxies := []netip.Prefix{netip.MustParsePrefix("10.1.0.0/16")}
	for _, tt := range []struct{ remote, forwarded, want string }{
		{"192.0.2.1:5", "", "192.0.2.1"},
		{"192.0.2.1:5", "198.51.100.7", "192.0.2.1"}, // not from a trusted proxy
		{"10.1.0.1:5", "198.51.100.7", "198.51.100.7"},
		{"10.1.0.1:5", "203.0.113.9, 198.51.100.7, 10.1.0.2", "198.51.100.7"}, // the nearest untrusted hop
		{"10.1.0.1:5", "", "10.1.0.1"},
		{"[2001:db8::1]:5", "", "2001:db8::/64"},
		{"[::ffff:192.0.2.1]:5", "", "192.0.2.1"},
	} {
		r := httptest.NewRequest(http.MethodGet, "/", nil)
		r.RemoteAddr = tt.remote
		if tt.forwarded != "" {
			r.Header.Set("X-Forwarded-For", tt.forwarded)
		}
		if got := clientAddress(r, proxies); got != tt.want {
			t.Errorf("%s forwarding %q: %q, want %q", tt.remote, tt.forwarded, got, tt.want)
		}
	}
}

// F4: a namespace or name no object can have is a 400 before any review.
func TestRequireChecksNamesFirst(t *testing.T) {
	api := httpapitest.NewReviews(t)
	a := newAuthorizer(t, api, testAuthOptions(100))
	for _, x := range []Access{
		{Verb: "list", Resource: "functions", Namespace: "Not_A_Namespace"},
		{Verb: "list", Resource: "functions", Namespace: "a.b"},
		{Verb: "get", Resource: "secrets", Namespace: "ns", Name: "../x"},
	} {
		if _, err := a.Check(requestWith(goodToken, "10.0.0.1:1"), x); err == nil || err.Status != http.StatusBadRequest {
			t.Errorf("%s: %v, want 400", x, err)
		}
	}
	if tr, sar := api.TokenReviews.Load(), api.AccessReviews.Load(); tr != 0 || sar != 0 {
		t.Errorf("%d TokenReviews and %d SubjectAccessReviews for bad names, want none", tr, sar)
	}
}

// F4: a user's requests cost no more SubjectAccessReviews beyond the cache than its
// budget; more answer 429 with Retry-After, and cached answers still serve.
func TestAccessReviewsArePerUserLimited(t *testing.T) {
	api := httpapitest.NewReviews(t)
	o := testAuthOptions(1000)
	o.AccessReviews = FailureLimits{Burst: 5, Rate: 1}
	a := newAuthorizer(t, api, o)
	fakeClock(a)
	limited := 0
	for i := range 20 {
		err := a.authorize(requestWith(goodToken, "10.0.0.1:1"), "get", "ns-"+strconv.Itoa(i))
		if err != nil && err.Status == http.StatusTooManyRequests && err.RetryAfter > 0 {
			limited++
		}
	}
	if n := api.AccessReviews.Load(); n != 5 || limited != 15 {
		t.Errorf("20 namespaces cost %d SubjectAccessReviews (%d held back), want 5 (15)", n, limited)
	}
	if err := a.authorize(requestWith(goodToken, "10.0.0.1:1"), "get", "ns-0"); err != nil {
		t.Errorf("a cached answer: %v", err)
	}
	if err := a.authorize(requestWith(httpapitest.ViewerToken, "10.0.0.1:1"), "get", "ns-99"); err != nil {
		t.Errorf("another user: %v", err)
	}
}
