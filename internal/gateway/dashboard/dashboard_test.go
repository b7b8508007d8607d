package dashboard

import (
	"bufio"
	"context"
	"crypto/tls"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"net/url"
	"regexp"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/go-chi/chi/v5"
	"github.com/google/go-cmp/cmp"
	authenticationv1 "k8s.io/api/authentication/v1"
	"k8s.io/client-go/rest"
)

const goodToken = "good-token"

// fakeClock is a clock tests move by hand.
type fakeClock struct {
	mu sync.Mutex
	t  time.Time
}

func (c *fakeClock) now() time.Time { c.mu.Lock(); defer c.mu.Unlock(); return c.t }
func (c *fakeClock) add(d time.Duration) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.t = c.t.Add(d)
}

// testDashboard is a dashboard whose authenticator accepts goodToken alone, mounted
// at Prefix as the gateway mounts it. Its Kubernetes API is unreachable: these tests
// stop before any page reads it.
func testDashboard(t *testing.T) (*testServer, *fakeClock) {
	t.Helper()
	return testDashboardWith(t, nil)
}

// testDashboardWith is testDashboard with options changed by change (when not nil).
func testDashboardWith(t *testing.T, change func(*Options)) (*testServer, *fakeClock) {
	t.Helper()
	clock := &fakeClock{t: time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)}
	opts := Defaults()
	opts.Config = &rest.Config{Host: "http://127.0.0.1:1"}
	opts.Authenticate = func(_ *http.Request, token string) (*authenticationv1.UserInfo, error) {
		if token != goodToken {
			return nil, &AuthError{Status: http.StatusUnauthorized, Message: "the Kubernetes API does not accept this token"}
		}
		return &authenticationv1.UserInfo{Username: "alice"}, nil
	}
	opts.SessionTTL, opts.Now = time.Hour, clock.now
	if change != nil {
		change(&opts)
	}
	d, err := New(opts)
	if err != nil {
		t.Fatal(err)
	}
	r := chi.NewRouter()
	r.Mount(Prefix, d.Handler())
	return &testServer{Handler: r, d: d}, clock
}

// testServer is a test dashboard's routes, and the dashboard for looking inside.
type testServer struct {
	http.Handler
	d *Dashboard
}

var hiddenCSRF = regexp.MustCompile(`name="csrf" value="([^"]+)"`)

// loginForm fetches the login page: its cookie and the form's CSRF value.
func getLoginForm(t *testing.T, h http.Handler) (*http.Cookie, string) {
	t.Helper()
	rec := serve(h, httptest.NewRequest(http.MethodGet, Prefix+"/login", nil))
	m := hiddenCSRF.FindStringSubmatch(rec.Body.String())
	cookies := rec.Result().Cookies()
	if rec.Code != http.StatusOK || m == nil || len(cookies) != 1 {
		t.Fatalf("login page: %d, %d cookies, csrf %v", rec.Code, len(cookies), m)
	}
	return cookies[0], m[1]
}

func serve(h http.Handler, r *http.Request) *httptest.ResponseRecorder {
	rec := httptest.NewRecorder()
	h.ServeHTTP(rec, r)
	return rec
}

func postLogin(h http.Handler, cookie *http.Cookie, csrf, token string) *httptest.ResponseRecorder {
	form := url.Values{"csrf": {csrf}, "token": {token}, "next": {Prefix + "/hookcalls"}}
	r := httptest.NewRequest(http.MethodPost, Prefix+"/login", strings.NewReader(form.Encode()))
	r.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	if cookie != nil {
		r.AddCookie(cookie)
	}
	return serve(h, r)
}

// login logs in with goodToken: the session cookie and the session's CSRF token.
func login(t *testing.T, h *testServer) (*http.Cookie, string) {
	t.Helper()
	c, csrf := getLoginForm(t, h)
	rec := postLogin(h, c, csrf, goodToken)
	var session *http.Cookie
	for _, c := range rec.Result().Cookies() {
		if c.Name == sessionCookie {
			session = c
		}
	}
	if rec.Code != http.StatusSeeOther || session == nil {
		t.Fatalf("login: %d %s", rec.Code, rec.Body.String())
	}
	s := h.d.sessions.get(session.Value)
	if s == nil || s.User.Username != "alice" || s.Token != goodToken {
		t.Fatalf("session %+v", s)
	}
	return session, s.CSRF
}

func TestLoginRefusesABadToken(t *testing.T) {
	h, _ := testDashboard(t)
	c, csrf := getLoginForm(t, h)
	rec := postLogin(h, c, csrf, "stolen-or-expired")
	if rec.Code != http.StatusUnauthorized || !strings.Contains(rec.Body.String(), "does not accept this token") {
		t.Errorf("bad token: %d\n%s", rec.Code, rec.Body.String())
	}
	for _, c := range rec.Result().Cookies() {
		if c.Name == sessionCookie {
			t.Errorf("a bad token got a session cookie")
		}
	}
	if rec := postLogin(h, c, csrf, "  "); rec.Code != http.StatusBadRequest {
		t.Errorf("empty token: %d", rec.Code)
	}
}

// F6: a login held back (429) says when to try again, as the API's 429 does.
func TestLoginTooOftenSaysRetryAfter(t *testing.T) {
	h, _ := testDashboardWith(t, func(o *Options) {
		o.Authenticate = func(*http.Request, string) (*authenticationv1.UserInfo, error) {
			return nil, &AuthError{Status: http.StatusTooManyRequests, Message: "too many failed authentications", RetryAfter: 7}
		}
	})
	c, csrf := getLoginForm(t, h)
	rec := postLogin(h, c, csrf, "guess")
	if rec.Code != http.StatusTooManyRequests || rec.Header().Get("Retry-After") != "7" {
		t.Errorf("login held back: %d, Retry-After %q; want 429 and 7", rec.Code, rec.Header().Get("Retry-After"))
	}
}

func TestLoginNeedsTheFormFromThisSite(t *testing.T) {
	h, _ := testDashboard(t)
	c, csrf := getLoginForm(t, h)
	if rec := postLogin(h, nil, csrf, goodToken); rec.Code != http.StatusForbidden {
		t.Errorf("login without the form's cookie: %d", rec.Code)
	}
	if rec := postLogin(h, c, "forged", goodToken); rec.Code != http.StatusForbidden {
		t.Errorf("login with another CSRF value: %d", rec.Code)
	}
}

func TestSessionCookie(t *testing.T) {
	h, _ := testDashboard(t)
	session, _ := login(t, h)
	want := &http.Cookie{Name: sessionCookie, Path: Prefix, MaxAge: 3600, HttpOnly: true, SameSite: http.SameSiteStrictMode}
	got := &http.Cookie{Name: session.Name, Path: session.Path, MaxAge: session.MaxAge, HttpOnly: session.HttpOnly, SameSite: session.SameSite, Secure: session.Secure}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("session cookie (-want +got):\n%s", diff)
	}
	if len(session.Value) < 40 {
		t.Errorf("session id %q is short", session.Value)
	}

	// Over TLS the cookie is Secure.
	c, csrf := getLoginForm(t, h)
	form := url.Values{"csrf": {csrf}, "token": {goodToken}}
	r := httptest.NewRequest(http.MethodPost, Prefix+"/login", strings.NewReader(form.Encode()))
	r.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	r.TLS = &tls.ConnectionState{}
	r.AddCookie(c)
	rec := serve(h, r)
	for _, c := range rec.Result().Cookies() {
		if c.Name == sessionCookie && !c.Secure {
			t.Errorf("session cookie over TLS is not Secure")
		}
	}
	if loc := rec.Header().Get("Location"); loc != Prefix+"/" {
		t.Errorf("after login: Location %q", loc)
	}
}

func TestChangesNeedTheSessionsCSRFToken(t *testing.T) {
	h, _ := testDashboard(t)
	session, csrf := login(t, h)
	for _, tt := range []struct {
		name   string
		header string
		want   int
	}{
		{"no token", "", http.StatusForbidden},
		{"another token", "forged", http.StatusForbidden},
		{"the session's token", csrf, http.StatusSeeOther},
	} {
		r := httptest.NewRequest(http.MethodPost, Prefix+"/logout", nil)
		r.AddCookie(session)
		if tt.header != "" {
			r.Header.Set(csrfHeader, tt.header)
		}
		if rec := serve(h, r); rec.Code != tt.want {
			t.Errorf("%s: logout answered %d, want %d", tt.name, rec.Code, tt.want)
		}
	}
	// Logged out: the cookie no longer opens a page.
	r := httptest.NewRequest(http.MethodGet, Prefix+"/", nil)
	r.AddCookie(session)
	if rec := serve(h, r); rec.Code != http.StatusSeeOther {
		t.Errorf("after logout: %d", rec.Code)
	}
}

func TestExpiredSessionGoesToLogin(t *testing.T) {
	h, clock := testDashboard(t)
	session, _ := login(t, h)
	clock.add(time.Hour + time.Second)
	for _, tt := range []struct {
		name    string
		header  [2]string
		want    int
		wantLoc string
	}{
		{"page", [2]string{"Accept", "text/html"}, http.StatusSeeOther, Prefix + "/login?next=%2Fui%2Fhookcalls"},
		{"htmx", [2]string{"HX-Request", "true"}, http.StatusUnauthorized, ""},
		{"event stream", [2]string{"Accept", "text/event-stream"}, http.StatusUnauthorized, ""},
	} {
		r := httptest.NewRequest(http.MethodGet, Prefix+"/hookcalls", nil)
		r.AddCookie(session)
		r.Header.Set(tt.header[0], tt.header[1])
		rec := serve(h, r)
		if rec.Code != tt.want || rec.Header().Get("Location") != tt.wantLoc {
			t.Errorf("%s: %d Location %q, want %d %q", tt.name, rec.Code, rec.Header().Get("Location"), tt.want, tt.wantLoc)
		}
		if tt.name == "htmx" && !strings.HasPrefix(rec.Header().Get("HX-Redirect"), Prefix+"/login") {
			t.Errorf("htmx: HX-Redirect %q", rec.Header().Get("HX-Redirect"))
		}
	}
}

func TestSafeNext(t *testing.T) {
	for in, want := range map[string]string{
		"/ui/hookcalls?controller=a": "/ui/hookcalls?controller=a",
		"":                           "/ui/",
		"https://evil.example/ui/":   "/ui/",
		"//evil.example/ui/":         "/ui/",
		"/ui/\\evil":                 "/ui/",
		"/metrics":                   "/ui/",
	} {
		if got := safeNext(in); got != want {
			t.Errorf("safeNext(%q) = %q, want %q", in, got, want)
		}
	}
}

func TestStaticAssetsAreEmbedded(t *testing.T) {
	h, _ := testDashboard(t)
	for _, name := range []string{"app.js", "editor.js", "style.css"} {
		rec := serve(h, httptest.NewRequest(http.MethodGet, Prefix+"/static/"+name, nil))
		if rec.Code != http.StatusOK || rec.Body.Len() < 1000 {
			t.Errorf("%s: %d, %d bytes", name, rec.Code, rec.Body.Len())
		}
	}
	rec := serve(h, httptest.NewRequest(http.MethodGet, Prefix+"/login", nil))
	if csp := rec.Header().Get("Content-Security-Policy"); !strings.Contains(csp, "script-src 'self'") {
		t.Errorf("CSP %q", csp)
	}
}

// TestStream reads a stream over HTTP: changed HTML only, one data line per line,
// errors as "error" events, and the end when render says so.
func TestStream(t *testing.T) {
	renders := []struct {
		html string
		err  error
	}{{"<p>a</p>", nil}, {"<p>a</p>", nil}, {"", nil}, {"<p>b</p>\n<p>c</p>", nil}, {"", errors.New("API down")}, {"", errStop}}
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		i := 0
		Stream(w, r, time.Millisecond, "live", func(context.Context) (string, error) {
			rr := renders[i]
			i++
			return rr.html, rr.err
		})
	}))
	defer srv.Close()
	resp, err := http.Get(srv.URL)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	if ct := resp.Header.Get("Content-Type"); ct != "text/event-stream" {
		t.Errorf("Content-Type %q", ct)
	}
	var events []string
	sc := bufio.NewScanner(resp.Body)
	var cur []string
	for sc.Scan() {
		line := sc.Text()
		if line == "" {
			if len(cur) > 0 {
				events = append(events, strings.Join(cur, "|"))
			}
			cur = nil
			continue
		}
		if !strings.HasPrefix(line, ":") {
			cur = append(cur, line)
		}
	}
	want := []string{"event: live|data: <p>a</p>", "event: live|data: <p>b</p>|data: <p>c</p>", "event: error|data: API down"}
	if diff := cmp.Diff(want, events); diff != "" {
		t.Errorf("events (-want +got):\n%s", diff)
	}
	if _, err := io.ReadAll(resp.Body); err != nil {
		t.Errorf("the stream did not end cleanly: %v", err)
	}
}

func TestSparkline(t *testing.T) {
	if got := sparkline([]float64{0, 5, 10}, 100, 22); got != "0.0,21.0 50.0,11.0 100.0,1.0" {
		t.Errorf("sparkline = %q", got)
	}
	if got := sparkline([]float64{3}, 100, 22); got != "0.0,1.0 100.0,1.0" {
		t.Errorf("one point: %q", got)
	}
}

// TestNewRefusesOptionsNotFromDefaults: a zero default is an error naming the
// option, not filled in.
func TestNewRefusesOptionsNotFromDefaults(t *testing.T) {
	for field, change := range map[string]func(*Options){
		"SessionTTL":   func(o *Options) { o.SessionTTL = 0 },
		"LiveInterval": func(o *Options) { o.LiveInterval = 0 },
		"Now":          func(o *Options) { o.Now = nil },
	} {
		opts := Defaults()
		opts.Config = &rest.Config{}
		opts.Authenticate = func(*http.Request, string) (*authenticationv1.UserInfo, error) { return nil, nil }
		change(&opts)
		if _, err := New(opts); err == nil || !strings.Contains(err.Error(), field) {
			t.Errorf("without %s: New = %v, want an error naming it", field, err)
		}
	}
}
