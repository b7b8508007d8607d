package slim

import (
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	kjson "sigs.k8s.io/json"
)

// partialMetadata is an answer to a create asked for as=PartialObjectMetadata, as the
// API server writes it.
const partialMetadata = `{"kind":"PartialObjectMetadata","apiVersion":"meta.k8s.io/v1","metadata":{"name":"p-1","namespace":"bench","uid":"5f0c8a8e-8a2b-4a51-a7e8-3b1c1a9d2e11","resourceVersion":"12345","creationTimestamp":"2026-11-26T12:00:00Z","labels":{"controller-uid":"0b6a0f5e-1d1c-4b7e-9d1a-6f5e4c3b2a10"},"annotations":{"metalambda.dev/desired-hash":"3c5f9a1b2d4e6f708192a3b4"},"ownerReferences":[{"apiVersion":"bench.metalambda.dev/v1","kind":"Parent","name":"p","uid":"0b6a0f5e-1d1c-4b7e-9d1a-6f5e4c3b2a10","controller":true,"blockOwnerDeletion":true}],"managedFields":[{"manager":"metalambda","operation":"Update","apiVersion":"v1","time":"2026-11-26T12:00:00Z","fieldsType":"FieldsV1","fieldsV1":{"f:data":{".":{},"f:index":{},"f:parent":{}},"f:metadata":{"f:annotations":{".":{},"f:metalambda.dev/desired-hash":{}},"f:labels":{".":{},"f:controller-uid":{}},"f:ownerReferences":{".":{},"k:{\"uid\":\"0b6a0f5e-1d1c-4b7e-9d1a-6f5e4c3b2a10\"}":{}}}}}]}}`

// identityByDecoding is the Identity of data as metaWriter read it before: through
// a metav1.PartialObjectMetadata.
func identityByDecoding(data []byte) (Identity, error) {
	var m metav1.PartialObjectMetadata
	if err := kjson.UnmarshalCaseSensitivePreserveInts(data, &m); err != nil {
		return Identity{}, err
	}
	return Identity{Name: m.Name, Namespace: m.Namespace, UID: string(m.UID), ResourceVersion: m.ResourceVersion, Generation: m.Generation}, nil
}

// identityFields is a PartialObjectMetadata's fields that an Identity holds, under
// their JSON names and types.
type identityFields struct {
	Metadata struct {
		Name            string    `json:"name"`
		Namespace       string    `json:"namespace"`
		UID             types.UID `json:"uid"`
		ResourceVersion string    `json:"resourceVersion"`
		Generation      int64     `json:"generation"`
	} `json:"metadata"`
}

// checkIdentity holds ReadIdentity to decoding: where it reads, it reads what decoding
// those fields alone gives, and what decoding a whole PartialObjectMetadata gives
// where that decodes; where it declines, decoding is left to say what it makes of
// data.
func checkIdentity(t *testing.T, data string) (read bool) {
	t.Helper()
	got, ok := ReadIdentity([]byte(data))
	if !ok {
		return false
	}
	var fields identityFields
	if err := kjson.UnmarshalCaseSensitivePreserveInts([]byte(data), &fields); err != nil {
		t.Fatalf("ReadIdentity(%s) = %+v, but decoding fails: %v", data, got, err)
	}
	m := fields.Metadata
	if want := (Identity{Name: m.Name, Namespace: m.Namespace, UID: string(m.UID), ResourceVersion: m.ResourceVersion, Generation: m.Generation}); got != want {
		t.Fatalf("ReadIdentity(%s) = %+v, decoding gives %+v", data, got, want)
	}
	if whole, err := identityByDecoding([]byte(data)); err == nil && whole != got {
		t.Fatalf("ReadIdentity(%s) = %+v, decoding a PartialObjectMetadata gives %+v", data, got, whole)
	}
	return true
}

func TestReadIdentity(t *testing.T) {
	for _, tc := range []struct {
		data string
		read bool // false: left to decoding
	}{
		{partialMetadata, true},
		{configMap, true},
		{`{"kind":"Parent","metadata":{"name":"p","generation":3,"resourceVersion":"9"},"spec":{"metadata":{"name":"not this"}},"status":{"x":[1,2]}}`, true},
		{`{"metadata":{"name":"a"},"metadata":{"uid":"u","name":"b"}}`, true}, // merged, the later wins
		{`{"metadata":{"name":"a","name":null,"generation":null}}`, true},
		{`{"metadata":null}`, true},
		{`{}`, true},
		{` { "metadata" : { "name" : "a" , "generation" : -2 } } `, true},
		{`{"metadata":{"name":"a","managedFields":"not read"}}`, true},
		{`{"metadata":{"generation":1.5}}`, false},
		{`{"metadata":{"generation":1e3}}`, false},
		{`{"metadata":{"generation":"3"}}`, false},
		{`{"metadata":{"generation":99999999999999999999}}`, false},
		{`{"metadata":{"name":3}}`, false},
		{`{"metadata":{"name":"a\"b"}}`, false},
		{`{"metadata":{"name":"a\u00e9"}}`, false},
		{`{"metadata":[]}`, false},
		{`{"metadata":"x"}`, false},
		{`{"metadata":{"name":"a"},"spec":[1,,2]}`, false},
		{`{"metadata":{"name":"a"}`, false},
		{`[]`, false},
		{`null`, false},
		{``, false},
	} {
		if got := checkIdentity(t, tc.data); got != tc.read {
			t.Errorf("ReadIdentity(%s) read: %v, want %v", tc.data, got, tc.read)
		}
	}
}

func FuzzReadIdentity(f *testing.F) {
	f.Add(partialMetadata)
	f.Add(configMap)
	f.Add(`{"metadata":{"name":"a"},"metadata":{"generation":2}}`)
	f.Add(`{"metadata":{"name":"a\u00e9","generation":null}}`)
	f.Fuzz(func(t *testing.T, data string) { checkIdentity(t, data) })
}

// BenchmarkReadIdentity reads the identity of a create's answer, as metaWriter did
// (decoding it into a metav1.PartialObjectMetadata) and as it does now.
func BenchmarkReadIdentity(b *testing.B) {
	data := []byte(partialMetadata)
	b.Run("decode", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			if _, err := identityByDecoding(data); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("read", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			if _, ok := ReadIdentity(data); !ok {
				b.Fatal("not read")
			}
		}
	})
}
