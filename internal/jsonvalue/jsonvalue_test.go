package jsonvalue

import (
	"math"
	"testing"
)

func TestEqual(t *testing.T) {
	for _, tt := range []struct {
		a, b any
		want bool
	}{
		{int64(3), float64(3), true},
		{map[string]any{"a": 1, "b": []any{"x"}}, map[string]any{"b": []any{"x"}, "a": int64(1)}, true},
		{map[string]any{"a": 1}, map[string]any{"a": 2}, false},
		{nil, map[string]any(nil), true},
		{math.NaN(), math.NaN(), false}, // not encodable
	} {
		if got := Equal(tt.a, tt.b); got != tt.want {
			t.Errorf("Equal(%v, %v) = %v, want %v", tt.a, tt.b, got, tt.want)
		}
	}
}

func TestConvert(t *testing.T) {
	var out struct {
		Name  string `json:"name"`
		Count int    `json:"count"`
	}
	if err := Convert(map[string]any{"name": "x", "count": int64(2)}, &out); err != nil || out.Name != "x" || out.Count != 2 {
		t.Errorf("Convert = %+v, %v", out, err)
	}
	if err := Convert(map[string]any{"count": "two"}, &out); err == nil {
		t.Error("a string converted into an int")
	}
}
