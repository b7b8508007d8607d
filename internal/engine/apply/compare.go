package apply

import (
	"encoding/base64"
	"reflect"
	"slices"
)

// InSync reports whether observed already holds everything desired asks for, so
// that no write is needed. It is exactly len(Diff(desired, observed)) == 0, but
// stops at the first difference and renders no paths.
func InSync(desired, observed map[string]any) bool {
	w := differ{collector: collector{stopEarly: true, stack: make([]seg, 0, 16)}}
	w.object(desired, observed)
	return !w.found
}

// Diff lists, in key order (list items in desired order), the paths (like
// spec.ports[0].port) where observed does not hold what desired asks for. desired
// is read as a subset of observed:
//
//   - fields only observed has (server defaults, other writers' fields) are ignored,
//     and so are desired's status, its server-owned metadata (uid, resourceVersion,
//     generation, creationTimestamp, deletionTimestamp, deletionGracePeriodSeconds,
//     managedFields, selfLink) and its last-applied annotation;
//   - numbers of any Go type or json.Number compare by value; two strings that both
//     parse as quantities compare as quantities ("500m" == "0.5"), and so do a
//     quantity string and a number (cpu "2" == 2), except in the int-or-string
//     fields targetPort, port, servicePort, maxSurge, maxUnavailable and
//     minAvailable, where the server keeps the type (8080 != "8080");
//   - an empty desired value (null, "", false, 0, {}, []) matches a missing or null
//     field, because the server drops empty omitempty fields; label and annotation
//     values and the entries of a top-level data, binaryData or stringData map are
//     kept by the server, so there an empty string must be present;
//   - a list of objects that all hold a list-map key, unique among them (the first
//     of containerPort, port, mountPath, name, uid, ip, path; a containerPort or
//     port is paired with protocol, "TCP" when missing, when a desired item has a
//     protocol), is matched by key: every desired item must be held, by the same
//     rules, by an observed item with its key, in any order. Observed items desired
//     does not name are ignored, as the server and admission plugins add some (the
//     service-account token volume and its mount, for one). A missing item is
//     reported by its key (spec.volumes[name=config]), a difference inside an item
//     at the item's observed index (spec.containers[1].image). An empty desired
//     list is matched so when the observed items have such a key;
//   - metadata.finalizers and tolerations are sets: every desired item must be
//     held by some observed item, in any order, and the list is reported when one
//     is not;
//   - any other list (args, command, ...) must have the same length (the path of
//     the list is reported when it does not), and is then compared item by item in
//     order with the same rules;
//   - a v1 Secret's stringData, which the server folds into data and never returns,
//     is compared as base64 in data (reported under data) unless observed has a
//     stringData of its own.
//
// Diff cannot see a field or a list item the hook stopped setting, because desired
// no longer names it: see Removed and RemovedManaged.
func Diff(desired, observed map[string]any) []string {
	var w differ
	w.object(desired, observed)
	return w.paths
}

// differ walks desired alongside observed and reports where they differ.
type differ struct{ collector }

func (w *differ) object(desired, observed map[string]any) {
	w.mapValue(foldStringData(desired, observed), observed)
}

func (w *differ) value(d, o any) {
	switch dv := d.(type) {
	case map[string]any:
		w.mapValue(dv, o)
	case []any:
		w.listValue(dv, o)
	default:
		if !w.scalarMatches(d, o) {
			w.report()
		}
	}
}

// mapValue compares every field of d with the same field of o; a missing o is
// compared as an empty object, so empty desired values still match.
func (w *differ) mapValue(d map[string]any, o any) {
	om, ok := o.(map[string]any)
	if !ok && o != nil {
		w.report()
		return
	}
	if w.stopEarly {
		for k, v := range d {
			if w.field(k, v, om); w.done() {
				return
			}
		}
		return
	}
	for _, k := range sortedKeys(d) {
		w.field(k, d[k], om)
	}
}

func (w *differ) field(k string, d any, om map[string]any) {
	if w.ignoredChild(k) {
		return
	}
	w.pushKey(k)
	w.value(d, om[k])
	w.pop()
}

// listValue compares a list the way listMode says: as a list-map matched by key,
// as a set, or item by item in order.
func (w *differ) listValue(d []any, o any) {
	ol, ok := o.([]any)
	if !ok && o != nil {
		w.report()
		return
	}
	switch mode, key := w.listMode(d, ol); mode {
	case byKey:
		w.keyedList(key, d, ol)
	case asSet:
		w.setList(d, ol)
	default:
		w.indexedList(d, ol)
	}
}

// listMode chooses how the desired list d at the current path is compared with
// the observed list o. A list whose items are all objects with a list-map key
// (see detectListMapKey), unique among them, is a list-map; so is an empty desired
// list when the observed items have such a key. Otherwise metadata.finalizers and
// tolerations are sets, and any other list (args, command, ...) is compared by
// index, as its order matters.
func (c *collector) listMode(d, o []any) (listMode, listKey) {
	if len(d) > 0 {
		if key, ok := detectListMapKey(d); ok {
			return byKey, key
		}
	}
	if c.setLike() {
		return asSet, listKey{}
	}
	if len(d) == 0 && len(o) > 0 {
		if key, ok := detectListMapKey(o); ok {
			return byKey, key
		}
	}
	return byIndex, listKey{}
}

// indexedList requires the same length, then compares item by item in order.
func (w *differ) indexedList(d, o []any) {
	if len(o) != len(d) {
		w.report()
		return
	}
	for i, item := range d {
		w.pushIndex(i)
		w.value(item, o[i])
		w.pop()
		if w.done() {
			return
		}
	}
}

// keyedList requires every desired item of a list-map to be held by an observed
// item with the same key, whatever the order; observed items desired does not name
// are ignored. A missing item is reported by its key, a difference inside an item
// at the item's observed index.
func (w *differ) keyedList(key listKey, d, o []any) {
	var byID map[string][]int
	if len(o) > smallList && len(d) > 1 {
		byID = key.positions(o)
	}
	var buf [4]int
	for _, item := range d {
		dm := item.(map[string]any)
		matches := key.matches(dm, o, byID, buf[:0])
		switch {
		case len(matches) == 0:
			w.reportItem(key, dm)
		case len(matches) == 1 || !w.anyHolds(dm, o, matches):
			// With several observed items of that key (the server let a
			// duplicate in), the differences are those of the first.
			w.pushIndex(matches[0])
			w.value(dm, o[matches[0]])
			w.pop()
		}
		if w.done() {
			return
		}
	}
}

func (w *differ) anyHolds(d any, o []any, indexes []int) bool {
	for _, i := range indexes {
		if w.itemHolds(i, d, o[i]) {
			return true
		}
	}
	return false
}

// setList requires every desired item to be held by some observed item, whatever
// the order; the list is reported (once) when one is not.
func (w *differ) setList(d, o []any) {
	for _, item := range d {
		if !w.heldByAny(item, o) {
			w.report()
			return
		}
	}
}

func (c *collector) heldByAny(d any, o []any) bool {
	for i, item := range o {
		if c.itemHolds(i, d, item) {
			return true
		}
	}
	return false
}

// itemHolds reports whether o, as item i of the list at the current path, holds d
// by the rules of Diff.
func (c *collector) itemHolds(i int, d, o any) bool {
	p := differ{collector: collector{stopEarly: true, stack: append(c.stack, seg{index: i})}}
	p.value(d, o)
	return !p.found
}

// scalarMatches compares a desired scalar with the observed value at the current
// path (o is nil when the field is missing or null).
func (w *differ) scalarMatches(d, o any) bool {
	if o == nil {
		return isEmpty(d) && (d == nil || !w.emptyIsValue())
	}
	if d == nil {
		return isEmpty(o)
	}
	quantities := !isIntOrString(w.key(0))
	switch dv := d.(type) {
	case string:
		return stringMatches(dv, o, quantities)
	case bool:
		ob, ok := o.(bool)
		return ok && ob == dv
	}
	if dn, ok := toNumber(d); ok {
		return numberMatches(dn, o, quantities)
	}
	return reflect.DeepEqual(d, o)
}

func stringMatches(s string, o any, quantities bool) bool {
	if os, ok := o.(string); ok {
		return s == os || (quantities && quantitiesEqual(s, os))
	}
	on, ok := toNumber(o)
	return ok && quantities && quantityEqualsNumber(s, on)
}

func numberMatches(n number, o any, quantities bool) bool {
	if on, ok := toNumber(o); ok {
		return n.equal(on)
	}
	os, ok := o.(string)
	return ok && quantities && quantityEqualsNumber(os, n)
}

// ignoredChild reports whether field k of the object at the current path is left
// out of the comparison: status, server-owned metadata, the last-applied annotation.
func (c *collector) ignoredChild(k string) bool {
	switch c.depth() {
	case 0:
		return k == "status"
	case 1:
		return c.key(0) == "metadata" && isSystemMetadata(k)
	case 2:
		return c.key(1) == "metadata" && c.key(0) == "annotations" && k == LastAppliedAnnotation
	}
	return false
}

// emptyIsValue reports whether the server keeps an empty string at the current
// path: label and annotation values, and top-level data maps (ConfigMap, Secret).
func (c *collector) emptyIsValue() bool {
	parent := c.key(1)
	if (parent == "labels" || parent == "annotations") && c.key(2) == "metadata" {
		return true
	}
	return c.depth() == 2 && (parent == "data" || parent == "binaryData" || parent == "stringData")
}

// isIntOrString names the built-in int-or-string fields, where the server keeps
// the type it was given, so 8080 and "8080" differ.
func isIntOrString(field string) bool {
	switch field {
	case "targetPort", "port", "servicePort", "maxSurge", "maxUnavailable", "minAvailable":
		return true
	}
	return false
}

// isEmpty reports whether v is a value the server drops from omitempty fields.
func isEmpty(v any) bool {
	switch x := v.(type) {
	case nil:
		return true
	case string:
		return x == ""
	case bool:
		return !x
	case map[string]any:
		return len(x) == 0
	case []any:
		return len(x) == 0
	}
	n, ok := toNumber(v)
	return ok && n.isZero()
}

// foldStringData returns desired with a v1 Secret's stringData moved into data as
// base64, the form the server stores and returns. desired is not modified; it is
// returned unchanged when there is nothing to fold, when observed has a stringData
// of its own (so comparing an object with itself stays true), or when a value is
// not a string.
func foldStringData(desired, observed map[string]any) map[string]any {
	sd, ok := desired["stringData"].(map[string]any)
	if !ok || desired["kind"] != "Secret" || desired["apiVersion"] != "v1" {
		return desired
	}
	if _, has := observed["stringData"]; has {
		return desired
	}
	data, ok := foldedData(desired["data"], sd)
	if !ok {
		return desired
	}
	out := make(map[string]any, len(desired))
	for k, v := range desired {
		out[k] = v
	}
	delete(out, "stringData")
	out["data"] = data
	return out
}

func foldedData(data any, stringData map[string]any) (map[string]any, bool) {
	dm, ok := data.(map[string]any)
	if !ok && data != nil {
		return nil, false
	}
	out := make(map[string]any, len(dm)+len(stringData))
	for k, v := range dm {
		out[k] = v
	}
	for k, v := range stringData {
		s, ok := v.(string)
		if !ok {
			return nil, false
		}
		out[k] = base64.StdEncoding.EncodeToString([]byte(s))
	}
	return out, true
}

func sortedKeys[V any](m map[string]V) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	return keys
}
