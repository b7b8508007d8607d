// Package slim decodes API objects without their metadata.managedFields.
//
// Under server-side apply, the engine's caches drop managedFields (nobody reads them
// from a cache), but the dynamic client decodes every watch event and list into maps
// first, and the managedFields of a small object are often most of its maps. A
// NegotiatedSerializer from [WithoutManagedFields] cuts them out of the JSON before it
// is decoded: of an object, or of each item of a list. Input it does not understand
// is decoded as it came. An object decoded with no target (a watch event's) is decoded
// in one pass rather than the serializer's two (three: encoding/json checks the JSON
// before it decodes it), by [jsonvalue.ParseObject]. [ReadIdentity] reads what the engine
// needs of a write's answer without decoding the rest of it.
package slim

import (
	"bytes"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"

	"github.com/metalambda/metalambda/internal/jsonvalue"
)

// WithoutManagedFields wraps ns so that every object it decodes from JSON lacks
// metadata.managedFields.
func WithoutManagedFields(ns runtime.NegotiatedSerializer) runtime.NegotiatedSerializer {
	return negotiated{ns}
}

type negotiated struct{ runtime.NegotiatedSerializer }

func (n negotiated) SupportedMediaTypes() []runtime.SerializerInfo {
	infos := n.NegotiatedSerializer.SupportedMediaTypes()
	out := make([]runtime.SerializerInfo, len(infos))
	for i, info := range infos {
		if info.MediaType == runtime.ContentTypeJSON {
			info.Serializer = serializer{info.Serializer}
			if info.StreamSerializer != nil {
				stream := *info.StreamSerializer
				stream.Serializer = watchEvents{stream.Serializer}
				stream.Framer = objectFramer{stream.Framer}
				info.StreamSerializer = &stream
			}
		}
		out[i] = info
	}
	return out
}

// watchEvents decodes the frames of a watch, {"type":...,"object":...}, by finding
// the two members, instead of the serializer's two passes over the whole frame (one
// for an apiVersion and kind it does not have, one to copy the object out), and
// copies the object out without its managedFields; the object itself is decoded by
// serializer. A frame is one JSON value already (the
// framer's JSON decoder checked it); one with other members, or a type with escapes,
// goes to the serializer.
type watchEvents struct{ runtime.Serializer }

// watchEventKind is the kind the dynamic client's scheme knows WatchEvent by.
var watchEventKind = schema.GroupVersionKind{Version: "v1", Kind: "WatchEvent"}

func (w watchEvents) Decode(data []byte, defaults *schema.GroupVersionKind, into runtime.Object) (runtime.Object, *schema.GroupVersionKind, error) {
	if ev, ok := into.(*metav1.WatchEvent); ok && defaults == nil && decodeWatchEvent(data, ev) {
		kind := watchEventKind
		return ev, &kind, nil
	}
	return w.Serializer.Decode(data, defaults, into)
}

// decodeWatchEvent fills ev from a frame holding exactly a type string without escapes
// and an object, or reports false and leaves ev alone.
func decodeWatchEvent(data []byte, ev *metav1.WatchEvent) bool {
	var typ, object []byte
	ok := members(data, skipSpace(data, 0), func(key []byte, start, end int) bool {
		switch string(key) {
		case "type":
			typ = data[start:end]
		case "object":
			object = data[start:end]
		default:
			typ = nil
			return false
		}
		return true
	})
	if !ok || len(typ) < 2 || typ[0] != '"' || bytes.IndexByte(typ, '\\') >= 0 || object == nil {
		return false
	}
	ev.Type = string(typ[1 : len(typ)-1])
	ev.Object = runtime.RawExtension{}
	if !bytes.Equal(object, []byte("null")) { // as RawExtension decodes null
		ev.Object.Raw = stripped(object)
	}
	return true
}

// stripped is data without managedFields, in a slice of its own (the frame's buffer is
// reused for the next frame): the copy that cutting them makes, or else a copy. The
// object's decoding, which strips them too, then finds none to cut, and each event's
// object is copied once rather than twice.
func stripped(data []byte) []byte {
	if out := Strip(data); len(out) != len(data) {
		return out
	}
	return bytes.Clone(data)
}

type serializer struct{ runtime.Serializer }

func (s serializer) Decode(data []byte, defaults *schema.GroupVersionKind, into runtime.Object) (runtime.Object, *schema.GroupVersionKind, error) {
	data = Strip(data)
	if into == nil && defaults == nil {
		if obj, gvk, ok := decodeObject(data); ok {
			return obj, gvk, nil
		}
	}
	return s.Serializer.Decode(data, defaults, into)
}

// metav1Kinds recognizes the kinds the dynamic client decodes into types of their own
// (a watch's error Status, say), as its scheme does.
var metav1Kinds = func() *runtime.Scheme {
	s := runtime.NewScheme()
	metav1.AddToGroupVersion(s, schema.GroupVersion{Version: "v1"})
	return s
}()

// decodeObject decodes data into an unstructured object, as the dynamic client's
// serializer does with an object it has no type for, in one pass instead of two (the
// serializer first reads the whole object once for its apiVersion and kind alone): a
// watch event's object is decoded this way. It declines (ok false), leaving data to
// the serializer, when data is not an object with an apiVersion and a kind, is a list,
// or is of a kind the serializer decodes into a type.
func decodeObject(data []byte) (obj runtime.Object, gvk *schema.GroupVersionKind, ok bool) {
	u := &unstructured.Unstructured{}
	if m, parsed := jsonvalue.ParseObject(data); parsed {
		u.Object = m
	} else if err := u.UnmarshalJSON(data); err != nil {
		return nil, nil, false
	}
	kind := u.GroupVersionKind()
	if kind.Kind == "" || kind.Version == "" || metav1Kinds.Recognizes(kind) {
		return nil, nil, false
	}
	if _, isList := u.Object["items"]; isList {
		return nil, nil, false
	}
	return u, &kind, true
}

var managedFieldsKey = []byte(`"managedFields"`)

// Strip returns data without metadata.managedFields: of the object data holds, or of
// each object in its "items" array. Data without them, or that is not a JSON object as
// the API server writes one, is returned as it is.
func Strip(data []byte) []byte {
	if !bytes.Contains(data, managedFieldsKey) {
		return data
	}
	var cuts [][2]int
	cutFrom := func(metadata int) {
		if from, to, found := managedFields(data, metadata); found {
			cuts = append(cuts, [2]int{from, to})
		}
	}
	ok := members(data, skipSpace(data, 0), func(key []byte, start, _ int) bool {
		switch string(key) {
		case "metadata":
			cutFrom(start)
		case "items":
			if data[start] == '[' {
				elements(data, start, func(item, _ int) bool {
					members(data, item, func(key []byte, start, _ int) bool {
						if string(key) == "metadata" {
							cutFrom(start)
						}
						return true
					})
					return true
				})
			}
		}
		return true
	})
	if !ok || len(cuts) == 0 {
		return data
	}
	out := make([]byte, 0, len(data))
	last := 0
	for _, c := range cuts {
		out = append(out, data[last:c[0]]...)
		last = c[1]
	}
	return append(out, data[last:]...)
}

// managedFields finds the managedFields member of the object at data[start:] and
// returns the range to cut: the member with the comma and space that join it to the
// next member, or, when it is the last, from the end of the previous member's value.
func managedFields(data []byte, start int) (from, to int, found bool) {
	prevEnd := -1 // where the previous member's value ends
	members(data, start, func(key []byte, valueStart, valueEnd int) bool {
		if string(key) != "managedFields" {
			prevEnd = valueEnd
			return true
		}
		found = true
		keyStart := keyStartOf(data, valueStart)
		next := skipSpace(data, valueEnd)
		switch {
		case next < len(data) && data[next] == ',': // more members follow
			from, to = keyStart, skipSpace(data, next+1)
		case prevEnd >= 0: // the last of several
			from, to = prevEnd, valueEnd
		default: // the only member
			from, to = keyStart, valueEnd
		}
		return false
	})
	return from, to, found
}

// keyStartOf is where the "managedFields" key of the member whose value starts at
// valueStart begins: back over the colon and spaces to the key's closing quote.
func keyStartOf(data []byte, valueStart int) int {
	i := valueStart - 1
	for isSpace(data[i]) {
		i--
	}
	i-- // the colon
	for isSpace(data[i]) {
		i--
	}
	return i - len(managedFieldsKey) + 1 // data[i] is the closing quote
}

// members calls f for each member of the object at data[i:] with its key (as it
// is written), where its value starts and ends, until f returns false. It reports
// false for input that is not a well-formed object as far as it read.
func members(data []byte, i int, f func(key []byte, start, end int) bool) bool {
	i, empty, ok := open(data, i, '{', '}')
	if !ok || empty {
		return ok
	}
	for {
		if data[i] != '"' {
			return false
		}
		keyEnd, ok := skipString(data, i)
		if !ok {
			return false
		}
		key := data[i+1 : keyEnd-1]
		i = skipSpace(data, keyEnd)
		if i >= len(data) || data[i] != ':' {
			return false
		}
		start := skipSpace(data, i+1)
		end, ok := skipValue(data, start)
		if !ok {
			return false
		}
		if !f(key, start, end) {
			return true
		}
		var done bool
		if i, done, ok = next(data, end, '}'); !ok || done {
			return ok
		}
	}
}

// elements calls f for each element of the array at data[i:], as members does.
func elements(data []byte, i int, f func(start, end int) bool) bool {
	i, empty, ok := open(data, i, '[', ']')
	if !ok || empty {
		return ok
	}
	for {
		end, ok := skipValue(data, i)
		if !ok {
			return false
		}
		if !f(i, end) {
			return true
		}
		var done bool
		if i, done, ok = next(data, end, ']'); !ok || done {
			return ok
		}
	}
}

// open starts the object or array at data[i:]: where its first member or element
// starts, and whether it is empty.
func open(data []byte, i int, opening, closing byte) (first int, empty, ok bool) {
	if i >= len(data) || data[i] != opening {
		return 0, false, false
	}
	i = skipSpace(data, i+1)
	if i >= len(data) {
		return 0, false, false
	}
	return i, data[i] == closing, true
}

// next finds, after a member or element that ends at end, where the next one starts,
// or that the container ends (done).
func next(data []byte, end int, closing byte) (start int, done, ok bool) {
	i := skipSpace(data, end)
	switch {
	case i >= len(data):
		return 0, false, false
	case data[i] == ',':
		i = skipSpace(data, i+1)
		return i, false, i < len(data)
	case data[i] == closing:
		return i, true, true
	}
	return 0, false, false
}

// skipValue returns the end of the JSON value at data[i:].
func skipValue(data []byte, i int) (int, bool) {
	if i >= len(data) {
		return 0, false
	}
	switch data[i] {
	case '"':
		return skipString(data, i)
	case '{', '[':
		depth := 0
		for i < len(data) {
			switch data[i] {
			case '"':
				end, ok := skipString(data, i)
				if !ok {
					return 0, false
				}
				i = end
				continue
			case '{', '[':
				depth++
			case '}', ']':
				depth--
				if depth == 0 {
					return i + 1, true
				}
			}
			i++
		}
		return 0, false
	default: // a number, true, false or null
		start := i
		for i < len(data) && !isSpace(data[i]) && data[i] != ',' && data[i] != '}' && data[i] != ']' {
			i++
		}
		return i, i > start
	}
}

// skipString returns the end of the string whose opening quote is data[i].
func skipString(data []byte, i int) (int, bool) {
	for i++; i < len(data); i++ {
		switch data[i] {
		case '\\':
			i++
		case '"':
			return i + 1, true
		}
	}
	return 0, false
}

func skipSpace(data []byte, i int) int {
	for i < len(data) && isSpace(data[i]) {
		i++
	}
	return i
}

func isSpace(c byte) bool { return c == ' ' || c == '\t' || c == '\n' || c == '\r' }
