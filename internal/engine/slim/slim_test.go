package slim

import (
	"bytes"
	"encoding/json"
	"reflect"
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/rest"
)

// A ConfigMap as the API server writes one into a watch event, created by the engine.
const configMap = `{"kind":"ConfigMap","apiVersion":"v1","metadata":{"name":"p-1","namespace":"bench","uid":"5f0c8a8e-8a2b-4a51-a7e8-3b1c1a9d2e11","resourceVersion":"12345","creationTimestamp":"2026-11-26T12:00:00Z","labels":{"controller-uid":"0b6a0f5e-1d1c-4b7e-9d1a-6f5e4c3b2a10"},"annotations":{"metalambda.dev/desired-hash":"3c5f9a1b2d4e6f708192a3b4"},"ownerReferences":[{"apiVersion":"bench.metalambda.dev/v1","kind":"Parent","name":"p","uid":"0b6a0f5e-1d1c-4b7e-9d1a-6f5e4c3b2a10","controller":true,"blockOwnerDeletion":true}],"managedFields":[{"manager":"metalambda","operation":"Update","apiVersion":"v1","time":"2026-11-26T12:00:00Z","fieldsType":"FieldsV1","fieldsV1":{"f:data":{".":{},"f:index":{},"f:parent":{}},"f:metadata":{"f:annotations":{".":{},"f:metalambda.dev/desired-hash":{}},"f:labels":{".":{},"f:controller-uid":{}},"f:ownerReferences":{".":{},"k:{\"uid\":\"0b6a0f5e-1d1c-4b7e-9d1a-6f5e4c3b2a10\"}":{}}}}}]},"data":{"index":"1","parent":"p"}}`

func decode(t testing.TB, data []byte) any {
	t.Helper()
	var v any
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.UseNumber() // numbers as written: 1E700 is JSON, yet no float64
	if err := dec.Decode(&v); err != nil {
		t.Fatalf("%v: %s", err, data)
	}
	return v
}

// withoutManagedFields is what Strip should give, computed on decoded maps.
func withoutManagedFields(v any) any {
	obj, ok := v.(map[string]any)
	if !ok {
		return v
	}
	if md, ok := obj["metadata"].(map[string]any); ok {
		delete(md, "managedFields")
	}
	if items, ok := obj["items"].([]any); ok {
		for _, item := range items {
			if o, ok := item.(map[string]any); ok {
				if md, ok := o["metadata"].(map[string]any); ok {
					delete(md, "managedFields")
				}
			}
		}
	}
	return obj
}

func check(t *testing.T, data string) {
	t.Helper()
	got := Strip([]byte(data))
	if !json.Valid([]byte(data)) {
		return
	}
	if !json.Valid(got) {
		t.Fatalf("Strip(%s) = %s, not JSON", data, got)
	}
	if want := withoutManagedFields(decode(t, []byte(data))); !reflect.DeepEqual(decode(t, got), want) {
		t.Errorf("Strip(%s)\n = %s\nwant the same without metadata.managedFields", data, got)
	}
}

func TestStrip(t *testing.T) {
	for _, data := range []string{
		configMap,
		`{"metadata":{"managedFields":[{"manager":"m"}]}}`,
		`{"metadata":{"name":"a","managedFields":[]}}`,
		`{"metadata":{"managedFields":[], "name":"a"}}`,
		`{ "metadata" : { "name" : "a" , "managedFields" : [ {"x":"]}\""} ] , "uid" : "u" } , "spec" : {} }`,
		`{"metadata":{"name":"a"},"spec":{"managedFields":[1,2]}}`,            // not metadata's: kept
		`{"spec":{"metadata":{"managedFields":[1]}},"metadata":{"name":"a"}}`, // nested deeper: kept
		`{"data":{"k":"\"managedFields\":[1]"},"metadata":{"name":"a"}}`,      // in a string: kept
		`{"a":"{[\\\"","metadata":{"managedFields":[{"f":"\\\\"}],"name":"x"}}`,
		`{"kind":"List","items":[{"metadata":{"name":"a","managedFields":[{}]}},{"metadata":{"managedFields":[{}],"name":"b"}},{"metadata":{}},{}],"metadata":{"resourceVersion":"1"}}`,
		`{"items":[],"metadata":{"managedFields":[]}}`,
		`{"items":null,"metadata":{"managedFields":null}}`,
		`{"type":"ADDED","object":` + configMap + `}`, // a whole watch event is not cut into
		`{"metadata":{"managedFields":[1]}`,           // malformed: returned as it is
		`[{"metadata":{"managedFields":[1]}}]`,
		`"managedFields"`,
	} {
		check(t, data)
	}
	if got := Strip([]byte(configMap)); len(got) >= len(configMap) || json.Valid(got) && decode(t, got).(map[string]any)["data"] == nil {
		t.Errorf("the ConfigMap was not cut or lost its data: %s", got)
	}
	for _, malformed := range []string{`{"metadata":{"managedFields":[1]}`, `{"metadata":{"managedFields":[1]},`, `{"metadata" {"managedFields":[]}}`} {
		if got := string(Strip([]byte(malformed))); got != malformed {
			t.Errorf("malformed %s came back as %s", malformed, got)
		}
	}
}

// TestDecodeThroughSerializer decodes the ConfigMap with the dynamic client's
// serializer, wrapped, as the informers do.
func TestDecodeThroughSerializer(t *testing.T) {
	u := &unstructured.Unstructured{}
	if err := u.UnmarshalJSON(Strip([]byte(configMap))); err != nil {
		t.Fatal(err)
	}
	if u.GetManagedFields() != nil || u.GetName() != "p-1" || len(u.GetOwnerReferences()) != 1 {
		t.Errorf("decoded %v", u.Object)
	}
}

// TestDecodeAsTheDynamicClient decodes with no target, as a watch decodes each event's
// object, through the dynamic client's serializer and through its wrapped form: the
// wrapped one decodes an object in one pass, and must give what the serializer gives
// (of the data without managedFields), errors included.
func TestDecodeAsTheDynamicClient(t *testing.T) {
	plain := jsonSerializer(t, dynamic.ConfigFor(&rest.Config{}).NegotiatedSerializer)
	wrapped := jsonSerializer(t, WithoutManagedFields(dynamic.ConfigFor(&rest.Config{}).NegotiatedSerializer))
	for _, data := range []string{
		configMap,
		`{"apiVersion":"x.dev/v1","kind":"P","metadata":{"name":"p"},"spec":{"n":3,"f":1.5,"big":12345678901234}}`,
		`{"kind":"Status","apiVersion":"v1","status":"Failure","message":"too old resource version","reason":"Expired","code":410}`,
		`{"kind":"ConfigMapList","apiVersion":"v1","metadata":{},"items":[{"metadata":{"name":"a","managedFields":[{}]}}]}`,
		`{"kind":"NoVersion","metadata":{"name":"a"}}`,
		`{"apiVersion":"v1","metadata":{"name":"no kind"}}`,
		`{"apiVersion":"v1","kind":"ConfigMap","metadata":`,
		`[1,2]`, `null`,
	} {
		gotObj, gotGVK, gotErr := wrapped.Decode([]byte(data), nil, nil)
		wantObj, wantGVK, wantErr := plain.Decode(Strip([]byte(data)), nil, nil)
		if (gotErr != nil) != (wantErr != nil) || !reflect.DeepEqual(gotObj, wantObj) || !reflect.DeepEqual(gotGVK, wantGVK) {
			t.Errorf("decode %s\n got %#v, %v, %v\nwant %#v, %v, %v", data, gotObj, gotGVK, gotErr, wantObj, wantGVK, wantErr)
		}
	}
}

// TestDecodeWatchEventsAsTheDynamicClient decodes watch frames through the dynamic
// client's stream serializer and through its wrapped form, which must agree but for
// the managedFields the wrapped one leaves out of the object.
func TestDecodeWatchEventsAsTheDynamicClient(t *testing.T) {
	stream := func(ns runtime.NegotiatedSerializer) runtime.Serializer {
		info, _ := runtime.SerializerInfoForMediaType(ns.SupportedMediaTypes(), runtime.ContentTypeJSON)
		return info.StreamSerializer.Serializer
	}
	plain := stream(dynamic.ConfigFor(&rest.Config{}).NegotiatedSerializer)
	wrapped := stream(WithoutManagedFields(dynamic.ConfigFor(&rest.Config{}).NegotiatedSerializer))
	for _, frame := range []string{
		`{"type":"ADDED","object":` + configMap + `}`,
		`{"object":{"kind":"Status","apiVersion":"v1","code":410},"type":"ERROR"}`,
		` { "type" : "MODIFIED" , "object" : {"a":[1,"}"]} } `,
		`{"type":"DELETED","object":null}`,
		`{"type":"BOOKMARK"}`,
		`{"type":"ADD\u0045D","object":{}}`,
		`{"type":null,"object":{}}`,
		`{"type":"ADDED","object":{},"extra":1}`,
		`{}`,
	} {
		var got, want metav1.WatchEvent
		gotObj, gotGVK, gotErr := wrapped.Decode([]byte(frame), nil, &got)
		wantObj, wantGVK, wantErr := plain.Decode([]byte(frame), nil, &want)
		if want.Object.Raw != nil {
			want.Object.Raw = Strip(want.Object.Raw)
		}
		if (gotErr != nil) != (wantErr != nil) || !reflect.DeepEqual(got, want) || !reflect.DeepEqual(gotGVK, wantGVK) || (gotObj == &got) != (wantObj == &want) {
			t.Errorf("decode %s\n got %s %s, %v, %v\nwant %s %s, %v, %v", frame, got.Type, got.Object.Raw, gotGVK, gotErr, want.Type, want.Object.Raw, wantGVK, wantErr)
		}
	}
}

func jsonSerializer(t *testing.T, ns runtime.NegotiatedSerializer) runtime.Serializer {
	t.Helper()
	info, ok := runtime.SerializerInfoForMediaType(ns.SupportedMediaTypes(), runtime.ContentTypeJSON)
	if !ok {
		t.Fatal("no JSON serializer")
	}
	return info.Serializer
}

func FuzzStrip(f *testing.F) {
	f.Add(configMap)
	f.Add(`{"metadata":{"name":"a","managedFields":[]}}`)
	f.Add(`{"items":[{"metadata":{"managedFields":[{}],"name":"b"}}]}`)
	f.Fuzz(func(t *testing.T, data string) { check(t, data) })
}

func BenchmarkDecodeConfigMap(b *testing.B) {
	for _, tc := range []struct {
		name  string
		strip bool
	}{{"whole", false}, {"withoutManagedFields", true}} {
		b.Run(tc.name, func(b *testing.B) {
			b.ReportAllocs()
			data := []byte(configMap)
			for b.Loop() {
				in := data
				if tc.strip {
					in = Strip(data)
				}
				u := &unstructured.Unstructured{}
				if err := u.UnmarshalJSON(in); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}

// BenchmarkDecodeWatchEvent decodes one watch frame of a ConfigMap as an informer's
// watch does: through the dynamic client's serializers, the object without its
// managedFields (as Strip alone did), and through the wrapped serializers.
func BenchmarkDecodeWatchEvent(b *testing.B) {
	frame := []byte(`{"type":"ADDED","object":` + configMap + `}`)
	serializers := func(ns runtime.NegotiatedSerializer) (stream, object runtime.Serializer) {
		info, _ := runtime.SerializerInfoForMediaType(ns.SupportedMediaTypes(), runtime.ContentTypeJSON)
		return info.StreamSerializer.Serializer, info.Serializer
	}
	for _, tc := range []struct {
		name  string
		ns    runtime.NegotiatedSerializer
		strip bool
	}{
		{"serializer", dynamic.ConfigFor(&rest.Config{}).NegotiatedSerializer, true},
		{"slim", WithoutManagedFields(dynamic.ConfigFor(&rest.Config{}).NegotiatedSerializer), false},
	} {
		stream, object := serializers(tc.ns)
		b.Run(tc.name, func(b *testing.B) {
			b.ReportAllocs()
			for b.Loop() {
				var ev metav1.WatchEvent
				if _, _, err := stream.Decode(frame, nil, &ev); err != nil {
					b.Fatal(err)
				}
				raw := ev.Object.Raw
				if tc.strip {
					raw = Strip(raw)
				}
				if _, err := runtime.Decode(object, raw); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}

// TestWatchEventOwnsItsObject: the framer reuses its buffer for the next frame, so an
// event's object must not share it, whether managedFields were cut out of it or not.
func TestWatchEventOwnsItsObject(t *testing.T) {
	for _, object := range []string{configMap, `{"apiVersion":"v1","kind":"ConfigMap","metadata":{"name":"a"}}`} {
		frame := []byte(`{"type":"ADDED","object":` + object + `}`)
		var ev metav1.WatchEvent
		if !decodeWatchEvent(frame, &ev) {
			t.Fatalf("not decoded: %s", frame)
		}
		want := string(Strip([]byte(object)))
		for i := range frame {
			frame[i] = ' '
		}
		if string(ev.Object.Raw) != want {
			t.Errorf("object read %s after its frame was overwritten, want %s", ev.Object.Raw, want)
		}
	}
}
