package dashboard

import (
	"context"
	"crypto/rand"
	"crypto/subtle"
	"encoding/base64"
	"net/http"
	"sync"
	"time"

	authenticationv1 "k8s.io/api/authentication/v1"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/kubernetes"
)

// Names of the cookies and of the header that carries the CSRF token.
const (
	sessionCookie = "metalambda_session"
	loginCookie   = "metalambda_login"
	csrfHeader    = "X-CSRF-Token"
	csrfField     = "csrf"
)

// Session is a logged-in user: their token stays on the server, the browser holds the
// session id alone.
type Session struct {
	ID      string
	Token   string
	User    authenticationv1.UserInfo
	CSRF    string
	Expires time.Time
	// Kube and Dynamic call the Kubernetes API with the user's token.
	Kube    kubernetes.Interface
	Dynamic dynamic.Interface
}

// Bounds of the live sessions: a token logged in again and again, or many tokens,
// cannot grow them without end; the oldest session goes first.
const (
	maxSessionsPerToken = 8
	maxSessions         = 10000
)

// sessions are the live sessions, by id.
type sessions struct {
	mu   sync.Mutex
	byID map[string]*Session
	ttl  time.Duration
	now  func() time.Time
	// perToken and total bound the sessions (maxSessionsPerToken, maxSessions).
	perToken, total int
}

func newSessions(ttl time.Duration, now func() time.Time) *sessions {
	return &sessions{byID: map[string]*Session{}, ttl: ttl, now: now, perToken: maxSessionsPerToken, total: maxSessions}
}

// add stores s under a new random id with a new CSRF token, drops expired ones,
// and makes room for it: the oldest session of its token when that token has as
// many as it may, the oldest of all when the whole is full.
func (ss *sessions) add(s *Session) *Session {
	s.ID, s.CSRF = randomToken(), randomToken()
	ss.mu.Lock()
	defer ss.mu.Unlock()
	now := ss.now()
	sameToken := func(old *Session) bool { return subtle.ConstantTimeCompare([]byte(old.Token), []byte(s.Token)) == 1 }
	ofToken := 0
	for id, old := range ss.byID {
		switch {
		case !now.Before(old.Expires):
			delete(ss.byID, id)
		case sameToken(old):
			ofToken++
		}
	}
	if ofToken >= ss.perToken {
		ss.evictOldest(sameToken)
	}
	if len(ss.byID) >= ss.total {
		ss.evictOldest(func(*Session) bool { return true })
	}
	s.Expires = now.Add(ss.ttl)
	ss.byID[s.ID] = s
	return s
}

// evictOldest removes the session that expires first among those match accepts
// (sessions last the same time, so the oldest).
func (ss *sessions) evictOldest(match func(*Session) bool) {
	var oldest *Session
	for _, old := range ss.byID {
		if match(old) && (oldest == nil || old.Expires.Before(oldest.Expires)) {
			oldest = old
		}
	}
	if oldest != nil {
		delete(ss.byID, oldest.ID)
	}
}

// get is the unexpired session with id, or nil.
func (ss *sessions) get(id string) *Session {
	ss.mu.Lock()
	defer ss.mu.Unlock()
	s := ss.byID[id]
	if s == nil {
		return nil
	}
	if !ss.now().Before(s.Expires) {
		delete(ss.byID, id)
		return nil
	}
	return s
}

func (ss *sessions) remove(id string) {
	ss.mu.Lock()
	defer ss.mu.Unlock()
	delete(ss.byID, id)
}

func randomToken() string {
	b := make([]byte, 32)
	_, _ = rand.Read(b) // crypto/rand.Read never fails (Go 1.24+)
	return base64.RawURLEncoding.EncodeToString(b)
}

type sessionKey struct{}

// SessionFrom is the session of a request that passed requireSession.
func SessionFrom(ctx context.Context) *Session {
	s, _ := ctx.Value(sessionKey{}).(*Session)
	return s
}

// requireSession lets requests with a live session through, with the session in their
// context; others go to the login page (htmx requests through HX-Redirect, event
// streams get 401, which ends them).
func (d *Dashboard) requireSession(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		var s *Session
		if c, err := r.Cookie(sessionCookie); err == nil {
			s = d.sessions.get(c.Value)
		}
		if s == nil {
			d.toLogin(w, r)
			return
		}
		next.ServeHTTP(w, r.WithContext(context.WithValue(r.Context(), sessionKey{}, s)))
	})
}

// toLogin sends the browser to the login page, back to the page it asked for after.
func (d *Dashboard) toLogin(w http.ResponseWriter, r *http.Request) {
	to := Prefix + "/login"
	if r.Method == http.MethodGet && r.URL.Path != Prefix+"/" {
		to += "?next=" + urlQueryEscape(r.URL.RequestURI())
	}
	switch {
	case isEventStream(r):
		http.Error(w, "not logged in", http.StatusUnauthorized)
	case r.Header.Get("HX-Request") == "true":
		w.Header().Set("HX-Redirect", to)
		w.WriteHeader(http.StatusUnauthorized)
	default:
		http.Redirect(w, r, to, http.StatusSeeOther)
	}
}

// checkCSRF refuses a request that may change something (any method but GET, HEAD and
// OPTIONS) unless it carries the session's CSRF token, in the X-CSRF-Token header
// (htmx sends it) or the csrf form field.
func checkCSRF(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		switch r.Method {
		case http.MethodGet, http.MethodHead, http.MethodOptions:
			next.ServeHTTP(w, r)
			return
		}
		s := SessionFrom(r.Context())
		got := r.Header.Get(csrfHeader)
		if got == "" {
			got = r.PostFormValue(csrfField)
		}
		if s == nil || got == "" || subtle.ConstantTimeCompare([]byte(got), []byte(s.CSRF)) != 1 {
			http.Error(w, "missing or wrong CSRF token: reload the page and try again", http.StatusForbidden)
			return
		}
		next.ServeHTTP(w, r)
	})
}

// setCookie sets an HttpOnly, SameSite=Strict cookie under Prefix, Secure over TLS or
// when the options say so; maxAge < 0 deletes it.
func (d *Dashboard) setCookie(w http.ResponseWriter, r *http.Request, name, value string, maxAge int) {
	http.SetCookie(w, &http.Cookie{
		Name: name, Value: value, Path: Prefix, MaxAge: maxAge,
		HttpOnly: true, SameSite: http.SameSiteStrictMode, Secure: r.TLS != nil || d.opts.SecureCookies,
	})
}
