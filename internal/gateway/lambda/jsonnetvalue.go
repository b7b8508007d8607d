//go:build !nojsonnet

package lambda

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"math"
	"slices"
	"strconv"
	"sync"

	"github.com/go-json-experiment/json/jsontext"
)

// A Jsonnet call's request goes to go-jsonnet, and its response comes back, as
// the Go values of encoding/json (map[string]any, []any, string, float64, bool,
// nil). They are read and written here in one pass each, where encoding/json
// checks the whole document before it decodes it and encodes maps by reflection:
// for a small hook that was a fifth of what the evaluation cost.

// decoders are the jsonDecoders of calls in process.
var decoders = sync.Pool{New: func() any { return new(jsonDecoder) }}

// decodeJSON reads data with a pooled jsonDecoder.
func decodeJSON(data []byte) (any, error) {
	d := decoders.Get().(*jsonDecoder)
	defer decoders.Put(d)
	return d.decode(data)
}

// jsonDecoder reads JSON documents into Go values, reusing one decoder; it serves
// one document at a time.
type jsonDecoder struct {
	dec jsontext.Decoder
	// names are the object member names read so far, up to maxNames of them,
	// whose strings are reused: a function's requests repeat the same names.
	names map[string]string
}

// maxNames bounds the member names a jsonDecoder keeps, and maxNameLen the
// length of one: a worker's decoder lives as long as the worker, and its
// callers choose the names (a request of 4 MiB may have one name of 4 MiB).
const (
	maxNames   = 256
	maxNameLen = 128
)

// decode reads data as encoding/json.Unmarshal into an any does: the last of
// duplicate names wins, invalid UTF-8 becomes U+FFFD, a number is a float64 and
// one beyond a float64 is an error.
func (d *jsonDecoder) decode(data []byte) (any, error) {
	// A bytes.Buffer is read in place, where another reader is copied.
	d.dec.Reset(bytes.NewBuffer(data), jsontext.AllowDuplicateNames(true), jsontext.AllowInvalidUTF8(true))
	v, err := d.read(0)
	if err != nil {
		return nil, err
	}
	if _, err := d.dec.ReadToken(); err != io.EOF {
		if err == nil {
			err = errors.New("data after the top-level value")
		}
		return nil, err
	}
	return v, nil
}

func (d *jsonDecoder) read(depth int) (any, error) {
	if depth > maxJSONDepth {
		return nil, errors.New("nested too deeply")
	}
	tok, err := d.dec.ReadToken()
	if err != nil {
		return nil, err
	}
	switch tok.Kind() {
	case 'n':
		return nil, nil
	case 't', 'f':
		return tok.Bool(), nil
	case '"':
		return tok.String(), nil
	case '0':
		return strconv.ParseFloat(tok.String(), 64)
	case '{':
		obj := map[string]any{}
		for d.dec.PeekKind() != '}' {
			name, err := d.dec.ReadToken()
			if err != nil {
				return nil, err
			}
			key := d.name(name) // before the next read voids the token
			if obj[key], err = d.read(depth + 1); err != nil {
				return nil, err
			}
		}
		_, err := d.dec.ReadToken()
		return obj, err
	case '[':
		items := []any{}
		for d.dec.PeekKind() != ']' {
			value, err := d.read(depth + 1)
			if err != nil {
				return nil, err
			}
			items = append(items, value)
		}
		_, err := d.dec.ReadToken()
		return items, err
	}
	return nil, fmt.Errorf("unexpected token %s", tok)
}

// name is the member name tok, the string kept from an earlier document when
// there is one: looking it up allocates nothing (the conversion does not
// escape), where a new string is one allocation per name per request.
func (d *jsonDecoder) name(tok jsontext.Token) string {
	if s, ok := d.names[tok.String()]; ok {
		return s
	}
	s := tok.String()
	if len(d.names) < maxNames && len(s) <= maxNameLen {
		if d.names == nil {
			d.names = make(map[string]string, 32)
		}
		d.names[s] = s
	}
	return s
}

// appendJSON appends v, a value go-jsonnet manifested, as compact JSON with the
// names of an object sorted, as encoding/json writes it (HTML characters
// unescaped, U+2028 and U+2029 as they are).
func appendJSON(b []byte, v any) ([]byte, error) {
	switch v := v.(type) {
	case nil:
		return append(b, "null"...), nil
	case bool:
		return strconv.AppendBool(b, v), nil
	case float64:
		return appendNumber(b, v)
	case string:
		return jsontext.AppendQuote(b, v)
	case []any:
		b = append(b, '[')
		for i, item := range v {
			if i > 0 {
				b = append(b, ',')
			}
			var err error
			if b, err = appendJSON(b, item); err != nil {
				return nil, err
			}
		}
		return append(b, ']'), nil
	case map[string]any:
		return appendObject(b, v)
	}
	return nil, fmt.Errorf("unsupported value of type %T", v)
}

func appendObject(b []byte, obj map[string]any) ([]byte, error) {
	keys := make([]string, 0, len(obj))
	for k := range obj {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	b = append(b, '{')
	for i, k := range keys {
		if i > 0 {
			b = append(b, ',')
		}
		var err error
		if b, err = jsontext.AppendQuote(b, k); err != nil {
			return nil, err
		}
		b = append(b, ':')
		if b, err = appendJSON(b, obj[k]); err != nil {
			return nil, err
		}
	}
	return append(b, '}'), nil
}

// appendNumber writes f as encoding/json does: the shortest form that reads
// back as f, with an exponent only below 1e-6 or from 1e21 on.
func appendNumber(b []byte, f float64) ([]byte, error) {
	if math.IsInf(f, 0) || math.IsNaN(f) {
		return nil, fmt.Errorf("unsupported number %v", f)
	}
	format := byte('f')
	if abs := math.Abs(f); abs != 0 && (abs < 1e-6 || abs >= 1e21) {
		format = 'e'
	}
	b = strconv.AppendFloat(b, f, format, -1, 64)
	if format == 'e' {
		// 1e-07 becomes 1e-7.
		if n := len(b); n >= 4 && b[n-4] == 'e' && b[n-3] == '-' && b[n-2] == '0' {
			b[n-2] = b[n-1]
			b = b[:n-1]
		}
	}
	return b, nil
}
