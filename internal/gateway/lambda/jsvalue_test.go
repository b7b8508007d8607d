package lambda

import (
	"math"
	"reflect"
	"strings"
	"testing"

	"github.com/dop251/goja"
)

// fromJSON must build what JSON.parse builds: compared through JSON.stringify (key
// order included) and through the types JavaScript sees.
func TestFromJSONMatchesJSONParse(t *testing.T) {
	docs := []string{
		`{}`, `[]`, `null`, `true`, `false`, `0`, `-0`, `12`, `-7`, `1.5`, `1e3`, `1E-7`, `9007199254740993`,
		`123456789012345678901234567890`, `1e-400`,
		`""`, `"a\"b\\c\/d\b\f\n\r\t"`, `"\u00e9\u4e2d\ud83d\ude00"`, `"é中😀"`, `"\ud800"`,
		`{"b": 1, "a": 2, "c": {"z": [], "y": {}}}`,
		`{"a": 1, "a": 2}`,
		`{"__proto__": {"x": 1}, "y": 2}`,
		`[1, "two", null, [3, [4]], {"five": 5}]`,
		` { "spaced" : [ 1 , 2 ] } `,
		`{"controller":{},"parent":{"apiVersion":"example.com/v1","kind":"Thing","metadata":{"name":"bench","namespace":"default","labels":{"a":"b"}},"spec":{"replicas":3}},"children":{"ConfigMap.v1":{}}}`,
	}
	vm := &jsVM{rt: goja.New()}
	parse, _ := goja.AssertFunction(vm.rt.Get("JSON").ToObject(vm.rt).Get("parse"))
	stringify, _ := goja.AssertFunction(vm.rt.Get("JSON").ToObject(vm.rt).Get("stringify"))
	describeJS, err := vm.rt.RunString(`(function describe(v) {
		if (Array.isArray(v)) return "[" + v.map(describe).join(",") + "]";
		if (v !== null && typeof v === "object") {
			return "{" + Object.getOwnPropertyNames(v).map(k => JSON.stringify(k) + ":" + describe(v[k])).join(",") +
				"}" + (Object.getPrototypeOf(v) === Object.prototype ? "" : "!proto");
		}
		return typeof v + ":" + (Object.is(v, -0) ? "-0" : String(v));
	})`)
	if err != nil {
		t.Fatal(err)
	}
	describe, _ := goja.AssertFunction(describeJS)
	for _, doc := range docs {
		want, err := parse(goja.Undefined(), vm.rt.ToValue(doc))
		if err != nil {
			t.Fatalf("JSON.parse(%s): %v", doc, err)
		}
		got, err := vm.fromJSON([]byte(doc))
		if err != nil {
			t.Errorf("fromJSON(%s): %v", doc, err)
			continue
		}
		for _, f := range []goja.Callable{stringify, describe} {
			w, _ := f(goja.Undefined(), want)
			g, _ := f(goja.Undefined(), got)
			if w.String() != g.String() {
				t.Errorf("%s:\n got  %s\n want %s", doc, g, w)
			}
		}
		if !reflect.DeepEqual(got.Export(), want.Export()) {
			t.Errorf("%s exports as %v (%T), JSON.parse gives %v (%T)", doc, got.Export(), got.Export(), want.Export(), want.Export())
		}
	}
}

// Beyond a double, a number is Infinity, as Node.js has it (goja's JSON.parse refuses it).
func TestFromJSONHugeNumberIsInfinity(t *testing.T) {
	vm := &jsVM{rt: goja.New()}
	for doc, want := range map[string]float64{`1e999`: math.Inf(1), `-1e999`: math.Inf(-1)} {
		got, err := vm.fromJSON([]byte(doc))
		if err != nil || got.ToFloat() != want {
			t.Errorf("fromJSON(%s) = %v, %v; want %v", doc, got, err, want)
		}
	}
}

func TestFromJSONRefusesWhatJSONParseRefuses(t *testing.T) {
	vm := &jsVM{rt: goja.New()}
	parse, _ := goja.AssertFunction(vm.rt.Get("JSON").ToObject(vm.rt).Get("parse"))
	for _, doc := range []string{``, `{`, `{"a"}`, `{"a":1,}`, `[1,]`, `{a:1}`, `'x'`, `01`, `NaN`, `{} {}`, `[1] x`, `"\x"`} {
		if _, err := parse(goja.Undefined(), vm.rt.ToValue(doc)); err == nil {
			t.Errorf("JSON.parse(%q) succeeded: not a refusal case", doc)
		}
		if _, err := vm.fromJSON([]byte(doc)); err == nil {
			t.Errorf("fromJSON(%q) succeeded, want an error", doc)
		}
	}
	// Beyond JSON.parse: nesting is bounded, as a guard for the recursion.
	if _, err := vm.fromJSON([]byte(strings.Repeat("[", 2000) + strings.Repeat("]", 2000))); err == nil {
		t.Error("fromJSON of 2000 nested arrays succeeded, want an error")
	}
}

// A request's properties are defined, as JSON.parse defines them: a setter that
// top-level code put on Object.prototype is not called, and the request keeps
// its own property.
func TestFromJSONDefinesProperties(t *testing.T) {
	vm := &jsVM{rt: goja.New()}
	if _, err := vm.rt.RunString(`var called = false;
		Object.defineProperty(Object.prototype, "parent", {set(v) { called = true; }, configurable: true});`); err != nil {
		t.Fatal(err)
	}
	got, err := vm.fromJSON([]byte(`{"parent": {"name": "p"}}`))
	if err != nil {
		t.Fatal(err)
	}
	check, err := vm.rt.RunString(`(function(v) { return !called && v.hasOwnProperty("parent") && v.parent.name === "p"; })`)
	if err != nil {
		t.Fatal(err)
	}
	fn, _ := goja.AssertFunction(check)
	if ok, _ := fn(goja.Undefined(), got); !ok.ToBoolean() {
		t.Error("the request's property went through Object.prototype's setter")
	}
}
