// Package apply owns the pure side of applying children: deciding whether an
// observed object already holds what a hook asked for (InSync, Diff, Removed,
// RemovedManaged), building the body of a server-side apply (ForApply), and the
// kubectl-like three-way merge with its last-applied annotation (ThreeWayMerge,
// SetLastApplied, LastApplied). Nothing here calls the API server.
//
// Objects are map[string]any as decoded by encoding/json or apimachinery's
// unstructured package: nested objects are map[string]any, lists []any, and numbers
// may be any Go numeric type or json.Number.
package apply
