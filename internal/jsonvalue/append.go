package jsonvalue

import (
	"bytes"
	"encoding/json"
	"slices"
	"strconv"
	"sync"
	"unicode/utf8"
)

// Appender is a value that appends its own JSON encoding, as [Append] does for the
// values it knows: the hook wire types implement it, so that a hook request is
// encoded without encoding/json's reflection.
type Appender interface {
	AppendJSON(dst []byte) ([]byte, error)
}

// Append appends the JSON encoding of v to dst, byte for byte as encoding/json's
// Marshal writes it: map keys sorted, "<", ">" and "&" escaped, nil maps and slices as
// null. The shapes of unstructured objects (map[string]any, []any, strings, int64,
// booleans, nil) are written directly, with no reflection and no allocation but the
// sorted keys of each map; anything else (floats, other types) is written by
// encoding/json, whose errors (NaN, say) Append returns.
//
// It is what the engine encodes objects with on its hot path: hook requests, the
// desired hash of a child, the bodies of its writes. The output being Marshal's, a
// desired hash computed by an earlier version of the engine still matches.
func Append(dst []byte, v any) ([]byte, error) {
	switch v := v.(type) {
	case nil:
		return append(dst, "null"...), nil
	case map[string]any:
		return AppendMap(dst, v, Append)
	case []any:
		if v == nil {
			return append(dst, "null"...), nil
		}
		dst = append(dst, '[')
		for i, e := range v {
			if i > 0 {
				dst = append(dst, ',')
			}
			var err error
			if dst, err = Append(dst, e); err != nil {
				return dst, err
			}
		}
		return append(dst, ']'), nil
	case string:
		return AppendString(dst, v), nil
	case bool:
		return strconv.AppendBool(dst, v), nil
	case int64:
		return strconv.AppendInt(dst, v, 10), nil
	case int:
		return strconv.AppendInt(dst, int64(v), 10), nil
	case int32:
		return strconv.AppendInt(dst, int64(v), 10), nil
	case map[string]string:
		return AppendMap(dst, v, func(dst []byte, s string) ([]byte, error) { return AppendString(dst, s), nil })
	case Appender:
		return v.AppendJSON(dst)
	}
	data, err := json.Marshal(v)
	if err != nil {
		return dst, err
	}
	return append(dst, data...), nil
}

// AppendMap appends m as a JSON object with its keys sorted, each value written by
// value; a nil map is null, as encoding/json writes it.
func AppendMap[V any](dst []byte, m map[string]V, value func([]byte, V) ([]byte, error)) ([]byte, error) {
	if m == nil {
		return append(dst, "null"...), nil
	}
	var small [16]string
	keys := small[:0]
	for k := range m {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	dst = append(dst, '{')
	for i, k := range keys {
		if i > 0 {
			dst = append(dst, ',')
		}
		dst = AppendString(dst, k)
		dst = append(dst, ':')
		var err error
		if dst, err = value(dst, m[k]); err != nil {
			return dst, err
		}
	}
	return append(dst, '}'), nil
}

// AppendString appends s as a JSON string, escaped as encoding/json escapes it (HTML
// characters included).
func AppendString(dst []byte, s string) []byte {
	for i := 0; i < len(s); i++ {
		if c := s[i]; c < 0x20 || c >= utf8.RuneSelf || c == '"' || c == '\\' || c == '<' || c == '>' || c == '&' {
			data, _ := json.Marshal(s) // a string always encodes
			return append(dst, data...)
		}
	}
	dst = append(dst, '"')
	dst = append(dst, s...)
	return append(dst, '"')
}

// Marshal returns the encoding of v as json.Marshal does (see Append), in a slice of
// its own: for a caller that keeps it, or hands it to one that may (an HTTP
// transport).
func Marshal(v any) ([]byte, error) {
	var out []byte
	err := Encoded(v, func(data []byte) { out = bytes.Clone(data) })
	return out, err
}

// Encoded calls use with the encoding of v (see Append), in a buffer that is reused
// once use returns, unless v cannot be encoded.
func Encoded(v any, use func(data []byte)) error {
	buf := scratch.Get().(*[]byte)
	data, err := Append((*buf)[:0], v)
	if err == nil {
		use(data)
	}
	if cap(data) <= maxScratch {
		*buf = data
		scratch.Put(buf)
	}
	return err
}

// scratch holds the buffers of Encoded; one grown past maxScratch is left to the
// garbage collector.
var scratch = sync.Pool{New: func() any { return new([]byte) }}

const maxScratch = 1 << 20
