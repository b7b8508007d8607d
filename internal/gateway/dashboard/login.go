package dashboard

import (
	"crypto/subtle"
	"errors"
	"net/http"
	"net/url"
	"strconv"
	"strings"

	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
)

// loginForm is what the login page shows.
type loginForm struct {
	Next, CSRF, Error string
}

// loginPage asks for a token. The form carries a CSRF value that must match a cookie
// set here (double submit), so that another site cannot log a browser in as someone
// else.
func (d *Dashboard) loginPage(w http.ResponseWriter, r *http.Request) {
	d.showLogin(w, r, http.StatusOK, "")
}

func (d *Dashboard) showLogin(w http.ResponseWriter, r *http.Request, status int, msg string) {
	csrf := randomToken()
	d.setCookie(w, r, loginCookie, csrf, 600)
	d.render(w, r, status, "login.html", "Log in", "", loginForm{Next: safeNext(r.FormValue("next")), CSRF: csrf, Error: msg})
}

// login checks the pasted token and starts a session.
func (d *Dashboard) login(w http.ResponseWriter, r *http.Request) {
	c, err := r.Cookie(loginCookie)
	if err != nil || subtle.ConstantTimeCompare([]byte(c.Value), []byte(r.PostFormValue(csrfField))) != 1 {
		d.showLogin(w, r, http.StatusForbidden, "The login form expired or came from another site: try again.")
		return
	}
	token := strings.TrimSpace(r.PostFormValue("token"))
	if token == "" {
		d.showLogin(w, r, http.StatusBadRequest, "Paste a Kubernetes bearer token, e.g. from `kubectl create token`.")
		return
	}
	user, err := d.opts.Authenticate(r, token)
	if err != nil {
		status, msg := http.StatusInternalServerError, "Checking the token failed: "+err.Error()
		var ae *AuthError
		if errors.As(err, &ae) {
			status, msg = ae.Status, ae.Message
			if ae.RetryAfter > 0 {
				w.Header().Set("Retry-After", strconv.Itoa(ae.RetryAfter))
			}
		}
		d.showLogin(w, r, status, msg)
		return
	}
	s, err := d.newSession(token)
	if err != nil {
		d.showLogin(w, r, http.StatusInternalServerError, err.Error())
		return
	}
	s.User = *user
	d.sessions.add(s)
	d.setCookie(w, r, loginCookie, "", -1)
	d.setCookie(w, r, sessionCookie, s.ID, int(d.opts.SessionTTL.Seconds()))
	http.Redirect(w, r, safeNext(r.PostFormValue("next")), http.StatusSeeOther)
}

// newSession builds the clients that act with token.
func (d *Dashboard) newSession(token string) (*Session, error) {
	cfg := rest.AnonymousClientConfig(d.opts.Config)
	cfg.BearerToken = token
	kube, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		return nil, err
	}
	dyn, err := dynamic.NewForConfig(cfg)
	if err != nil {
		return nil, err
	}
	return &Session{Token: token, Kube: kube, Dynamic: dyn}, nil
}

// logout ends the session (a POST with the CSRF token).
func (d *Dashboard) logout(w http.ResponseWriter, r *http.Request) {
	d.sessions.remove(SessionFrom(r.Context()).ID)
	d.setCookie(w, r, sessionCookie, "", -1)
	http.Redirect(w, r, Prefix+"/login", http.StatusSeeOther)
}

// endSession is for a token the API server no longer accepts: the session ends and
// the browser goes to the login page.
func (d *Dashboard) endSession(w http.ResponseWriter, r *http.Request) {
	if s := SessionFrom(r.Context()); s != nil {
		d.sessions.remove(s.ID)
	}
	d.setCookie(w, r, sessionCookie, "", -1)
	d.toLogin(w, r)
}

// safeNext is a dashboard path to go to after login; anything else is the overview.
func safeNext(next string) string {
	if !strings.HasPrefix(next, Prefix+"/") || strings.HasPrefix(next, "//") || strings.ContainsAny(next, "\\\r\n") {
		return Prefix + "/"
	}
	return next
}

func urlQueryEscape(s string) string { return url.QueryEscape(s) }
