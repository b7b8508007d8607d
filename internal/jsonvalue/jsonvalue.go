// Package jsonvalue handles JSON-shaped values (maps, slices, strings, numbers,
// booleans and nil, as unstructured Kubernetes objects and hook answers hold them)
// by their JSON encoding, which is what the API server and a hook agree on.
package jsonvalue

import (
	"bytes"
	"encoding/json"
)

// Convert decodes the JSON-shaped value in into out (a pointer), through its
// encoding: an unstructured object into its typed form, say.
func Convert(in, out any) error {
	data, err := json.Marshal(in)
	if err != nil {
		return err
	}
	return json.Unmarshal(data, out)
}

// Equal compares two JSON-shaped values by their encoding, so that int64(3) from the
// API server equals float64(3) from a hook; map keys are sorted by the encoder. A
// value that cannot be encoded equals nothing.
func Equal(a, b any) bool {
	ja, errA := Append(nil, a)
	jb, errB := Append(nil, b)
	return errA == nil && errB == nil && bytes.Equal(ja, jb)
}
