package apply

import (
	"strconv"
	"strings"
)

// seg is one step of a path: a map key (index fieldSeg), a list index (index >=
// 0), or a list item named by its key (index itemSeg, key holding a selector like
// name=web).
type seg struct {
	key   string
	index int
}

const (
	fieldSeg = -1
	itemSeg  = -2
)

// collector tracks the path being walked and gathers the paths reported on it.
// With stopEarly it keeps only the fact that something was found, so walks can stop
// at the first difference without rendering any path.
type collector struct {
	stack     []seg
	paths     []string
	stopEarly bool
	found     bool
}

func (c *collector) done() bool { return c.found && c.stopEarly }

func (c *collector) pushKey(k string) { c.stack = append(c.stack, seg{key: k, index: fieldSeg}) }
func (c *collector) pushIndex(i int)  { c.stack = append(c.stack, seg{index: i}) }
func (c *collector) pop()             { c.stack = c.stack[:len(c.stack)-1] }

// reportItem records the item of the list-map at the current path that key names
// in item as a difference, as in spec.volumes[name=config].
func (c *collector) reportItem(key listKey, item map[string]any) {
	if c.stopEarly {
		c.found = true
		return
	}
	c.stack = append(c.stack, seg{key: key.selector(item), index: itemSeg})
	c.report()
	c.pop()
}

// report records the current path as a difference.
func (c *collector) report() {
	c.found = true
	if !c.stopEarly {
		c.paths = append(c.paths, renderPath(c.stack))
	}
}

// key returns the map key i steps up from the current position ("" when that step
// is a list item or above the root): key(0) is the field being compared.
func (c *collector) key(i int) string {
	n := len(c.stack) - 1 - i
	if n < 0 || c.stack[n].index != fieldSeg {
		return ""
	}
	return c.stack[n].key
}

func (c *collector) depth() int { return len(c.stack) }

// renderPath writes a path like spec.ports[0].port or spec.volumes[name=config];
// keys that are not plain identifiers are quoted:
// metadata.labels["app.kubernetes.io/name"].
func renderPath(segs []seg) string {
	var b strings.Builder
	for i, s := range segs {
		switch {
		case s.index == itemSeg:
			b.WriteString("[" + s.key + "]")
		case s.index >= 0:
			b.WriteString("[" + strconv.Itoa(s.index) + "]")
		case !isIdentifier(s.key):
			b.WriteString("[" + strconv.Quote(s.key) + "]")
		case i > 0:
			b.WriteString("." + s.key)
		default:
			b.WriteString(s.key)
		}
	}
	return b.String()
}

func isIdentifier(s string) bool {
	if s == "" {
		return false
	}
	for i, r := range s {
		letter := r == '_' || (r >= 'a' && r <= 'z') || (r >= 'A' && r <= 'Z')
		digit := r >= '0' && r <= '9'
		if !letter && (!digit || i == 0) {
			return false
		}
	}
	return true
}
