// Package hookapi holds the hook wire types: the JSON requests sent to sync, finalize
// and customize hooks, the responses they answer (Metacontroller's v1 and v2 formats),
// and how objects are keyed in them. It imports no HTTP client and no metrics, so hook
// functions written in Go (functions/) depend on the protocol alone.
package hookapi
