// Package engineapi holds the JSON types of the engine's HTTP API (the record of recent
// hook calls, controller summaries and parent details the engine serves on
// --api-address) and a small client for it. It imports no engine code and no
// client-go, so the gateway's dashboard and other tools depend on the wire format
// alone.
package engineapi
