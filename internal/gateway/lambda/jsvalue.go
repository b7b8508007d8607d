//go:build !nojavascript

package lambda

import (
	"errors"
	"io"
	"strconv"

	"github.com/dop251/goja"
	"github.com/go-json-experiment/json/jsontext"
)

// fromJSON builds the JavaScript value of a JSON document as JSON.parse does: keys
// in document order, the last of duplicate keys wins, "__proto__" is an own
// property, numbers are doubles. It reads with jsontext, which
// is several times faster than goja's JSON.parse (encoding/json's Decoder.Token);
// the request is most of what a small hook costs.
func (vm *jsVM) fromJSON(data []byte) (goja.Value, error) {
	// The VM's decoder serves its calls one after another.
	vm.src.Reset(data)
	if vm.dec == nil {
		vm.dec = new(jsontext.Decoder)
	}
	dec := vm.dec
	dec.Reset(&vm.src, jsontext.AllowDuplicateNames(true), jsontext.AllowInvalidUTF8(true))
	v, err := vm.readJSON(dec, 0)
	if err != nil {
		return nil, err
	}
	if _, err := dec.ReadToken(); err != io.EOF {
		if err == nil {
			err = errors.New("data after the top-level value")
		}
		return nil, err
	}
	return v, nil
}

func (vm *jsVM) readJSON(dec *jsontext.Decoder, depth int) (goja.Value, error) {
	if depth > maxJSONDepth {
		return nil, errors.New("nested too deeply")
	}
	tok, err := dec.ReadToken()
	if err != nil {
		return nil, err
	}
	switch tok.Kind() {
	case 'n':
		return goja.Null(), nil
	case 't', 'f':
		return vm.rt.ToValue(tok.Bool()), nil
	case '"':
		return vm.rt.ToValue(tok.String()), nil
	case '0':
		return vm.number(tok.String())
	case '{':
		obj := vm.rt.NewObject()
		for dec.PeekKind() != '}' {
			name, err := dec.ReadToken()
			if err != nil {
				return nil, err
			}
			key := name.String() // before the next read voids the token
			value, err := vm.readJSON(dec, depth+1)
			if err != nil {
				return nil, err
			}
			// Defined, as JSON.parse does: "__proto__" is an own property, and a
			// setter on Object.prototype is not called.
			if err := obj.DefineDataProperty(key, value, goja.FLAG_TRUE, goja.FLAG_TRUE, goja.FLAG_TRUE); err != nil {
				return nil, err
			}
		}
		_, err := dec.ReadToken()
		return obj, err
	case '[':
		var items []any
		for dec.PeekKind() != ']' {
			value, err := vm.readJSON(dec, depth+1)
			if err != nil {
				return nil, err
			}
			items = append(items, value)
		}
		_, err := dec.ReadToken()
		return vm.rt.NewArray(items...), err
	}
	return nil, errors.New("unexpected token " + tok.String())
}

// number is a JSON number as a JavaScript number: a double. One too large for a
// double is ±Infinity, as in JSON.parse of Node.js (goja's refuses it).
func (vm *jsVM) number(raw string) (goja.Value, error) {
	f, err := strconv.ParseFloat(raw, 64)
	if err != nil && !errors.Is(err, strconv.ErrRange) {
		return nil, err
	}
	return vm.rt.ToValue(f), nil
}
