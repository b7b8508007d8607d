package apply

import (
	"encoding/json"
	"math"
	"strconv"
	"strings"

	"k8s.io/apimachinery/pkg/api/resource"
)

type numKind uint8

const (
	kindInt   numKind = iota // fits in int64
	kindUint                 // above math.MaxInt64
	kindFloat                // float32, float64 or a non-integer json.Number
)

// number is a JSON number normalised so that values of different Go types compare
// by value: int64(3), float64(3), uint8(3) and json.Number("3.0") are all equal.
type number struct {
	kind numKind
	i    int64
	u    uint64
	f    float64
}

// toNumber normalises any Go numeric type or json.Number; ok is false for anything
// else, including a json.Number that does not parse.
func toNumber(v any) (n number, ok bool) {
	switch x := v.(type) {
	case int:
		return number{kind: kindInt, i: int64(x)}, true
	case int8:
		return number{kind: kindInt, i: int64(x)}, true
	case int16:
		return number{kind: kindInt, i: int64(x)}, true
	case int32:
		return number{kind: kindInt, i: int64(x)}, true
	case int64:
		return number{kind: kindInt, i: x}, true
	case uint:
		return fromUint(uint64(x)), true
	case uint8:
		return fromUint(uint64(x)), true
	case uint16:
		return fromUint(uint64(x)), true
	case uint32:
		return fromUint(uint64(x)), true
	case uint64:
		return fromUint(x), true
	case float32:
		return number{kind: kindFloat, f: float64(x)}, true
	case float64:
		return number{kind: kindFloat, f: x}, true
	case json.Number:
		return parseNumber(string(x))
	}
	return number{}, false
}

func fromUint(u uint64) number {
	if u <= math.MaxInt64 {
		return number{kind: kindInt, i: int64(u)}
	}
	return number{kind: kindUint, u: u}
}

func parseNumber(s string) (number, bool) {
	if i, err := strconv.ParseInt(s, 10, 64); err == nil {
		return number{kind: kindInt, i: i}, true
	}
	if u, err := strconv.ParseUint(s, 10, 64); err == nil {
		return fromUint(u), true
	}
	if f, err := strconv.ParseFloat(s, 64); err == nil {
		return number{kind: kindFloat, f: f}, true
	}
	return number{}, false
}

// equal compares by value; NaN equals NaN so that every value equals itself.
func (a number) equal(b number) bool {
	if a.kind > b.kind {
		a, b = b, a
	}
	switch {
	case a.kind == kindFloat && b.kind == kindFloat:
		return a.f == b.f || (math.IsNaN(a.f) && math.IsNaN(b.f))
	case a.kind == b.kind:
		return a == b
	case b.kind == kindFloat:
		return a.matchesFloat(b.f)
	}
	return false // an int64 never equals a uint64 above math.MaxInt64
}

// matchesFloat reports whether the integer a has exactly the value f.
func (a number) matchesFloat(f float64) bool {
	if f != math.Trunc(f) || math.IsInf(f, 0) {
		return false
	}
	if a.kind == kindInt {
		return f >= -0x1p63 && f < 0x1p63 && int64(f) == a.i
	}
	return f >= 0x1p63 && f < 0x1p64 && uint64(f) == a.u
}

func (a number) isZero() bool {
	return (a.kind == kindInt && a.i == 0) || (a.kind == kindFloat && a.f == 0)
}

// String is the canonical text of the value: integral floats print as integers.
func (a number) String() string {
	switch {
	case a.kind == kindUint:
		return strconv.FormatUint(a.u, 10)
	case a.kind == kindInt:
		return strconv.FormatInt(a.i, 10)
	case a.f == math.Trunc(a.f) && a.f >= -0x1p63 && a.f < 0x1p63:
		return strconv.FormatInt(int64(a.f), 10)
	case a.f == math.Trunc(a.f) && a.f >= 0x1p63 && a.f < 0x1p64:
		return strconv.FormatUint(uint64(a.f), 10)
	}
	return strconv.FormatFloat(a.f, 'g', -1, 64)
}

// quantity converts the number to a resource.Quantity (false for NaN and ±Inf).
func (a number) quantity() (resource.Quantity, bool) {
	if a.kind == kindInt {
		return *resource.NewQuantity(a.i, resource.DecimalSI), true
	}
	if a.kind == kindFloat && (math.IsNaN(a.f) || math.IsInf(a.f, 0)) {
		return resource.Quantity{}, false
	}
	text := a.String()
	if a.kind == kindFloat && a.f != math.Trunc(a.f) {
		text = strconv.FormatFloat(a.f, 'f', -1, 64)
	}
	return parseQuantity(text)
}

// quantitiesEqual reports whether both strings parse as quantities of one value,
// as "500m" and "0.5", or "1Gi" and "1073741824".
func quantitiesEqual(a, b string) bool {
	qa, ok := parseQuantity(a)
	if !ok {
		return false
	}
	qb, ok := parseQuantity(b)
	return ok && qa.Cmp(qb) == 0
}

// quantityEqualsNumber reports whether s parses as a quantity of the value n, as
// cpu "2" and 2.
func quantityEqualsNumber(s string, n number) bool {
	qs, ok := parseQuantity(s)
	if !ok {
		return false
	}
	qn, ok := n.quantity()
	return ok && qs.Cmp(qn) == 0
}

// maxQuantityLen bounds the text given to resource.ParseQuantity, whose time grows
// with the size of the value: "1e40000000" takes seconds. The API server accepts
// nothing near these sizes as a quantity, so such text is compared as a string.
const maxQuantityLen = 64

func parseQuantity(s string) (resource.Quantity, bool) {
	if len(s) > maxQuantityLen || hugeExponent(s) {
		return resource.Quantity{}, false
	}
	q, err := resource.ParseQuantity(s)
	return q, err == nil
}

// hugeExponent reports whether s ends in a decimal exponent of more than three
// digits, like "1e4000".
func hugeExponent(s string) bool {
	i := strings.LastIndexAny(s, "eE")
	if i < 0 {
		return false
	}
	digits := strings.TrimLeft(s[i+1:], "+-")
	return len(digits) > 3
}
