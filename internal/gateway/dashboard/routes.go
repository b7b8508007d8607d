package dashboard

import (
	"net/http"

	"github.com/go-chi/chi/v5"

	"github.com/metalambda/metalambda/web"
)

// routes is the dashboard's route table, relative to Prefix.
func (d *Dashboard) routes() http.Handler {
	r := chi.NewRouter()
	r.Use(securityHeaders)
	r.Handle("/static/*", http.StripPrefix(Prefix+"/static/", http.FileServerFS(web.Static())))
	r.Get("/login", d.loginPage)
	r.Post("/login", d.login)
	r.Group(func(r chi.Router) {
		r.Use(d.requireSession, checkCSRF)
		r.Post("/logout", d.logout)
		r.Get("/", d.serveView(d.overview()))
		r.Get("/controllers/{kind}/{name}", d.serveView(d.controller()))
		r.Get("/controllers/{kind}/{name}/parents/{namespace}/{parent}", d.serveView(d.parent()))
		r.Post("/controllers/{kind}/{name}/sync", d.syncNow)
		r.Get("/namespaces/{namespace}/controllers/{kind}/{name}", d.serveView(d.namespacedController()))
		r.Get("/namespaces/{namespace}/controllers/{kind}/{name}/parents/{parent}", d.serveView(d.namespacedParent()))
		r.Post("/namespaces/{namespace}/controllers/{kind}/{name}/sync", d.syncNow)
		r.Get("/hookcalls", d.hookCallsPage)
		r.Get("/pythonlambdas", d.serveView(d.pythonLambdas()))
		r.Post("/pythonlambdas/{namespace}/{name}/try", d.tryPythonLambda)
		r.Get("/functions", d.serveView(d.functions()))
		r.Get("/functions/new", d.newFunction)
		r.Post("/functions/new", d.createFunction)
		r.Get("/functions/{namespace}/{name}", d.serveView(d.functionView()))
		r.Post("/functions/{namespace}/{name}", d.saveFunction)
		r.Post("/functions/{namespace}/{name}/test", d.testFunction)
		r.Post("/functions/{namespace}/{name}/replay", d.replayFunction)
		r.Post("/functions/{namespace}/{name}/rollout/{action}", d.rolloutAction)
	})
	r.NotFound(func(w http.ResponseWriter, r *http.Request) {
		d.render(w, r, http.StatusNotFound, "error.html", "Not found", "", errorPage{Status: http.StatusNotFound, Message: "No page at " + r.URL.Path})
	})
	return r
}

// securityHeaders keeps the pages to their own scripts and out of other sites' frames.
// Styles may be inline: htmx and CodeMirror add style elements.
func securityHeaders(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		h := w.Header()
		h.Set("Content-Security-Policy", "default-src 'self'; script-src 'self'; style-src 'self' 'unsafe-inline'; img-src 'self' data:; connect-src 'self'; frame-ancestors 'none'; form-action 'self'; base-uri 'none'")
		h.Set("X-Content-Type-Options", "nosniff")
		h.Set("Referrer-Policy", "same-origin")
		h.Set("X-Frame-Options", "DENY")
		next.ServeHTTP(w, r)
	})
}
