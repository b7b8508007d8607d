package gateway

import (
	"crypto/subtle"
	"net/http"

	"github.com/go-chi/chi/v5"
	"github.com/go-chi/chi/v5/middleware"

	"github.com/metalambda/metalambda/internal/gateway/dashboard"
	"github.com/metalambda/metalambda/internal/httpapi"
)

// routes is the gateway's whole route table; openapi.go describes the same routes.
func (g *Gateway) routes(metrics http.Handler) http.Handler {
	r := chi.NewRouter()
	r.Use(middleware.Recoverer, g.limitBody)
	r.Get("/healthz", func(w http.ResponseWriter, _ *http.Request) {
		httpapi.WriteJSON(w, http.StatusOK, map[string]string{"status": "ok"})
	})
	r.Get("/readyz", g.readyz)
	r.Handle("/metrics", g.metricsAuth(metrics))
	r.Get("/openapi.json", func(w http.ResponseWriter, _ *http.Request) { httpapi.WriteJSON(w, http.StatusOK, openAPI()) })
	if g.opts.SeparateHooks {
		r.Post("/hooks/{namespace}/{name}", func(w http.ResponseWriter, _ *http.Request) {
			httpapi.WriteError(w, httpapi.NewError(http.StatusNotFound, "not_found", "this gateway serves hooks on its hooks address (--hooks-listen), not on its API address"))
		})
	} else {
		r.Post("/hooks/{namespace}/{name}", g.hookAuth(g.callRoute(g.hook)))
	}
	r.Route("/v1/namespaces/{namespace}/functions", g.functionRoutes)
	r.Mount(dashboard.Prefix, g.dash.Handler())
	r.NotFound(func(w http.ResponseWriter, r *http.Request) {
		httpapi.WriteError(w, httpapi.NewError(http.StatusNotFound, "not_found", "no route "+r.Method+" "+r.URL.Path))
	})
	r.MethodNotAllowed(func(w http.ResponseWriter, r *http.Request) {
		httpapi.WriteError(w, httpapi.NewError(http.StatusMethodNotAllowed, "method_not_allowed", r.Method+" is not allowed on "+r.URL.Path))
	})
	return r
}

// functionRoutes is the management API of Functions, under /v1/namespaces/{namespace}/functions.
func (g *Gateway) functionRoutes(r chi.Router) {
	r.Get("/", g.authorized("list", g.listFunctions))
	r.Post("/", g.authorized("create", g.createFunction))
	r.Get("/{name}", g.authorized("get", g.getFunction))
	r.Put("/{name}", g.authorized("update", g.putFunction))
	r.Delete("/{name}", g.authorized("delete", g.deleteFunction))
	r.Post("/{name}/invoke", g.authorized(verbInvoke, g.callRoute(g.invoke)))
	r.Get("/{name}/invocations", g.authorized(verbInvoke, g.invocations))
	r.Get("/{name}/revisions", g.authorized("get", g.listRevisions))
	r.Post("/{name}/rollout/{action}", g.authorized("update", g.rolloutAction))
	// A replay runs code the caller wrote (update) on recorded requests it then
	// shows the answers to (invoke): it needs both verbs.
	r.Post("/{name}/replay", g.authorized("update", g.authorized(verbInvoke, g.bodyFirst(g.limitReplays(g.replay)))))
}

// functionsAPI is the management API of Functions alone, for the dashboard's calls in
// process (with the user's token, checked as any request's).
func (g *Gateway) functionsAPI() http.Handler {
	r := chi.NewRouter()
	r.Use(g.limitBody)
	r.Route("/v1/namespaces/{namespace}/functions", g.functionRoutes)
	return r
}

// hookRoutes is the route table of a listener that serves hooks alone.
func (g *Gateway) hookRoutes() http.Handler {
	r := chi.NewRouter()
	r.Use(middleware.Recoverer, g.limitBody)
	r.Get("/healthz", func(w http.ResponseWriter, _ *http.Request) {
		httpapi.WriteJSON(w, http.StatusOK, map[string]string{"status": "ok"})
	})
	r.Post("/hooks/{namespace}/{name}", g.hookAuth(g.callRoute(g.hook)))
	r.NotFound(func(w http.ResponseWriter, r *http.Request) {
		httpapi.WriteError(w, httpapi.NewError(http.StatusNotFound, "not_found", "no route "+r.Method+" "+r.URL.Path+" (this address serves /hooks only)"))
	})
	return r
}

// callRoute serves a call of a function: its body read first, then a slot of the
// function taken (limitCalls), so that slow bodies cannot hold the slots.
func (g *Gateway) callRoute(h http.HandlerFunc) http.HandlerFunc {
	return g.bodyFirst(g.limitCalls(h))
}

// limitBody answers 413 to bodies over the limit (see readBody).
func (g *Gateway) limitBody(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		r.Body = http.MaxBytesReader(w, r.Body, g.opts.MaxBodyBytes)
		next.ServeHTTP(w, r)
	})
}

// authorized wraps a management handler with the check that the caller may do verb on
// the functions of the URL's namespace; the handler's Kubernetes calls act as the
// authorized caller, with their token (see callerHTTPClient).
func (g *Gateway) authorized(verb string, h http.HandlerFunc) http.HandlerFunc {
	return g.auth.Require(func(r *http.Request) httpapi.Access {
		return functionAccess(verb, chi.URLParam(r, "namespace"))
	})(h).ServeHTTP
}

// metricsAuth guards /metrics as the API is guarded, since its series name every
// tenant's functions: a bearer token the Kubernetes API accepts, whose user may get
// the path /metrics.
func (g *Gateway) metricsAuth(next http.Handler) http.Handler {
	return g.auth.Require(func(*http.Request) httpapi.Access { return pathAccess("/metrics") })(next)
}

// hookAuth lets through /hooks calls that present the gateway's hook token (the
// engines' credential, compared in constant time) or a Kubernetes token whose user
// may invoke functions in the namespace, as a test call through the API must. A
// gateway without a hook token leaves its hooks open.
func (g *Gateway) hookAuth(h http.HandlerFunc) http.HandlerFunc {
	if g.opts.HookToken == "" {
		return h
	}
	want := []byte(g.opts.HookToken)
	return func(w http.ResponseWriter, r *http.Request) {
		token, ok := httpapi.Bearer(r)
		if !ok {
			httpapi.WriteError(w, httpapi.NewError(http.StatusUnauthorized, "unauthorized", "this gateway's hooks need its hook token, or a Kubernetes token allowed to invoke functions, as a bearer token"))
			return
		}
		if subtle.ConstantTimeCompare([]byte(token), want) == 1 {
			h(w, r)
			return
		}
		g.authorized(verbInvoke, h)(w, r)
	}
}

func (g *Gateway) readyz(w http.ResponseWriter, _ *http.Request) {
	if g.draining.Load() {
		httpapi.WriteError(w, httpapi.NewError(http.StatusServiceUnavailable, "draining", "the gateway is shutting down; calls in flight are finished"))
		return
	}
	if !g.Ready() {
		httpapi.WriteError(w, httpapi.NewError(http.StatusServiceUnavailable, "not_ready", "functions not loaded yet"))
		return
	}
	httpapi.WriteJSON(w, http.StatusOK, map[string]string{"status": "ready"})
}
