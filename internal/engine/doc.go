// Package engine runs Metacontroller-compatible controllers: a Manager watches
// CompositeController and DecoratorController objects and hosts one controller per
// object. Each hosted controller runs one level-based reconcile per parent:
// ensureFinalizer, observeChildren (claim, adopt, release), loadRelated, callHook,
// applyChildren, writeParent. Composite and decorator controllers share that loop
// and differ only in a flavor (how parents are selected, how children are found, what
// the hook is sent and how the parent is written).
package engine
