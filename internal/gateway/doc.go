// Package gateway serves hook functions as lambdas. Function objects
// (metalambda.dev/v1alpha1) are the only store: the gateway watches them, compiles each
// with its runtime, serves it at /hooks/{namespace}/{name}, and offers a REST API under
// /v1 that creates, updates and deletes the same objects, guarded by the Kubernetes
// API's own authentication (TokenReview) and RBAC (SubjectAccessReview).
package gateway
