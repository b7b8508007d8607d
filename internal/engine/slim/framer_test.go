package slim

import (
	"bytes"
	"errors"
	"io"
	"math/rand/v2"
	"reflect"
	"strings"
	"testing"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/serializer/streaming"
	"k8s.io/apimachinery/pkg/util/framer"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/rest"
	restwatch "k8s.io/client-go/rest/watch"
)

// chunked reads data a few bytes at a time, then gives err (io.EOF by default).
type chunked struct {
	data []byte
	r    *rand.Rand
	max  int
	err  error
}

func (c *chunked) Read(p []byte) (int, error) {
	if len(c.data) == 0 {
		if c.err != nil {
			return 0, c.err
		}
		return 0, io.EOF
	}
	n := min(1+c.r.IntN(c.max), len(p), len(c.data))
	n = copy(p, c.data[:n])
	c.data = c.data[n:]
	return n, nil
}

func (c *chunked) Close() error { return nil }

// frames reads every frame of r as the streaming decoder of a watch does: into a
// buffer that doubles while a frame does not fit. It returns the frames and the error
// that ended them.
func frames(r io.Reader, size int) ([]string, error) {
	var out []string
	for {
		buf, base := make([]byte, size), 0
		for {
			n, err := r.Read(buf[base:])
			if err == io.ErrShortBuffer {
				if n == 0 {
					return out, errors.New("short buffer with nothing read")
				}
				base += n
				buf = append(buf, make([]byte, len(buf))...)
				continue
			}
			if err != nil {
				return out, err
			}
			base += n
			break
		}
		out = append(out, string(buf[:base]))
	}
}

// TestFramesAsTheJSONFramer reads streams through the JSON framer and the object
// framer, with reads of a few bytes at a time and buffers too small for a frame, and
// wants the same frames and the same error at the end.
func TestFramesAsTheJSONFramer(t *testing.T) {
	event := `{"type":"ADDED","object":` + configMap + `}`
	streams := []string{
		event + "\n" + event + "\n",
		event,
		"",
		" \n\t ",
		`{"type":"MODIFIED","object":{"data":{"k":"}]\"{[","\\":"\\\\"}}}` + "\n",
		`{}{} {"a":[{},[]]}`,
		event + "\n" + event[:100], // ends inside a frame
		event + "\n   ",
		`{"a":"\u00e9 ✓"}` + "\n" + `[1,2]` + "\n" + event, // then not an object
		`1 2 "x" {"a":1}`,
		`{"a":1}x`,
		`{"unterminated":"` + "\n",
	}
	r := rand.New(rand.NewPCG(5, 6))
	for _, stream := range streams {
		for _, maxChunk := range []int{1, 3, 17, 4096} {
			for _, size := range []int{1, 7, 1024} {
				want, wantErr := frames(framer.NewJSONFramedReader(&chunked{data: []byte(stream), r: r, max: maxChunk}), size)
				got, gotErr := frames(objectFramer{}.NewFrameReader(&chunked{data: []byte(stream), r: r, max: maxChunk}), size)
				if !reflect.DeepEqual(got, want) || !sameEnd(gotErr, wantErr) {
					t.Errorf("stream %q, chunks of up to %d, buffer %d:\n got %q, %v\nwant %q, %v", stream, maxChunk, size, got, gotErr, want, wantErr)
				}
			}
		}
	}
}

// sameEnd: both streams ended, or failed, the same way.
func sameEnd(got, want error) bool {
	if got == nil || want == nil {
		return got == want
	}
	return got == want || got.Error() == want.Error()
}

// TestFramerGivesTheReadersError: an error of the stream other than its end comes
// after the frames read before it, as it is.
func TestFramerGivesTheReadersError(t *testing.T) {
	broken := errors.New("connection reset")
	for _, stream := range []string{`{"a":1} {"b":2}`, `{"a":1} {"b"`} {
		got, err := frames(objectFramer{}.NewFrameReader(&chunked{data: []byte(stream), r: rand.New(rand.NewPCG(1, 1)), max: 4, err: broken}), 64)
		if err != broken || len(got) == 0 || got[0] != `{"a":1}` {
			t.Errorf("stream %q: frames %q, error %v; want the frames, then %v", stream, got, err, broken)
		}
	}
}

// TestMalformedFrameFailsToDecode: a frame the JSON framer refuses is read by the
// watch's decoder, as client-go builds it from the informers' serializers, and fails
// there: the watch ends with an error either way.
func TestMalformedFrameFailsToDecode(t *testing.T) {
	ns := WithoutManagedFields(dynamic.ConfigFor(&rest.Config{}).NegotiatedSerializer)
	info, _ := runtime.SerializerInfoForMediaType(ns.SupportedMediaTypes(), runtime.ContentTypeJSON)
	watchDecoder := func(stream string) *restwatch.Decoder {
		frames := info.StreamSerializer.Framer.NewFrameReader(io.NopCloser(strings.NewReader(stream)))
		return restwatch.NewDecoder(streaming.NewDecoder(frames, info.StreamSerializer.Serializer), info.Serializer)
	}
	good := `{"type":"ADDED","object":{"apiVersion":"v1","kind":"ConfigMap","metadata":{"name":"a"}}}`
	if typ, obj, err := watchDecoder(good).Decode(); err != nil || typ != watch.Added || obj.(*unstructured.Unstructured).GetName() != "a" {
		t.Fatalf("decode %s: %v %v %v", good, typ, obj, err)
	}
	for _, frame := range []string{
		`{"type":"ADDED","object":{"apiVersion":"v1","kind":"ConfigMap","metadata":{"name":"a"},"data":{"k":tru}}}`,
		`{"type":"ADDED","object":{"apiVersion":"v1","kind":"ConfigMap","metadata":{"name":"a"]}}`,
		`{"type":"ADDED","object":{"apiVersion":"v1","kind":"ConfigMap","metadata":{"name":"a"}}` + "\x01}",
		"{\"type\":\"ADDED\x01\",\"object\":{\"apiVersion\":\"v1\",\"kind\":\"ConfigMap\",\"metadata\":{\"name\":\"a\"}}}",
		`{"type":"ADDED","object":{"apiVersion":"v1","kind":"ConfigMap","metadata":{"name":"a` + "\x01" + `"}}}`,
	} {
		if _, err := frames(framer.NewJSONFramedReader(io.NopCloser(strings.NewReader(frame))), 1024); err == io.EOF {
			t.Fatalf("the JSON framer reads %q", frame)
		}
		if typ, obj, err := watchDecoder(frame).Decode(); err == nil {
			t.Errorf("the malformed frame %q decoded: %v %v", frame, typ, obj)
		}
	}
}

func BenchmarkReadFrames(b *testing.B) {
	event := []byte(`{"type":"ADDED","object":` + configMap + "}\n")
	data := bytes.Repeat(event, 100)
	for _, tc := range []struct {
		name   string
		framer func(io.ReadCloser) io.ReadCloser
	}{
		{"json", framer.NewJSONFramedReader},
		{"objects", objectFramer{}.NewFrameReader},
	} {
		b.Run(tc.name, func(b *testing.B) {
			b.ReportAllocs()
			buf := make([]byte, 4096)
			for b.Loop() {
				r := tc.framer(io.NopCloser(bytes.NewReader(data)))
				for {
					if _, err := r.Read(buf); err != nil {
						if err != io.EOF {
							b.Fatal(err)
						}
						break
					}
				}
			}
		})
	}
}
