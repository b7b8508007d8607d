package hookapi

import (
	"reflect"
	"testing"

	kjson "sigs.k8s.io/json"
)

// sameAsDecoder fails unless ParseJSON fills a CompositeResponse as the engine's
// decoder for hooks that are not strict does, or declines and leaves it alone. It
// reports whether ParseJSON read data.
func sameAsDecoder(t *testing.T, data string) (read bool) {
	t.Helper()
	var got, want CompositeResponse
	read = got.ParseJSON([]byte(data))
	err := kjson.UnmarshalCaseSensitivePreserveInts([]byte(data), &want)
	switch {
	case !read && !reflect.DeepEqual(got, CompositeResponse{}):
		t.Errorf("ParseJSON(%s) declined and left %#v", data, got)
	case read && err != nil:
		t.Errorf("ParseJSON(%s) = %#v, the decoder fails: %v", data, got, err)
	case read && !reflect.DeepEqual(got, want):
		t.Errorf("ParseJSON(%s)\n got %#v\nwant %#v", data, got, want)
	}
	return read
}

const benchAnswer = `{"children":[{"apiVersion":"v1","data":{"index":"0"},"kind":"ConfigMap","metadata":{"name":"p00001-0"}},{"apiVersion":"v1","data":{"index":"1"},"kind":"ConfigMap","metadata":{"name":"p00001-1"}},{"apiVersion":"v1","data":{"index":"2"},"kind":"ConfigMap","metadata":{"name":"p00001-2"}}],"status":{"children":3}}` + "\n"

func TestCompositeResponseParseJSON(t *testing.T) {
	for _, data := range []string{
		benchAnswer,
		`{}`, `{"status":null,"children":null,"resyncAfterSeconds":null,"finalized":null,"events":null}`,
		`{"children":[],"status":{},"finalized":true,"resyncAfterSeconds":1.5}`,
		`{"children":[null,{"a":[1,2.5,"x"]}],"resyncAfterSeconds":30,"other":{"x":[1]},"Status":{"ignored":true}}`,
		`{"resyncAfterSeconds":9007199254740993}`, `{"resyncAfterSeconds":123456789012345678901}`, `{"resyncAfterSeconds":1e2}`,
	} {
		if !sameAsDecoder(t, data) {
			t.Errorf("ParseJSON declined %s", data)
		}
	}
	for _, data := range []string{
		`{"status":{"a":1},"status":{"b":2}}`, // the decoder merges the two
		`{"children":[{}],"children":[]}`,
		`{"status":[]}`, `{"children":{}}`, `{"children":[1]}`, `{"resyncAfterSeconds":"1"}`, `{"finalized":1}`,
		`{"resyncAfterSeconds":-0}`, `{"resyncAfterSeconds":0}`, `{"resyncAfterSeconds":1e400}`,
		`{"events":[{"type":"Normal","reason":"R","message":"m"}]}`,
		`{"status":{}`, `[]`, `null`, ``, `{"status":{}} x`,
	} {
		if sameAsDecoder(t, data) {
			t.Errorf("ParseJSON read %s", data)
		}
	}
	r := CompositeResponse{Finalized: true}
	if r.ParseJSON([]byte(`{"status":{}}`)) || r.Status != nil {
		t.Errorf("ParseJSON read into a response that was not zero: %#v", r)
	}
}

func FuzzCompositeResponseParseJSON(f *testing.F) {
	for _, s := range []string{benchAnswer, `{"children":[null],"resyncAfterSeconds":2,"finalized":false}`, `{"status":{"a":-0}}`} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, data string) { sameAsDecoder(t, data) })
}

func BenchmarkDecodeCompositeResponse(b *testing.B) {
	data := []byte(benchAnswer)
	b.Run("ParseJSON", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			var r CompositeResponse
			if !r.ParseJSON(data) {
				b.Fatal("declined")
			}
		}
	})
	b.Run("decoder", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			var r CompositeResponse
			if err := kjson.UnmarshalCaseSensitivePreserveInts(data, &r); err != nil {
				b.Fatal(err)
			}
		}
	})
}
