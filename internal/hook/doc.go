// Package hook owns the hook wire protocol: the JSON requests the engine sends to
// sync, finalize and customize hooks and the responses it accepts (Metacontroller's v1
// and v2 formats), and the webhook client that carries them.
package hook
