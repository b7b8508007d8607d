package apply

import (
	"encoding/json"
	"reflect"
	"slices"
	"strconv"
	"strings"
)

// Removed lists, in three-way mode, the paths of fields the hook has stopped
// setting: present in lastApplied (see LastApplied), absent from desired, and still
// present in observed. Diff cannot see these, as desired no longer names them, so
// an object is in sync only when both Diff and Removed are empty. Lists are matched
// as ThreeWayMerge matches them when it merges them by key, otherwise as Diff
// compares them: by key, as sets (metadata.finalizers, tolerations, matched by
// value), or by position. An item the hook dropped from a list-map or a set is
// reported at its observed index.
// Status, server-owned metadata and the last-applied annotation are ignored.
func Removed(lastApplied, desired, observed map[string]any) []string {
	var w remover
	w.mapValue(lastApplied, desired, observed)
	return w.paths
}

type remover struct{ collector }

func (w *remover) mapValue(l, d, o map[string]any) {
	for _, k := range sortedKeys(l) {
		if o[k] == nil || w.ignoredChild(k) {
			continue
		}
		w.pushKey(k)
		if dv, wanted := d[k]; wanted {
			w.value(l[k], dv, o[k])
		} else {
			w.report()
		}
		w.pop()
		if w.done() {
			return
		}
	}
}

func (w *remover) value(l, d, o any) {
	switch lv := l.(type) {
	case map[string]any:
		dm, dok := d.(map[string]any)
		om, ook := o.(map[string]any)
		if dok && ook {
			w.mapValue(lv, dm, om)
		}
	case []any:
		dl, dok := d.([]any)
		ol, ook := o.([]any)
		if dok && ook {
			w.listValue(lv, dl, ol)
		}
	}
}

// listValue matches the items as ThreeWayMerge does when it merges the lists by
// key, otherwise as Diff compares them (see listMode).
func (w *remover) listValue(l, d, o []any) {
	if key, ok := detectListMapKey(o, l, d); ok {
		w.listMap(key, l, d, o)
		return
	}
	switch mode, key := w.listMode(d, o); mode {
	case byKey:
		w.listMap(key, l, d, o)
	case asSet:
		w.setItems(l, d, o)
	default:
		if len(d) != len(o) {
			return // Diff reports the list already
		}
		for i := range min(len(l), len(d)) {
			w.pushIndex(i)
			w.value(l[i], d[i], o[i])
			w.pop()
		}
	}
}

// listMap matches items by key; items without the key field are not matched.
func (w *remover) listMap(key listKey, l, d, o []any) {
	last, wanted := key.index(l), key.index(d)
	for i, item := range o {
		om, ok := item.(map[string]any)
		if !ok {
			continue
		}
		id, ok := key.id(om)
		if !ok {
			continue
		}
		lm, ours := last[id]
		if !ours {
			continue
		}
		w.pushIndex(i)
		if dm, isWanted := wanted[id]; isWanted {
			w.mapValue(lm, dm, om)
		} else {
			w.report()
		}
		w.pop()
	}
}

// setItems matches the items of a set (metadata.finalizers, tolerations) by value.
// An observed item is the hook's when it holds (by the rules of Diff) an item of
// lastApplied, and that item is still wanted when the observed item also holds an
// item of desired that keeps every field of it. When one is not, the observed item
// is reported if it holds no desired item, and the fields lost are otherwise.
func (w *remover) setItems(l, d, o []any) {
	for i, oi := range o {
		lost := slices.IndexFunc(l, func(li any) bool { return w.itemHolds(i, li, oi) && !w.kept(i, li, d, oi) })
		if lost < 0 {
			continue
		}
		k := slices.IndexFunc(d, func(dk any) bool { return w.itemHolds(i, dk, oi) })
		w.pushIndex(i)
		if k < 0 {
			w.report()
		} else {
			w.value(l[lost], d[k], oi)
		}
		w.pop()
	}
}

// kept reports whether observed item i, oi, holds an item of d that keeps every
// field of the lastApplied item li.
func (w *remover) kept(i int, li any, d []any, oi any) bool {
	return slices.ContainsFunc(d, func(dk any) bool {
		if !w.itemHolds(i, dk, oi) {
			return false
		}
		p := remover{collector{stopEarly: true, stack: append(w.stack, seg{index: i})}}
		p.value(li, dk, oi)
		return !p.found
	})
}

// RemovedManaged lists, in server-side apply mode, the paths of fields that manager
// owns through an Apply entry of observed's metadata.managedFields (the status
// subresource aside) but that desired no longer sets, while observed still holds
// them: the fields the next apply will remove. Diff cannot see these, so an object
// is in sync only when both Diff and RemovedManaged are empty. desired must be what
// is applied, ownerReferences included. The owned leaves are reported (so an
// annotation, not all annotations); list items at their observed index. A key field missing from a desired item matches any value ("TCP" for a
// missing protocol, the server default), so a removal may go unseen but a kept item
// is never reported. Unreadable entries of a field set are skipped.
func RemovedManaged(desired, observed map[string]any, manager string) []string {
	var w owner
	sets := appliedFieldSets(observed, manager)
	for _, set := range sets {
		w.set(set, desired, observed)
	}
	if len(sets) > 1 {
		slices.Sort(w.paths)
		w.paths = slices.Compact(w.paths)
	}
	return w.paths
}

func appliedFieldSets(observed map[string]any, manager string) []map[string]any {
	md, _ := observed["metadata"].(map[string]any)
	entries, _ := md["managedFields"].([]any)
	var sets []map[string]any
	for _, e := range entries {
		entry, _ := e.(map[string]any)
		sub, _ := entry["subresource"].(string)
		set, ok := entry["fieldsV1"].(map[string]any)
		if ok && sub == "" && entry["manager"] == manager && entry["operation"] == "Apply" {
			sets = append(sets, set)
		}
	}
	return sets
}

// owner walks a FieldsV1 set alongside desired and observed.
type owner struct{ collector }

func (w *owner) set(set map[string]any, d, o any) {
	for _, k := range sortedKeys(set) {
		child, _ := set[k].(map[string]any)
		prefix, rest, _ := strings.Cut(k, ":")
		switch prefix {
		case "f":
			w.field(rest, child, d, o)
		case "k":
			w.keyedItem(rest, child, d, o)
		case "v":
			w.setItem(rest, d, o)
		case "i":
			w.indexedItem(rest, child, d, o)
		}
	}
}

func (w *owner) field(name string, child map[string]any, d, o any) {
	om, _ := o.(map[string]any)
	if om[name] == nil || w.ignoredChild(name) {
		return
	}
	dm, _ := d.(map[string]any)
	dv, wanted := dm[name]
	w.pushKey(name)
	if wanted || hasChildren(child) {
		w.set(child, dv, om[name]) // with dv nil when unwanted: reports the owned leaves
	} else {
		w.report()
	}
	w.pop()
}

// hasChildren reports whether a field set names anything below itself ("." is the
// field itself).
func hasChildren(set map[string]any) bool {
	_, self := set["."]
	return len(set) > 1 || (len(set) == 1 && !self)
}

func (w *owner) keyedItem(keyJSON string, child map[string]any, d, o any) {
	var key map[string]any
	if json.Unmarshal([]byte(keyJSON), &key) != nil {
		return
	}
	ol, _ := o.([]any)
	i := slices.IndexFunc(ol, func(item any) bool { return matchesKey(item, key, false) })
	if i < 0 {
		return
	}
	dl, _ := d.([]any)
	j := slices.IndexFunc(dl, func(item any) bool { return matchesKey(item, key, true) })
	w.item(i, j >= 0, func() { w.set(child, dl[j], ol[i]) })
}

func (w *owner) setItem(valueJSON string, d, o any) {
	var value any
	if json.Unmarshal([]byte(valueJSON), &value) != nil {
		return
	}
	same := func(item any) bool { return sameValue(item, value) }
	ol, _ := o.([]any)
	dl, _ := d.([]any)
	if i := slices.IndexFunc(ol, same); i >= 0 {
		w.item(i, slices.ContainsFunc(dl, same), func() {})
	}
}

func (w *owner) indexedItem(index string, child map[string]any, d, o any) {
	i, err := strconv.Atoi(index)
	ol, _ := o.([]any)
	if err != nil || i < 0 || i >= len(ol) {
		return
	}
	dl, _ := d.([]any)
	w.item(i, i < len(dl), func() { w.set(child, dl[i], ol[i]) })
}

// item reports observed item i as removed, or descends into it when still wanted.
func (w *owner) item(i int, wanted bool, descend func()) {
	w.pushIndex(i)
	if wanted {
		descend()
	} else {
		w.report()
	}
	w.pop()
}

// matchesKey reports whether item holds every field of a list-map key. With
// lenient (desired items), a missing field matches: protocol as "TCP", its server
// default, any other field as anything.
func matchesKey(item any, key map[string]any, lenient bool) bool {
	m, ok := item.(map[string]any)
	if !ok {
		return false
	}
	for field, want := range key {
		v, has := m[field]
		if !has && lenient && field == "protocol" {
			v, has = "TCP", true
		}
		if !has && lenient {
			continue
		}
		if !has || !sameValue(v, want) {
			return false
		}
	}
	return true
}

// sameValue is deep equality with numbers compared by value.
func sameValue(a, b any) bool {
	if an, ok := toNumber(a); ok {
		bn, ok := toNumber(b)
		return ok && an.equal(bn)
	}
	switch x := a.(type) {
	case map[string]any:
		y, ok := b.(map[string]any)
		return ok && len(x) == len(y) && allSame(x, y)
	case []any:
		y, ok := b.([]any)
		return ok && slices.EqualFunc(x, y, sameValue)
	}
	return reflect.DeepEqual(a, b)
}

func allSame(x, y map[string]any) bool {
	for k, v := range x {
		w, has := y[k]
		if !has || !sameValue(v, w) {
			return false
		}
	}
	return true
}
