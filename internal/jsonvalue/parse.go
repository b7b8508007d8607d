package jsonvalue

import (
	"bytes"
	"encoding/json"
	"strconv"
	"unicode/utf8"

	kjson "sigs.k8s.io/json"
)

// ParseObject decodes data, a JSON object, into maps as k8s.io/apimachinery's
// json.Unmarshal into a map[string]any does (the decoding of unstructured objects and
// hook answers): objects as map[string]any, arrays as []any, whole numbers that fit as
// int64, other numbers as float64, a later duplicate key winning. It reads data in one
// pass without reflection, where encoding/json's decoder checks it in one pass of its
// scanner and decodes it in a second.
//
// It declines (ok false) whatever it might read otherwise or that fails to decode:
// data that is not a JSON object or not valid JSON, a number that does not fit a
// float64, nesting deeper than [maxParseDepth]. The caller then decodes data the usual
// way, which gives its result or its error. Strings with escapes, control characters
// or bytes that are not UTF-8 are decoded by that decoder, one string at a time.
func ParseObject(data []byte) (obj map[string]any, ok bool) {
	p := parser{data: data}
	p.space()
	if p.i >= len(data) || data[p.i] != '{' {
		return nil, false
	}
	obj, ok = p.object(0)
	if !ok {
		return nil, false
	}
	p.space()
	return obj, p.i == len(data)
}

// ParseMembers reads data, a JSON object, as ParseObject does, calling f with each of
// its members in order (a duplicate key once for each), until f returns false. It
// reports whether it read the whole object and f took every member; when not, it may
// have called f with some of them.
func ParseMembers(data []byte, f func(key string, value any) bool) bool {
	p := parser{data: data}
	if p.next() != '{' {
		return false
	}
	p.i++
	if p.next() == '}' {
		p.i++
		p.space()
		return p.i == len(data)
	}
	for {
		if p.next() != '"' {
			return false
		}
		key, ok := p.string()
		if !ok || p.next() != ':' {
			return false
		}
		p.i++
		v, ok := p.value(0)
		if !ok || !f(key, v) {
			return false
		}
		switch p.next() {
		case ',':
			p.i++
		case '}':
			p.i++
			p.space()
			return p.i == len(data)
		default:
			return false
		}
	}
}

// maxParseDepth is how deeply ParseObject follows nested objects and arrays before
// declining (encoding/json refuses beyond 10000).
const maxParseDepth = 1000

type parser struct {
	data []byte
	i    int
}

func (p *parser) space() {
	for p.i < len(p.data) && isSpace(p.data[p.i]) {
		p.i++
	}
}

func isSpace(c byte) bool { return c == ' ' || c == '\t' || c == '\n' || c == '\r' }

// next skips whitespace and reports the byte there (0 at the end).
func (p *parser) next() byte {
	p.space()
	if p.i >= len(p.data) {
		return 0
	}
	return p.data[p.i]
}

func (p *parser) value(depth int) (any, bool) {
	switch c := p.next(); {
	case c == '{':
		return p.object(depth + 1)
	case c == '[':
		return p.array(depth + 1)
	case c == '"':
		return p.string()
	case c == '-' || '0' <= c && c <= '9':
		return p.number()
	case c == 't':
		return true, p.literal("true")
	case c == 'f':
		return false, p.literal("false")
	case c == 'n':
		return nil, p.literal("null")
	}
	return nil, false
}

func (p *parser) literal(word string) bool {
	if !bytes.HasPrefix(p.data[p.i:], []byte(word)) {
		return false
	}
	p.i += len(word)
	return true
}

// object reads the object at p.data[p.i] ('{').
func (p *parser) object(depth int) (map[string]any, bool) {
	if depth > maxParseDepth {
		return nil, false
	}
	p.i++
	obj := map[string]any{}
	if p.next() == '}' {
		p.i++
		return obj, true
	}
	for {
		if p.next() != '"' {
			return nil, false
		}
		key, ok := p.string()
		if !ok || p.next() != ':' {
			return nil, false
		}
		p.i++
		v, ok := p.value(depth)
		if !ok {
			return nil, false
		}
		obj[key] = v
		switch p.next() {
		case ',':
			p.i++
		case '}':
			p.i++
			return obj, true
		default:
			return nil, false
		}
	}
}

// array reads the array at p.data[p.i] ('['); an empty one is an empty slice, not nil.
func (p *parser) array(depth int) ([]any, bool) {
	if depth > maxParseDepth {
		return nil, false
	}
	p.i++
	arr := []any{}
	if p.next() == ']' {
		p.i++
		return arr, true
	}
	for {
		v, ok := p.value(depth)
		if !ok {
			return nil, false
		}
		arr = append(arr, v)
		switch p.next() {
		case ',':
			p.i++
		case ']':
			p.i++
			return arr, true
		default:
			return nil, false
		}
	}
}

// string reads the string at p.data[p.i] ('"'). One that holds nothing but
// printable ASCII or valid UTF-8 without escapes is its bytes; any other is decoded by
// the decoder whose result ParseObject gives.
func (p *parser) string() (string, bool) {
	start := p.i
	plain, ascii := true, true
	i := start + 1
	for ; i < len(p.data); i++ {
		c := p.data[i]
		if c == '"' {
			break
		}
		switch {
		case c == '\\':
			plain = false
			i++ // the escaped byte cannot end the string
		case c < 0x20:
			plain = false
		case c >= utf8.RuneSelf:
			ascii = false
		}
	}
	if i >= len(p.data) {
		return "", false
	}
	p.i = i + 1
	raw := p.data[start+1 : i]
	if plain && (ascii || utf8.Valid(raw)) {
		return string(raw), true
	}
	var s string
	if err := kjson.UnmarshalCaseSensitivePreserveInts(p.data[start:p.i], &s); err != nil {
		return "", false
	}
	return s, true
}

// number reads the number at p.data[p.i] as the decoder into maps does: without a
// '.', as an int64 if it fits, else as a float64.
func (p *parser) number() (any, bool) {
	start := p.i
	if p.data[p.i] == '-' {
		p.i++
	}
	intStart := p.i
	switch {
	case p.i < len(p.data) && p.data[p.i] == '0':
		p.i++
	case p.digits() == 0:
		return nil, false
	}
	intEnd := p.i
	point, exponent := false, false
	if p.i < len(p.data) && p.data[p.i] == '.' {
		point = true
		p.i++
		if p.digits() == 0 {
			return nil, false
		}
	}
	if p.i < len(p.data) && (p.data[p.i] == 'e' || p.data[p.i] == 'E') {
		exponent = true
		p.i++
		if p.i < len(p.data) && (p.data[p.i] == '+' || p.data[p.i] == '-') {
			p.i++
		}
		if p.digits() == 0 {
			return nil, false
		}
	}
	literal := p.data[start:p.i]
	if !point && !exponent && intEnd-intStart <= 18 { // fits an int64 for sure
		var n int64
		for _, d := range p.data[intStart:intEnd] {
			n = n*10 + int64(d-'0')
		}
		if start != intStart {
			n = -n
		}
		return n, true
	}
	if !point {
		if n, err := strconv.ParseInt(string(literal), 10, 64); err == nil {
			return n, true
		}
	}
	f, err := strconv.ParseFloat(string(literal), 64)
	return f, err == nil
}

// digits skips decimal digits and says how many.
func (p *parser) digits() int {
	start := p.i
	for p.i < len(p.data) && '0' <= p.data[p.i] && p.data[p.i] <= '9' {
		p.i++
	}
	return p.i - start
}

// Valid reports whether data is valid JSON, as encoding/json's Valid does, in a pass
// that is not its scanner's byte-by-byte state machine; nesting deeper than
// maxParseDepth is left to json.Valid.
func Valid(data []byte) bool {
	v := validator{parser: parser{data: data}}
	ok := v.value(0)
	if v.deep {
		return json.Valid(data)
	}
	v.space()
	return ok && v.i == len(data)
}

type validator struct {
	parser
	deep bool // nesting went deeper than maxParseDepth
}

func (v *validator) value(depth int) bool {
	switch c := v.next(); {
	case c == '{', c == '[':
		if depth >= maxParseDepth {
			v.deep = true
			return false
		}
		return v.container(c, depth+1)
	case c == '"':
		return v.string()
	case c == '-' || '0' <= c && c <= '9':
		return v.number()
	case c == 't':
		return v.literal("true")
	case c == 'f':
		return v.literal("false")
	case c == 'n':
		return v.literal("null")
	}
	return false
}

// container checks the object or array at v.data[v.i] (open).
func (v *validator) container(open byte, depth int) bool {
	closing := byte('}')
	if open == '[' {
		closing = ']'
	}
	v.i++
	if v.next() == closing {
		v.i++
		return true
	}
	for {
		if open == '{' {
			if v.next() != '"' || !v.string() || v.next() != ':' {
				return false
			}
			v.i++
		}
		if !v.value(depth) {
			return false
		}
		switch v.next() {
		case ',':
			v.i++
		case closing:
			v.i++
			return true
		default:
			return false
		}
	}
}

// string checks the string at v.data[v.i] ('"'): no control characters, and escapes
// that JSON has; other bytes, UTF-8 or not, are valid there.
func (v *validator) string() bool {
	for i := v.i + 1; i < len(v.data); i++ {
		switch c := v.data[i]; {
		case c == '"':
			v.i = i + 1
			return true
		case c < 0x20:
			return false
		case c == '\\':
			i++
			if i >= len(v.data) {
				return false
			}
			switch v.data[i] {
			case '"', '\\', '/', 'b', 'f', 'n', 'r', 't':
			case 'u':
				if i+4 >= len(v.data) || !isHex(v.data[i+1]) || !isHex(v.data[i+2]) || !isHex(v.data[i+3]) || !isHex(v.data[i+4]) {
					return false
				}
				i += 4
			default:
				return false
			}
		}
	}
	return false
}

func isHex(c byte) bool { return '0' <= c && c <= '9' || 'a' <= c && c <= 'f' || 'A' <= c && c <= 'F' }

// number checks the number at v.data[v.i].
func (v *validator) number() bool {
	if v.data[v.i] == '-' {
		v.i++
	}
	switch {
	case v.i < len(v.data) && v.data[v.i] == '0':
		v.i++
	case v.digits() == 0:
		return false
	}
	if v.i < len(v.data) && v.data[v.i] == '.' {
		v.i++
		if v.digits() == 0 {
			return false
		}
	}
	if v.i < len(v.data) && (v.data[v.i] == 'e' || v.data[v.i] == 'E') {
		v.i++
		if v.i < len(v.data) && (v.data[v.i] == '+' || v.data[v.i] == '-') {
			v.i++
		}
		if v.digits() == 0 {
			return false
		}
	}
	return true
}
