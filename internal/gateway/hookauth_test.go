package gateway

import (
	"net/http"
	"net/http/httptest"
	"testing"

	"github.com/go-chi/chi/v5"
)

// TestHookAuth: with a hook token, /hooks takes that token, or a Kubernetes token
// whose user may invoke functions in the namespace (the check a test call through
// the API makes); nothing else. Without one, hooks are open.
func TestHookAuth(t *testing.T) {
	for _, tt := range []struct {
		name, configured, auth string
		want                   int
	}{
		{"no hook token configured", "", "", 200},
		{"no hook token configured, any token", "", "Bearer whatever", 200},
		{"missing", "s3cret", "", 401},
		{"other scheme", "s3cret", "Basic s3cret", 401},
		{"the hook token", "s3cret", "Bearer s3cret", 200},
		{"a wrong token", "s3cret", "Bearer s3cre", 401},
		{"a user allowed invoke", "s3cret", "Bearer " + goodToken, 200},
		{"a user refused invoke", "s3cret", "Bearer " + viewerToken, 403},
	} {
		t.Run(tt.name, func(t *testing.T) {
			api := newReviewAPI(t)
			api.Refused[verbInvoke] = true
			g := &Gateway{opts: Options{HookToken: tt.configured}, auth: newAuthorizer(t, api)}
			r := chi.NewRouter()
			r.Post("/hooks/{namespace}/{name}", g.hookAuth(func(w http.ResponseWriter, _ *http.Request) { w.WriteHeader(http.StatusOK) }))
			req := httptest.NewRequest(http.MethodPost, "/hooks/ns/f", nil)
			if tt.auth != "" {
				req.Header.Set("Authorization", tt.auth)
			}
			w := httptest.NewRecorder()
			r.ServeHTTP(w, req)
			if w.Code != tt.want {
				t.Errorf("%d %s, want %d", w.Code, w.Body, tt.want)
			}
			if tt.auth == "Bearer s3cret" && api.TokenReviews.Load() != 0 {
				t.Errorf("the hook token cost %d TokenReviews, want none", api.TokenReviews.Load())
			}
		})
	}
}
