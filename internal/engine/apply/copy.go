package apply

// DeepCopy copies a JSON-shaped object: nested map[string]any and []any are copied,
// every other value (strings, bools, numbers of any Go type, json.Number) is
// shared, which is safe because they are immutable. Unlike runtime.DeepCopyJSON it
// never panics: a value of any other type is shared as it is. DeepCopy(nil) is nil.
func DeepCopy(obj map[string]any) map[string]any {
	if obj == nil {
		return nil
	}
	out := make(map[string]any, len(obj))
	for k, v := range obj {
		out[k] = copyValue(v)
	}
	return out
}

func copyValue(v any) any {
	switch x := v.(type) {
	case map[string]any:
		return DeepCopy(x)
	case []any:
		if x == nil {
			return x
		}
		out := make([]any, len(x))
		for i, item := range x {
			out[i] = copyValue(item)
		}
		return out
	}
	return v
}
