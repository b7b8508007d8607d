// Package immortalcontainer owns the sync hook of the ImmortalContainer reference
// operator (example.com/v1alpha1): exactly one pod running spec.image, recreated by
// the engine whenever it is deleted.
package immortalcontainer
