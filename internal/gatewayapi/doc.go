// Package gatewayapi holds the JSON types of the gateway's management API (functions,
// their recorded invocations, test calls and replays under
// /v1/namespaces/{namespace}/functions) and a typed client for it, used by the CLI,
// the gateway's dashboard and the benchmarks. Errors are httpapi's one error shape.
package gatewayapi
