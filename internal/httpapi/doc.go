// Package httpapi is the kit the project's HTTP APIs share: one JSON error shape and
// its writer, a JSON writer, the client side that turns an error answer back into a
// Go error, and the middleware that authenticates a bearer token and authorizes the
// request through the Kubernetes API (TokenReview and SubjectAccessReview, retried as
// k8s.io/apiserver's delegating authenticator and authorizer retry them).
package httpapi
