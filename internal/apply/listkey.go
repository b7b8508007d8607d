package apply

import "fmt"

// listKey is the field that identifies the items of a list-map, paired with
// protocol for ports.
type listKey struct {
	field    string
	protocol bool
}

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
		p := item["protocol"]
		if p == nil {
			p = "TCP"
		}
		id += "\x00" + scalarID(p)
	}
	return id, true
}

// index maps the id of each item to the item; the list must fit the key.
func (k listKey) index(list []any) map[string]map[string]any {
	out := make(map[string]map[string]any, len(list))
	for _, item := range list {
		m := item.(map[string]any)
		id, _ := k.id(m)
		out[id] = m
	}
	return out
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
