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
	// Small seeds: the fuzzer minimises every new input, which is slow on big ones.
	observed := `{"metadata": {"name": "a", "uid": "u", "finalizers": ["a", "x"]}, "spec": {"ports": [{"port": 53, "protocol": "UDP"}, {"port": 53, "protocol": "TCP"}], "cpu": "500m",
	  "tolerations": [{"key": "a", "effect": "E", "value": "v"}], "volumes": [{"name": "v"}, {"name": "w"}]}}`
	for _, seed := range []string{
		`{}`,
		`{"a": null, "b": "", "c": false, "d": 0, "e": {}, "f": []}`,
		`{"metadata": {"name": "a", "labels": {"x": ""}, "annotations": {"` + LastAppliedAnnotation + `": "{}"}}}`,
		`{"spec": {"ports": [{"port": 53, "protocol": "UDP"}, {"port": 53}], "cpu": "0.5", "n": 1e300}}`,
		`{"spec": {"containers": [{"name": "a", "image": "i", "ports": [{"containerPort": 80}]}], "targetPort": 8080}}`,
		`{"kind": "Secret", "apiVersion": "v1", "stringData": {"a": "b"}, "data": {"c": "ZA=="}}`,
		`{"status": {"x": 1}, "spec": {"replicas": 3, "memory": "1Gi", "args": ["a", "b"]}}`,
		`{"metadata": {"finalizers": ["b", "a"]}, "spec": {"tolerations": [{"key": "a"}, {"key": "a", "effect": "E"}], "volumes": []}}`,
		`{"spec": {"volumes": [{"name": "v", "emptyDir": {}}], "env": [{"name": "A"}, {"name": "A"}], "items": [{"name": 80}, {"name": "80"}]}}`,
	} {
		f.Add([]byte(seed), []byte(observed))
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
