// Package dashboard is the web dashboard the gateway serves at /ui/: server-rendered
// html/template pages (templates and built scripts in package web) that htmx updates
// live over server-sent events.
//
// A user logs in by pasting a Kubernetes bearer token, which the gateway's TokenReview
// accepts; the session (a random id in an HttpOnly, SameSite=Strict cookie) keeps the
// token on the server, and every Kubernetes and engine API call of the session carries
// it, so the API server's RBAC decides what the user sees and does. Every request that
// changes something needs the session's CSRF token.
package dashboard
