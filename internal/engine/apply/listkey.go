package apply

import (
	"encoding/json"
	"fmt"
	"strconv"
	"strings"
	"unicode"
)

// listKey is the field that identifies the items of a list-map, paired with
// protocol for ports.
type listKey struct {
	field    string
	protocol bool
}

// smallList is the length up to which a list is searched pair by pair rather than
// through a map of item ids, which costs allocations.
const smallList = 16

// detectListMapKey returns the first conventional key every item of every list
// holds, unique within each list; ok is false when the lists are not list-maps.
func detectListMapKey(lists ...[]any) (key listKey, ok bool) {
	for _, field := range [...]string{"containerPort", "port", "mountPath", "name", "uid", "ip", "path"} {
		key := listKey{field: field}
		key.protocol = (field == "containerPort" || field == "port") && anyItemHas(lists, "protocol")
		if key.fits(lists) {
			return key, true
		}
	}
	return listKey{}, false
}

func anyItemHas(lists [][]any, field string) bool {
	for _, list := range lists {
		for _, item := range list {
			if m, ok := item.(map[string]any); ok && m[field] != nil {
				return true
			}
		}
	}
	return false
}

func (k listKey) fits(lists [][]any) bool {
	for _, list := range lists {
		if !k.fitsList(list) {
			return false
		}
	}
	return true
}

func (k listKey) fitsList(list []any) bool {
	if len(list) <= smallList {
		for i, item := range list {
			m, ok := item.(map[string]any)
			if !ok || m[k.field] == nil {
				return false
			}
			for _, prev := range list[:i] {
				if k.same(prev.(map[string]any), m) {
					return false
				}
			}
		}
		return true
	}
	seen := make(map[string]bool, len(list))
	for _, item := range list {
		m, ok := item.(map[string]any)
		if !ok {
			return false
		}
		id, ok := k.id(m)
		if !ok || seen[id] {
			return false
		}
		seen[id] = true
	}
	return true
}

// id is the identity of one item; ok is false when it lacks the key field.
func (k listKey) id(item map[string]any) (id string, ok bool) {
	v := item[k.field]
	if v == nil {
		return "", false
	}
	id = scalarID(v)
	if k.protocol {
		id += "\x00" + scalarID(protocolOf(item))
	}
	return id, true
}

// same reports whether two items holding the key field have the same id, without
// building the ids.
func (k listKey) same(a, b map[string]any) bool {
	return sameKeyValue(a[k.field], b[k.field]) && (!k.protocol || sameKeyValue(protocolOf(a), protocolOf(b)))
}

// protocolOf is the protocol of a port, "TCP" (the server default) when missing.
func protocolOf(item map[string]any) any {
	if p := item["protocol"]; p != nil {
		return p
	}
	return "TCP"
}

// sameKeyValue is scalarID(x) == scalarID(y), mostly without rendering the ids.
func sameKeyValue(x, y any) bool {
	xs, xString := x.(string)
	ys, yString := y.(string)
	if xString || yString {
		return xString && yString && xs == ys
	}
	xn, xNumber := toNumber(x)
	yn, yNumber := toNumber(y)
	if xNumber || yNumber {
		return xNumber && yNumber && xn.equal(yn)
	}
	return scalarID(x) == scalarID(y)
}

// index maps the id of each item to the item. Items without the key field are
// left out, and the first of several items with one id is kept.
func (k listKey) index(list []any) map[string]map[string]any {
	out := make(map[string]map[string]any, len(list))
	for _, item := range list {
		m, ok := item.(map[string]any)
		if !ok {
			continue
		}
		if id, ok := k.id(m); ok {
			if _, dup := out[id]; !dup {
				out[id] = m
			}
		}
	}
	return out
}

// positions maps the id of each item of a list to the indexes of the items with
// that id; items without the key field are left out.
func (k listKey) positions(list []any) map[string][]int {
	out := make(map[string][]int, len(list))
	for i, item := range list {
		m, ok := item.(map[string]any)
		if !ok {
			continue
		}
		if id, ok := k.id(m); ok {
			out[id] = append(out[id], i)
		}
	}
	return out
}

// matches appends to buf the indexes of the items of list with the key of item:
// found in byID (see positions) when it is not nil, else by scanning list.
func (k listKey) matches(item map[string]any, list []any, byID map[string][]int, buf []int) []int {
	if byID != nil {
		id, _ := k.id(item)
		return append(buf, byID[id]...)
	}
	for i, x := range list {
		if m, ok := x.(map[string]any); ok && m[k.field] != nil && k.same(item, m) {
			buf = append(buf, i)
		}
	}
	return buf
}

// selector renders the key of item for a path: name=web, mountPath=/etc/config,
// containerPort=53,protocol=UDP. Strings that could be read as something else
// are quoted: name="", port="80".
func (k listKey) selector(item map[string]any) string {
	s := k.field + "=" + keyText(item[k.field])
	if k.protocol {
		s += ",protocol=" + keyText(protocolOf(item))
	}
	return s
}

func keyText(v any) string {
	if s, ok := v.(string); ok {
		if plainKeyText(s) {
			return s
		}
		return strconv.Quote(s)
	}
	if n, ok := toNumber(v); ok {
		return n.String()
	}
	if b, err := json.Marshal(v); err == nil {
		return string(b)
	}
	return fmt.Sprint(v)
}

// plainKeyText reports whether s can stand unquoted in a selector: not empty, not
// a number, bool or null, and free of spaces, controls and selector punctuation.
func plainKeyText(s string) bool {
	if s == "" || s == "true" || s == "false" || s == "null" {
		return false
	}
	if _, isNumber := parseNumber(s); isNumber {
		return false
	}
	for _, r := range s {
		if unicode.IsSpace(r) || !unicode.IsPrint(r) || strings.ContainsRune(`[]=,"\`, r) {
			return false
		}
	}
	return true
}

// scalarID renders a key value so that equal numbers of different Go types agree
// and the number 80 differs from the string "80".
func scalarID(v any) string {
	if s, ok := v.(string); ok {
		return "s:" + s
	}
	if n, ok := toNumber(v); ok {
		return "n:" + n.String()
	}
	return fmt.Sprintf("%T:%v", v, v)
}

// listMode is how a desired list is compared with the observed one.
type listMode uint8

const (
	byIndex listMode = iota // same length, item by item in order
	byKey                   // a list-map: each desired item held by the observed item with its key
	asSet                   // each desired item held by any observed item
)

// setLike reports whether the list at the current path is a set whose items the
// server or admission plugins add to: metadata.finalizers (pvc-protection,
// foregroundDeletion) and tolerations (not-ready, unreachable).
func (c *collector) setLike() bool {
	switch c.key(0) {
	case "finalizers":
		return c.key(1) == "metadata"
	case "tolerations":
		return true
	}
	return false
}
