// Package clientmetrics serves client-go's REST client metrics (rest_client_*) in
// Prometheus registries, under the names Kubernetes components and controller-runtime
// serve them.
package clientmetrics
