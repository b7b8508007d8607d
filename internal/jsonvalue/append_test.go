package jsonvalue

import (
	"bytes"
	"encoding/json"
	"math"
	"math/rand/v2"
	"strconv"
	"testing"
)

// sameAsMarshal fails unless Append writes v exactly as json.Marshal does, or fails
// where it fails.
func sameAsMarshal(t *testing.T, v any) {
	t.Helper()
	want, wantErr := json.Marshal(v)
	got, err := Append([]byte("prefix"), v)
	if (err != nil) != (wantErr != nil) {
		t.Fatalf("Append(%#v) error %v, json.Marshal error %v", v, err, wantErr)
	}
	if err == nil && !bytes.Equal(got, append([]byte("prefix"), want...)) {
		t.Errorf("Append(%#v)\n got %s\nwant prefix%s", v, got, want)
	}
}

func TestAppendIsMarshal(t *testing.T) {
	for _, v := range []any{
		nil, true, false, "", "plain", `q"uote\back`, "<a&b>", "tab\tnl\ncr\r\b\f\x01\x1f", "é ünïcode ✓", "\u2028\u2029", "bad \xff utf8",
		int64(0), int64(-42), int64(math.MaxInt64), int64(math.MinInt64), 7, int32(-7), uint8(200), uint64(math.MaxUint64),
		1.5, 3.0, math.Copysign(0, -1), 1e21, 1e-7, 123456789.125, float32(0.1), math.NaN(), math.Inf(1),
		json.Number("12.50"), map[string]any(nil), []any(nil), map[string]any{}, []any{},
		map[string]any{"b": int64(1), "a": []any{"x", nil, map[string]any{"z": true, "<": "&"}}, "": "empty key", "é": 2.25},
		map[string]string{"k2": "v", "k1": "<v>"}, map[string]string(nil),
		[]string{"typed", "slice"}, map[string]int{"other": 1}, struct {
			A string `json:"a"`
		}{"struct"},
		map[string]any{"nested": map[string]any{"bad": math.NaN()}},
	} {
		sameAsMarshal(t, v)
	}
}

// TestAppendRandomObjects compares Append with json.Marshal on random trees of the
// shapes an unstructured object holds.
func TestAppendRandomObjects(t *testing.T) {
	r := rand.New(rand.NewPCG(1, 2))
	for range 2000 {
		sameAsMarshal(t, randomValue(r, 4))
	}
}

func randomValue(r *rand.Rand, depth int) any {
	kind := r.IntN(9)
	if depth == 0 {
		kind %= 6
	}
	switch kind {
	case 0:
		return nil
	case 1:
		return r.IntN(2) == 0
	case 2:
		return r.Int64() - r.Int64()
	case 3:
		return r.NormFloat64() * math.Pow(10, float64(r.IntN(40)-20))
	case 4, 5:
		return randomString(r)
	case 6, 7:
		m := map[string]any{}
		for range r.IntN(20) {
			m[randomString(r)] = randomValue(r, depth-1)
		}
		return m
	default:
		s := make([]any, r.IntN(5))
		for i := range s {
			s[i] = randomValue(r, depth-1)
		}
		return s
	}
}

func randomString(r *rand.Rand) string {
	alphabet := []string{"a", "Z", "0", "-", ".", "/", " ", `"`, `\`, "<", ">", "&", "\n", "\x00", "é", "✓", "\u2028", "\xff"}
	var b []byte
	for range r.IntN(12) {
		if r.IntN(4) == 0 {
			b = append(b, alphabet[r.IntN(len(alphabet))]...)
		} else {
			b = append(b, byte('a'+r.IntN(26)))
		}
	}
	return string(b)
}

func FuzzAppendString(f *testing.F) {
	for _, s := range []string{"", "x", "<&>", "\u2028", "\xff", `"\`} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		want, _ := json.Marshal(s)
		if got := AppendString(nil, s); !bytes.Equal(got, want) {
			t.Errorf("AppendString(%q) = %s, want %s", s, got, want)
		}
	})
}

func BenchmarkAppendObject(b *testing.B) {
	obj := benchObject()
	b.Run("Append", func(b *testing.B) {
		b.ReportAllocs()
		var buf []byte
		for b.Loop() {
			buf, _ = Append(buf[:0], obj)
		}
	})
	b.Run("json.Marshal", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			_, _ = json.Marshal(obj)
		}
	})
}

// benchObject is a ConfigMap as a hook request shows it.
func benchObject() map[string]any {
	data := map[string]any{}
	for i := range 5 {
		data["key"+strconv.Itoa(i)] = "value " + strconv.Itoa(i)
	}
	return map[string]any{
		"apiVersion": "v1", "kind": "ConfigMap",
		"metadata": map[string]any{
			"name": "p00001-0", "namespace": "bench", "uid": "9d3c4f8e-7a8b-4c1d-9e2f-0a1b2c3d4e5f",
			"resourceVersion": "123456", "creationTimestamp": "2026-01-01T00:00:00Z",
			"labels":      map[string]any{"controller-uid": "0f1e2d3c-4b5a-6978-8796-a5b4c3d2e1f0"},
			"annotations": map[string]any{"metalambda.dev/desired-hash": "0123456789abcdef01234567"},
			"ownerReferences": []any{map[string]any{
				"apiVersion": "bench.metalambda.dev/v1", "kind": "BenchParent", "name": "p00001",
				"uid": "0f1e2d3c-4b5a-6978-8796-a5b4c3d2e1f0", "controller": true, "blockOwnerDeletion": true,
			}},
		},
		"data": data,
	}
}

func TestMarshalAndEncoded(t *testing.T) {
	obj := benchObject()
	want, _ := json.Marshal(obj)
	first, err := Marshal(obj)
	if err != nil || !bytes.Equal(first, want) {
		t.Fatalf("Marshal = %s, %v; want %s", first, err, want)
	}
	if err := Encoded(map[string]any{"other": "value"}, func([]byte) {}); err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(first, want) {
		t.Errorf("Marshal's result changed when the buffer was reused: %s", first)
	}
	called := false
	if err := Encoded(math.NaN(), func([]byte) { called = true }); err == nil || called {
		t.Errorf("Encoded(NaN) = %v, called %v; want an error and no call", err, called)
	}
}
