// Package deploy holds what installs Metalambda on a cluster: the Helm chart
// (helm/metalambda), the kustomize bases rendered from it (kustomize/engine,
// kustomize/platform), the images (images/) and the gateway's RBAC (gateway/). Its
// tests render the chart, check that each kustomize base builds the very same
// objects, and apply them to a real control plane.
package deploy
