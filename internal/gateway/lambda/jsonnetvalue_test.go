package lambda

import (
	"bytes"
	"encoding/json"
	"fmt"
	"math"
	"testing"

	"github.com/google/go-cmp/cmp"
)

// decodeJSON must give what encoding/json gives for an any, and refuse what it
// refuses.
func TestDecodeJSONMatchesEncodingJSON(t *testing.T) {
	docs := []string{
		`{}`, `[]`, `null`, `true`, `false`, `0`, `-0`, `12`, `1.5`, `1e3`, `1E-7`, `9007199254740993`,
		`123456789012345678901234567890`, `1e-400`,
		`""`, `"a\"b\\c\/d\b\f\n\r\t"`, `"\u00e9\u4e2d\ud83d\ude00"`, `"é中😀"`, `"\ud800"`, "\"a\xffb\"",
		`{"b": 1, "a": 2, "c": {"z": [], "y": {}}}`,
		`{"a": 1, "a": 2}`,
		`[1, "two", null, [3, [4]], {"five": 5}]`,
		` { "spaced" : [ 1 , 2 ] } `,
		`{"controller":{},"parent":{"apiVersion":"example.com/v1","kind":"Thing","metadata":{"name":"bench","namespace":"default"},"spec":{}},"children":{"ConfigMap.v1":{}}}`,
		`{"a\u0062": 1, "ab": 2, "\u00e9": 3, "é": 4, "\"": 5, "": 6}`, "{\"a\xffb\": 1, \"a\ufffdb\": 2}",
		`{"a-name-longer-than-thirty-two-bytes.example.com/x": {"a-name-longer-than-thirty-two-bytes.example.com/x": 1}}`,
	}
	// One decoder reads every document twice: the second time, the member
	// names it keeps are reused.
	var reused jsonDecoder
	for _, doc := range append(docs, docs...) {
		var want any
		if err := json.Unmarshal([]byte(doc), &want); err != nil {
			t.Fatalf("encoding/json refuses %s: %v", doc, err)
		}
		got, err := decodeJSON([]byte(doc))
		if err != nil {
			t.Errorf("decodeJSON(%s): %v", doc, err)
			continue
		}
		if !cmp.Equal(got, want) {
			t.Errorf("decodeJSON(%s) = %#v, want %#v", doc, got, want)
		}
		if got, err := reused.decode([]byte(doc)); err != nil || !cmp.Equal(got, want) {
			t.Errorf("decode(%s) by a decoder in use = %#v, %v; want %#v", doc, got, err, want)
		}
	}
	for _, doc := range []string{``, `{`, `{"a":}`, `[1,]`, `{} {}`, `1e400`, `nul`, `{"a" 1}`, `'a'`} {
		var v any
		if json.Unmarshal([]byte(doc), &v) == nil {
			t.Fatalf("encoding/json accepts %q", doc)
		}
		if _, err := decodeJSON([]byte(doc)); err == nil {
			t.Errorf("decodeJSON(%q) succeeded, want an error", doc)
		}
	}
}

// A decoder keeps at most maxNames member names, whatever it reads.
func TestJSONDecoderKeepsFewNames(t *testing.T) {
	var d jsonDecoder
	for round := range 3 {
		var doc bytes.Buffer
		doc.WriteString("{")
		for i := range maxNames {
			fmt.Fprintf(&doc, "%q: %d,", fmt.Sprintf("r%d-%d", round, i), i)
		}
		doc.WriteString(`"last": 0}`)
		got, err := d.decode(doc.Bytes())
		if err != nil {
			t.Fatal(err)
		}
		if n := len(got.(map[string]any)); n != maxNames+1 {
			t.Fatalf("%d members, want %d", n, maxNames+1)
		}
	}
	if len(d.names) != maxNames {
		t.Errorf("the decoder keeps %d names, want %d", len(d.names), maxNames)
	}
}

// appendJSON must write what encoding/json writes without HTML escaping, but
// for U+2028 and U+2029, which it leaves as they are.
func TestAppendJSONMatchesEncodingJSON(t *testing.T) {
	values := []any{
		nil, true, false, 0.0, math.Copysign(0, -1), 1.0, -7.0, 1.5, 1e20, 1e21, 1e-6, 1e-7, 123456789.125, 1.7976931348623157e308, 5e-324,
		"", "plain", "<tag> & \"quotes\" \\ \n\t\x01", "é中😀",
		[]any{}, []any{1.0, "two", nil, []any{3.0}},
		map[string]any{}, map[string]any{"b": 1.0, "a": map[string]any{"z": []any{}, "y": "<"}, "": nil},
	}
	for _, v := range values {
		var want bytes.Buffer
		enc := json.NewEncoder(&want)
		enc.SetEscapeHTML(false)
		if err := enc.Encode(v); err != nil {
			t.Fatal(err)
		}
		got, err := appendJSON(nil, v)
		if err != nil {
			t.Errorf("appendJSON(%#v): %v", v, err)
			continue
		}
		if w := bytes.TrimSuffix(want.Bytes(), []byte("\n")); !bytes.Equal(got, w) {
			t.Errorf("appendJSON(%#v) = %s, want %s", v, got, w)
		}
	}
	if got, _ := appendJSON(nil, "a\u2028b"); string(got) != "\"a\u2028b\"" {
		t.Errorf("appendJSON of U+2028 = %q", got)
	}
	for _, v := range []any{math.Inf(1), math.NaN(), map[string]any{"f": func() {}}} {
		if _, err := appendJSON(nil, v); err == nil {
			t.Errorf("appendJSON(%#v) succeeded, want an error", v)
		}
	}
}
