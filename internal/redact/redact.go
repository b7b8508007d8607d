// Package redact hides secret values in recorded JSON bodies: the data and
// stringData of Secrets and authorization values, wherever they appear. The gateway's
// invocation history and the engine's hook call history show bodies through it.
package redact

import (
	"bytes"
	"encoding/json"
	"strings"
)

// Placeholder replaces a secret value.
const Placeholder = "[redacted]"

// JSON replaces, anywhere in a JSON body, the values of the data and stringData
// of every object of kind Secret (keeping their keys) and every "authorization" value
// that is not an object. Bodies that cannot hold either are returned as they are
// without being parsed; a body that is not JSON is replaced by a note.
func JSON(raw json.RawMessage) json.RawMessage {
	if len(raw) == 0 || !mayHoldSecrets(raw) {
		return raw
	}
	var v any
	if err := json.Unmarshal(raw, &v); err != nil {
		note, _ := json.Marshal(map[string]any{"redacted": "the body is not JSON", "bytes": len(raw)})
		return note
	}
	redact(v)
	out, err := json.Marshal(v)
	if err != nil {
		return nil
	}
	return out
}

// mayHoldSecrets is the fast path of JSON: without these bytes (an escaped
// character could spell them otherwise) a body holds no Secret and no authorization.
func mayHoldSecrets(raw []byte) bool {
	return bytes.Contains(raw, []byte("Secret")) || bytes.Contains(raw, []byte("uthorization")) ||
		bytes.Contains(raw, []byte("UTHORIZATION")) || bytes.Contains(raw, []byte(`\u`))
}

func redact(v any) {
	switch t := v.(type) {
	case map[string]any:
		if t["kind"] == "Secret" {
			redactValues(t, "data")
			redactValues(t, "stringData")
		}
		for k, child := range t {
			if _, isObject := child.(map[string]any); strings.EqualFold(k, "authorization") && !isObject && child != nil {
				t[k] = Placeholder
				continue
			}
			redact(child)
		}
	case []any:
		for _, child := range t {
			redact(child)
		}
	}
}

// redactValues replaces every value of the map at m[field], or m[field] itself when it
// is not a map.
func redactValues(m map[string]any, field string) {
	switch values := m[field].(type) {
	case nil:
	case map[string]any:
		for k := range values {
			values[k] = Placeholder
		}
	default:
		m[field] = Placeholder
	}
}
