// Package hook is the webhook client that carries the hook protocol (package hookapi):
// endpoints resolved from a Hook spec, TLS and authentication, ETag caching, errors
// and metrics of every call.
package hook
