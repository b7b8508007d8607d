// Package engine runs Metacontroller-compatible controllers: a Manager watches
// CompositeController and DecoratorController objects and hosts one controller per
// object. Each hosted controller runs one level-based reconcile per parent:
// ensureFinalizer, observeChildren (claim, adopt, release), loadRelated, callHook,
// applyChildren, writeParent. Composite and decorator controllers share that loop
// and differ only in a flavor (how parents are selected, how children are found, what
// the hook is sent and how the parent is written).
//
// The package is laid out in rooms, so that each part is read in one place:
//
//   - the reconciler, the only files with methods of controller: reconciler.go (the
//     controller, its start and its work loop), handlers.go (informer events to
//     queue keys), reconcile.go (one sync and its phases, and what a finished sync
//     records), finalizer.go, hookcall.go (the hook call both flavors share),
//     children.go (applying children), rolling.go and revisions.go (rolling updates),
//     hookevents.go (the events a hook answers, recorded on the parent);
//   - the flavors: composite.go, decorator.go;
//   - the manager of controller objects: manager.go, build.go, controllerstatus.go,
//     events.go;
//   - what the reconciler shares: env.go, objects.go, errors.go, ownwrites.go,
//     related.go, resync.go, parentstate.go, metawrite.go, credentials.go, metrics.go,
//     queuemetrics.go, options.go, loopsettings.go (the annotations that set a
//     controller's concurrency and backoff);
//   - view.go: the engine as its read API (package api) sees it.
//
// Retries, Retry-After holds, sync metrics and panic recovery belong to the work loop
// (package workloop), which the gateway's Function store runs on too.
package engine
