package jsonvalue

import (
	"encoding/json"
	"math/rand/v2"
	"reflect"
	"strings"
	"testing"

	utiljson "k8s.io/apimachinery/pkg/util/json"
)

// sameAsUnmarshal fails unless ParseObject gives what apimachinery's json.Unmarshal
// into a map gives, or declines. It reports whether ParseObject read data itself.
func sameAsUnmarshal(t *testing.T, data string) (read bool) {
	t.Helper()
	got, ok := ParseObject([]byte(data))
	want := map[string]any{}
	wantErr := utiljson.Unmarshal([]byte(data), &want)
	if !ok {
		return false
	}
	if wantErr != nil {
		t.Fatalf("ParseObject(%q) = %#v, Unmarshal fails: %v", data, got, wantErr)
	}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("ParseObject(%q)\n got %#v\nwant %#v", data, got, want)
	}
	return true
}

// benchConfigMap is a ConfigMap as a watch event carries it, without managedFields.
const benchConfigMap = `{"kind":"ConfigMap","apiVersion":"v1","metadata":{"name":"p-1","namespace":"bench","uid":"5f0c8a8e-8a2b-4a51-a7e8-3b1c1a9d2e11","resourceVersion":"12345","creationTimestamp":"2026-11-26T12:00:00Z","labels":{"controller-uid":"0b6a0f5e-1d1c-4b7e-9d1a-6f5e4c3b2a10"},"annotations":{"metalambda.dev/desired-hash":"3c5f9a1b2d4e6f708192a3b4"},"ownerReferences":[{"apiVersion":"bench.metalambda.dev/v1","kind":"Parent","name":"p","uid":"0b6a0f5e-1d1c-4b7e-9d1a-6f5e4c3b2a10","controller":true,"blockOwnerDeletion":true}]},"data":{"index":"1","parent":"p"}}`

func TestParseObject(t *testing.T) {
	read := []string{
		benchConfigMap,
		`{}`, ` { } `, "\t{\"a\" :\n[ ] ,\r\"b\":{}}\n", `{"a":[1,-2,0,-0,3.5,-0.25,1e3,1E-2,2e+2,123456789012345678,9223372036854775807,-9223372036854775808]}`,
		`{"big":9223372036854775808,"small":-9223372036854775809,"huge":12345678901234567890123}`,
		`{"t":true,"f":false,"n":null,"s":"","e":"é ✓ \u2028"}`,
		`{"dup":1,"dup":"two","o":{"x":1},"o":{"y":2}}`,
		`{"esc":"a\"b\\c\/d\b\f\n\r\t\u0041\u00e9\ud83d\ude00","bad":"\ud800x","key\n":1}`,
		"{\"raw\":\"bad \xff utf8\"}",
		`{"deep":` + strings.Repeat(`[`, 500) + strings.Repeat(`]`, 500) + `}`,
	}
	for _, data := range read {
		if !sameAsUnmarshal(t, data) {
			t.Errorf("ParseObject declined %q", data)
		}
	}
	declined := []string{
		``, ` `, `null`, `[]`, `"s"`, `1`, `{`, `{"a"}`, `{"a":}`, `{"a":1,}`, `{"a":1 "b":2}`, `{a:1}`,
		`{"a":01}`, `{"a":1.}`, `{"a":.5}`, `{"a":-}`, `{"a":1e}`, `{"a":+1}`, `{"a":tru}`, `{"a":nul}`, `{"a":truex}`,
		`{"a":[1,]}`, `{"a":[1 2]}`, `{} {}`, `{}x`, "{\"a\":\"ctl\x01\"}", `{"a":"unterminated}`, `{"a":"\x"}`,
		`{"a":1e400}`, `{"deep":` + strings.Repeat(`[`, 2000) + strings.Repeat(`]`, 2000) + `}`,
		"\xef\xbb\xbf{}",
	}
	for _, data := range declined {
		if sameAsUnmarshal(t, data) {
			t.Errorf("ParseObject read %q", data)
		}
	}
}

// TestParseRandomObjects compares ParseObject with json.Unmarshal on the encodings
// of random trees of the shapes an unstructured object holds.
func TestParseRandomObjects(t *testing.T) {
	r := rand.New(rand.NewPCG(3, 4))
	for range 2000 {
		data, err := json.Marshal(map[string]any{"v": randomValue(r, 4)})
		if err != nil {
			continue
		}
		if !sameAsUnmarshal(t, string(data)) {
			t.Errorf("ParseObject declined %s", data)
		}
	}
}

func FuzzParseObject(f *testing.F) {
	for _, s := range []string{benchConfigMap, `{"a":[1,2.5,"x",null,true,{}]}`, `{"a":"\u00e9\n"}`, `{"n":-0.0e-0}`} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, data string) { sameAsUnmarshal(t, data) })
}

func BenchmarkParseObject(b *testing.B) {
	data := []byte(benchConfigMap)
	b.Run("ParseObject", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			if _, ok := ParseObject(data); !ok {
				b.Fatal("declined")
			}
		}
	})
	b.Run("json.Unmarshal", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			m := map[string]any{}
			if err := utiljson.Unmarshal(data, &m); err != nil {
				b.Fatal(err)
			}
		}
	})
}

func TestValid(t *testing.T) {
	for _, data := range []string{
		benchConfigMap, `{}`, `[]`, `""`, `0`, `-0.5e+7`, `true`, ` null `, `"\u00e9\n\"\\\/\b\f\r\t"`, "\"bad \xff utf8 \x7f\"",
		`{"a":[1,{"b":null}],"c":"d"}`, strings.Repeat(`[`, 999) + strings.Repeat(`]`, 999), strings.Repeat(`[`, 5000) + strings.Repeat(`]`, 5000),
		strings.Repeat(`[`, 10001) + strings.Repeat(`]`, 10001),
		``, ` `, `{`, `{"a"}`, `{"a":1,}`, `[1,]`, `01`, `1.`, `.5`, `-`, `1e`, `+1`, `tru`, `nul`, `"\x"`, `"\u12"`, `"\u12G4"`, "\"ctl\x01\"", `"`, `{} {}`, `{}x`, `{1:2}`,
	} {
		if got, want := Valid([]byte(data)), json.Valid([]byte(data)); got != want {
			t.Errorf("Valid(%.60q) = %v, json.Valid says %v", data, got, want)
		}
	}
}

func FuzzValid(f *testing.F) {
	for _, s := range []string{benchConfigMap, `[1,2.5,"x",null,true,{}]`, `"\u00e9\n"`, `-0.0e-0`} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, data string) {
		if got, want := Valid([]byte(data)), json.Valid([]byte(data)); got != want {
			t.Errorf("Valid(%q) = %v, json.Valid says %v", data, got, want)
		}
	})
}

func BenchmarkValid(b *testing.B) {
	data := []byte(benchConfigMap)
	b.Run("Valid", func(b *testing.B) {
		for b.Loop() {
			Valid(data)
		}
	})
	b.Run("json.Valid", func(b *testing.B) {
		for b.Loop() {
			json.Valid(data)
		}
	})
}
