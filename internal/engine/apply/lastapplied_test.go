package apply

import (
	"encoding/json"
	"errors"
	"testing"

	"github.com/google/go-cmp/cmp"
)

// normalised round-trips obj through JSON as unstructured decodes it, so that
// objects built from different number types compare equal.
func normalised(t testing.TB, obj map[string]any) map[string]any {
	t.Helper()
	if obj == nil {
		return nil
	}
	b, err := json.Marshal(obj)
	if err != nil {
		t.Fatalf("encode: %v", err)
	}
	return fromServer(t, string(b))
}

func TestForApply(t *testing.T) {
	tests := []struct {
		name, in, want string
	}{{
		name: "server fields, status and last-applied removed",
		in: `{"apiVersion": "v1", "kind": "ConfigMap",
			"metadata": {"name": "c", "namespace": "n", "uid": "u", "resourceVersion": "1", "generation": 1,
				"creationTimestamp": null, "deletionTimestamp": "2025-01-01T00:00:00Z",
				"deletionGracePeriodSeconds": 30, "selfLink": "/x", "managedFields": [{"manager": "m"}],
				"labels": {"a": "b"}, "annotations": {"keep": "1", "` + LastAppliedAnnotation + `": "{}"},
				"ownerReferences": [{"uid": "p", "controller": true}]},
			"data": {"k": "v"}, "status": {"x": 1}}`,
		want: `{"apiVersion": "v1", "kind": "ConfigMap",
			"metadata": {"name": "c", "namespace": "n", "labels": {"a": "b"}, "annotations": {"keep": "1"},
				"ownerReferences": [{"uid": "p", "controller": true}]},
			"data": {"k": "v"}}`,
	}, {
		name: "annotations dropped when last-applied was the only one",
		in:   `{"metadata": {"name": "c", "annotations": {"` + LastAppliedAnnotation + `": "{}"}}}`,
		want: `{"metadata": {"name": "c"}}`,
	}, {
		name: "an empty annotations map of the hook's is kept",
		in:   `{"metadata": {"name": "c", "annotations": {}}}`,
		want: `{"metadata": {"name": "c", "annotations": {}}}`,
	}, {
		name: "no metadata",
		in:   `{"kind": "X", "status": {}}`,
		want: `{"kind": "X"}`,
	}, {
		name: "nothing to strip",
		in:   `{"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "c", "labels": {"a": "b"}, "annotations": {"keep": "1"}}, "data": {"k": "v"}}`,
		want: `{"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "c", "labels": {"a": "b"}, "annotations": {"keep": "1"}}, "data": {"k": "v"}}`,
	}, {
		name: "only a generation to strip",
		in:   `{"metadata": {"name": "c", "generation": 2}}`,
		want: `{"metadata": {"name": "c"}}`,
	}, {
		name: "metadata of another type, and no status",
		in:   `{"kind": "X", "metadata": "m"}`,
		want: `{"kind": "X", "metadata": "m"}`,
	}}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			in := fromServer(t, tc.in)
			before := DeepCopy(in)
			got := ForApply(in)
			if diff := cmp.Diff(fromServer(t, tc.want), got); diff != "" {
				t.Errorf("ForApply() mismatch (-want +got):\n%s", diff)
			}
			if diff := cmp.Diff(before, in); diff != "" {
				t.Errorf("ForApply() modified its argument (-before +after):\n%s", diff)
			}
		})
	}
	if got := ForApply(nil); got != nil {
		t.Errorf("ForApply(nil) = %v, want nil", got)
	}
}

func TestLastAppliedRoundTrip(t *testing.T) {
	tests := []struct {
		name     string
		obj      map[string]any
		unstable bool // the second annotation differs from the first
	}{
		{name: "service", obj: fromServer(t, serviceFromServer)},
		{name: "pod from the hook", obj: fromHook(t, podFromHook)},
		{name: "no metadata", obj: map[string]any{"kind": "X", "spec": map[string]any{"ratio": 0.5, "n": int64(3)}}},
		{name: "null metadata", obj: map[string]any{"kind": "X", "metadata": nil}, unstable: true},
		{name: "stale annotation", obj: fromServer(t, `{"metadata": {"name": "a", "annotations": {"`+LastAppliedAnnotation+`": "{\"old\":1}"}}}`)},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			want := normalised(t, ForApply(tc.obj))
			if err := SetLastApplied(tc.obj); err != nil {
				t.Fatalf("SetLastApplied() error: %v", err)
			}
			got, err := LastApplied(tc.obj)
			if err != nil {
				t.Fatalf("LastApplied() error: %v", err)
			}
			if diff := cmp.Diff(want, got); diff != "" {
				t.Errorf("round trip mismatch (-want +got):\n%s", diff)
			}
			if tc.unstable {
				return
			}
			again := DeepCopy(tc.obj)
			if err := SetLastApplied(again); err != nil {
				t.Fatalf("SetLastApplied() again error: %v", err)
			}
			if diff := cmp.Diff(tc.obj, again); diff != "" {
				t.Errorf("SetLastApplied() is not stable (-first +second):\n%s", diff)
			}
		})
	}
}

func TestLastApplied(t *testing.T) {
	tests := []struct {
		name    string
		obj     map[string]any
		want    map[string]any
		wantErr bool
	}{
		{name: "nil object", obj: nil},
		{name: "no metadata", obj: map[string]any{"kind": "X"}},
		{name: "no annotation", obj: fromServer(t, `{"metadata": {"annotations": {"a": "b"}}}`)},
		{name: "empty annotation", obj: fromServer(t, `{"metadata": {"annotations": {"`+LastAppliedAnnotation+`": ""}}}`)},
		{
			name: "numbers decode as unstructured does",
			obj:  fromServer(t, `{"metadata": {"annotations": {"`+LastAppliedAnnotation+`": "{\"a\":3,\"b\":0.5}"}}}`),
			want: map[string]any{"a": int64(3), "b": 0.5},
		},
		{name: "not JSON", obj: fromServer(t, `{"metadata": {"annotations": {"`+LastAppliedAnnotation+`": "{nope"}}}`), wantErr: true},
		{name: "JSON but not an object", obj: fromServer(t, `{"metadata": {"annotations": {"`+LastAppliedAnnotation+`": "[1]"}}}`), wantErr: true},
		{name: "not a string", obj: fromServer(t, `{"metadata": {"annotations": {"`+LastAppliedAnnotation+`": 3}}}`), wantErr: true},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			got, err := LastApplied(tc.obj)
			if tc.wantErr != (err != nil) || (err != nil && !errors.Is(err, ErrMalformed)) {
				t.Fatalf("LastApplied() error = %v, want an ErrMalformed error: %v", err, tc.wantErr)
			}
			if diff := cmp.Diff(tc.want, got); diff != "" {
				t.Errorf("LastApplied() mismatch (-want +got):\n%s", diff)
			}
		})
	}
}

func TestSetLastAppliedErrors(t *testing.T) {
	tests := []struct {
		name string
		obj  map[string]any
	}{
		{"nil object", nil},
		{"metadata not an object", map[string]any{"metadata": "x"}},
		{"annotations not an object", map[string]any{"metadata": map[string]any{"annotations": []any{}}}},
		{"not JSON", map[string]any{"spec": map[string]any{"c": make(chan int)}}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			if err := SetLastApplied(tc.obj); !errors.Is(err, ErrMalformed) {
				t.Errorf("SetLastApplied() error = %v, want ErrMalformed", err)
			}
		})
	}
}

func TestDeepCopy(t *testing.T) {
	in := map[string]any{
		"n":    json.Number("12"),
		"i":    int64(1),
		"list": []any{map[string]any{"a": "b"}, []any{"x"}},
		"map":  map[string]any{"nested": map[string]any{"k": "v"}},
		"odd":  []string{"shared"},
		"nils": []any(nil),
	}
	got := DeepCopy(in)
	if diff := cmp.Diff(in, got); diff != "" {
		t.Fatalf("DeepCopy() mismatch (-want +got):\n%s", diff)
	}
	got["list"].([]any)[0].(map[string]any)["a"] = "changed"
	got["list"].([]any)[1].([]any)[0] = "changed"
	got["map"].(map[string]any)["nested"].(map[string]any)["k"] = "changed"
	if in["list"].([]any)[0].(map[string]any)["a"] != "b" || in["list"].([]any)[1].([]any)[0] != "x" ||
		in["map"].(map[string]any)["nested"].(map[string]any)["k"] != "v" {
		t.Errorf("changing the copy changed the original: %v", in)
	}
	if DeepCopy(nil) != nil {
		t.Errorf("DeepCopy(nil) is not nil")
	}
}
