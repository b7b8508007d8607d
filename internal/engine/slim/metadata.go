package slim

import (
	"bytes"
	"strconv"

	"github.com/metalambda/metalambda/internal/jsonvalue"
)

// Identity is what the engine reads of the answer to a write: the written object's
// identity, its resourceVersion and its generation.
type Identity struct {
	Name, Namespace, UID, ResourceVersion string
	Generation                            int64
}

// ReadIdentity reads an Identity from the metadata of the object that data holds (an
// object, or its metadata alone as the API server sends it for
// as=PartialObjectMetadata), without decoding anything else: a write's answer holds
// managedFields, timestamps and often a whole object, of which nothing is read.
//
// It reads what decoding data into a metav1.PartialObjectMetadata with
// sigs.k8s.io/json's case-sensitive decoder would hold in those fields (checking the
// JSON first with jsonvalue.Valid, a pass faster than encoding/json's); the types of
// the members it does not read are not checked. Where decoding could fail or differ
// on what it reads (data that is not valid JSON or not an object, a metadata that is
// neither an object nor null, one of its fields of another JSON type, a string with
// escapes, a generation that is not an integer literal), it reports false, and the
// caller decodes data that way instead.
func ReadIdentity(data []byte) (id Identity, ok bool) {
	if !jsonvalue.Valid(data) {
		return id, false
	}
	valid := true
	ok = members(data, skipSpace(data, 0), func(key []byte, start, end int) bool {
		if string(key) == "metadata" {
			valid = readIdentity(data[start:end], &id)
		}
		return valid
	})
	return id, ok && valid
}

// readIdentity fills id from the members of the metadata object value, as a decoder
// into a struct does: a later member overwrites an earlier one, null leaves a field as
// it is.
func readIdentity(value []byte, id *Identity) bool {
	if string(value) == "null" {
		return true
	}
	valid := true
	ok := members(value, 0, func(key []byte, start, end int) bool {
		v := value[start:end]
		switch string(key) {
		case "name":
			valid = readString(v, &id.Name)
		case "namespace":
			valid = readString(v, &id.Namespace)
		case "uid":
			valid = readString(v, &id.UID)
		case "resourceVersion":
			valid = readString(v, &id.ResourceVersion)
		case "generation":
			valid = readInt(v, &id.Generation)
		}
		return valid
	})
	return ok && valid
}

func readString(v []byte, s *string) bool {
	switch {
	case string(v) == "null":
		return true
	case len(v) < 2 || v[0] != '"' || bytes.IndexByte(v, '\\') >= 0:
		return false
	}
	*s = string(v[1 : len(v)-1])
	return true
}

func readInt(v []byte, n *int64) bool {
	if string(v) == "null" {
		return true
	}
	i, err := strconv.ParseInt(string(v), 10, 64)
	if err != nil {
		return false
	}
	*n = i
	return true
}
