package hookapi

import "github.com/metalambda/metalambda/internal/jsonvalue"

// ParseJSON fills r, a zero CompositeResponse, from a hook's answer, as decoding it
// with sigs.k8s.io/json's case-sensitive decoder (the engine's, for hooks that are not
// strict) does, in one pass without reflection (jsonvalue.ParseMembers). It declines,
// reporting false and leaving r as it was, whatever it might read otherwise: an r that
// is not zero, a member of another JSON type than its field's (the decoder's error),
// a field given twice (the decoder merges the two), events, and whatever
// jsonvalue.ParseMembers declines. Members of other names are ignored, as there.
func (r *CompositeResponse) ParseJSON(data []byte) bool {
	if r.Status != nil || r.Children != nil || r.ResyncAfterSeconds != 0 || r.Finalized || r.Events != nil {
		return false
	}
	var out CompositeResponse
	var seen [4]bool
	once := func(i int) bool {
		if seen[i] {
			return false
		}
		seen[i] = true
		return true
	}
	ok := jsonvalue.ParseMembers(data, func(key string, v any) bool {
		switch key {
		case "status":
			return once(0) && parseObject(v, &out.Status)
		case "children":
			return once(1) && parseObjects(v, &out.Children)
		case "resyncAfterSeconds":
			return once(2) && parseFloat(v, &out.ResyncAfterSeconds)
		case "finalized":
			return once(3) && parseBool(v, &out.Finalized)
		case "events":
			return v == nil // decoded into Event structs by the decoder
		}
		return true
	})
	if ok {
		*r = out
	}
	return ok
}

// parseObject sets *m as the decoder does a map field: null leaves it nil.
func parseObject(v any, m *map[string]any) bool {
	switch v := v.(type) {
	case nil:
		return true
	case map[string]any:
		*m = v
		return true
	}
	return false
}

// parseObjects sets *s as the decoder does a []Object field: null leaves it nil, [] is
// empty and not nil, a null element is a nil map.
func parseObjects(v any, s *[]Object) bool {
	switch v := v.(type) {
	case nil:
		return true
	case []any:
		out := make([]Object, len(v))
		for i, e := range v {
			if !parseObject(e, &out[i]) {
				return false
			}
		}
		*s = out
		return true
	}
	return false
}

// parseFloat sets *f from a number as the decoder does: a whole number that fits an
// int64 converts to the float64 that parsing its literal gives (both round to the
// nearest), but for a zero, which may have been -0.
func parseFloat(v any, f *float64) bool {
	switch v := v.(type) {
	case nil:
		return true
	case int64:
		*f = float64(v)
		return v != 0
	case float64:
		*f = v
		return true
	}
	return false
}

func parseBool(v any, b *bool) bool {
	switch v := v.(type) {
	case nil:
		return true
	case bool:
		*b = v
		return true
	}
	return false
}
