package apply

import (
	"bytes"
	"encoding/json"
	"testing"

	utiljson "k8s.io/apimachinery/pkg/util/json"
)

// decodings decodes text the three ways objects reach the engine: float64
// numbers, json.Number, and unstructured's int64/float64.
func decodings(text []byte) []map[string]any {
	var out []map[string]any
	var plain, numbers, unstructured map[string]any
	if json.Unmarshal(text, &plain) == nil {
		out = append(out, plain)
	}
	dec := json.NewDecoder(bytes.NewReader(text))
	dec.UseNumber()
	if dec.Decode(&numbers) == nil {
		out = append(out, numbers)
	}
	if utiljson.Unmarshal(text, &unstructured) == nil {
		out = append(out, unstructured)
	}
	return out
}

func FuzzInSync(f *testing.F) {
	for _, seed := range []string{
		serviceFromHook, serviceFromServer, podFromHook, podFromServer, deploymentFromHook, deploymentFromServer,
		`{}`, `{"a": null}`, `{"spec": {"cpu": "0.5", "n": 1e400}}`, `{"kind": "Secret", "apiVersion": "v1", "stringData": {"a": "b"}}`,
		`{"spec": {"ports": [{"port": 53, "protocol": "UDP"}, {"port": 53}]}}`,
	} {
		f.Add([]byte(seed), []byte(serviceFromServer))
	}
	f.Fuzz(func(t *testing.T, a, b []byte) {
		xs, ys := decodings(a), decodings(b)
		for _, x := range xs {
			if !InSync(x, x) {
				t.Fatalf("InSync(x, x) = false for %s: %v", a, Diff(x, x))
			}
			if !InSync(x, DeepCopy(x)) {
				t.Fatalf("InSync(x, DeepCopy(x)) = false for %s", a)
			}
			for _, y := range ys {
				exercise(t, x, y)
			}
		}
	})
}

// exercise checks that nothing panics on arbitrary pairs and that InSync agrees
// with Diff.
func exercise(t *testing.T, x, y map[string]any) {
	if InSync(x, y) != (len(Diff(x, y)) == 0) {
		t.Fatalf("InSync(x, y) = %v but Diff(x, y) = %v\nx = %v\ny = %v", InSync(x, y), Diff(x, y), x, y)
	}
	Removed(y, x, y)
	RemovedManaged(x, y, "m")
	if _, err := ThreeWayMerge(y, y, x); err != nil {
		return
	}
	if len(Removed(x, x, y)) != 0 {
		t.Fatalf("Removed(x, x, y) = %v, want none", Removed(x, x, y))
	}
}
