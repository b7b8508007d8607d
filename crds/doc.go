// Package crds holds the CustomResourceDefinitions Metalambda serves, as YAML files
// embedded in the binary, and installs them.
//
// Today these are the three kinds of the metacontroller.k8s.io/v1alpha1 API, written by
// hand so that they accept every field of internal/apis/metacontroller/v1alpha1 and
// every manifest the upstream Metacontroller v4.17 CRDs accept:
//
//   - compositecontrollers.metacontroller.k8s.io (cluster-scoped, short names cc, cctl)
//   - decoratorcontrollers.metacontroller.k8s.io (cluster-scoped, short names dec, decorators)
//   - controllerrevisions.metacontroller.k8s.io (namespaced)
//
// Every *.yaml file of this directory is embedded, so a CRD added here is returned by
// All without code changes. Files may hold several YAML documents; a document that is
// empty or only comments is skipped.
//
//	all, err := crds.All()
//	...
//	err = crds.Install(ctx, apiextensionsClient, all...)
package crds
