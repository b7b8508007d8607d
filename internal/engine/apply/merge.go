package apply

import "fmt"

// ThreeWayMerge returns the object to PUT in the kubectl-apply-like mode. It starts
// from a deep copy of observed and applies desired on top:
//
//   - object keys present in lastApplied but absent from desired are deleted, and so
//     are keys desired sets to null; keys only observed has are kept (server
//     defaults, other writers' fields);
//   - a scalar takes the desired value, as does any field whose type changed;
//   - a list is merged as a list-map when every item of the observed, lastApplied
//     and desired lists is an object holding the same key field, unique within each
//     list: the first of containerPort, port, mountPath, name, uid, ip, path that
//     fits. A containerPort or port key is paired with protocol (missing means
//     "TCP") when any item has a protocol, so TCP and UDP on one port stay apart.
//     Items keep observed order, new ones follow in desired order; an item in
//     lastApplied but not desired is dropped, one only observed has is kept;
//   - any other list is replaced by desired;
//   - status and server-owned metadata keep the observed values;
//   - the last-applied annotation is set to the JSON of desired (see SetLastApplied),
//     so the result is ready to send.
//
// None of the arguments is modified. The error wraps ErrMalformed when metadata is
// not an object or desired cannot be encoded as JSON.
func ThreeWayMerge(observed, lastApplied, desired map[string]any) (map[string]any, error) {
	if err := checkMetadata(observed, desired); err != nil {
		return nil, err
	}
	text, err := lastAppliedJSON(desired)
	if err != nil {
		return nil, err
	}
	out := DeepCopy(observed)
	if out == nil {
		out = map[string]any{}
	}
	mergeObject(out, lastApplied, desired)
	if err := keepServerFields(out, observed); err != nil {
		return nil, err
	}
	if err := setAnnotation(out, LastAppliedAnnotation, text); err != nil {
		return nil, err
	}
	return out, nil
}

func checkMetadata(objs ...map[string]any) error {
	for _, obj := range objs {
		switch md := obj["metadata"].(type) {
		case nil, map[string]any:
		default:
			return fmt.Errorf("%w: metadata is a %T, not an object", ErrMalformed, md)
		}
	}
	return nil
}

// mergeObject applies desired onto dst in place; see ThreeWayMerge.
func mergeObject(dst, lastApplied, desired map[string]any) {
	for k := range lastApplied {
		if _, wanted := desired[k]; !wanted {
			delete(dst, k)
		}
	}
	for k, d := range desired {
		if d == nil {
			delete(dst, k)
			continue
		}
		dst[k] = mergeValue(dst[k], lastApplied[k], d)
	}
}

// mergeValue returns the merge of desired d onto observed o (which it may modify).
func mergeValue(o, l, d any) any {
	switch dv := d.(type) {
	case map[string]any:
		om, ok := o.(map[string]any)
		if !ok || om == nil {
			om = map[string]any{}
		}
		lm, _ := l.(map[string]any)
		mergeObject(om, lm, dv)
		return om
	case []any:
		ol, isList := o.([]any)
		if !isList {
			return copyValue(dv)
		}
		ll, _ := l.([]any)
		if key, ok := detectListMapKey(ol, ll, dv); ok {
			return mergeListMap(key, ol, ll, dv)
		}
		return copyValue(dv)
	}
	return d
}

func mergeListMap(key listKey, observed, lastApplied, desired []any) []any {
	last, wanted := key.index(lastApplied), key.index(desired)
	out := make([]any, 0, len(observed)+len(desired))
	seen := make(map[string]bool, len(observed))
	for _, item := range observed {
		m := item.(map[string]any)
		id, _ := key.id(m)
		seen[id] = true
		d, isWanted := wanted[id]
		l, isOurs := last[id]
		if isWanted {
			mergeObject(m, l, d)
		}
		if isWanted || !isOurs {
			out = append(out, m)
		}
	}
	for _, item := range desired {
		d := item.(map[string]any)
		if id, _ := key.id(d); !seen[id] {
			m := map[string]any{}
			mergeObject(m, nil, d)
			out = append(out, m)
		}
	}
	return out
}

// keepServerFields gives out the status and server-owned metadata of observed.
func keepServerFields(out, observed map[string]any) error {
	if st, has := observed["status"]; has {
		out["status"] = copyValue(st)
	} else {
		delete(out, "status")
	}
	md, err := childObject(out, "metadata")
	if err != nil {
		return err
	}
	for k := range md {
		if isSystemMetadata(k) {
			delete(md, k)
		}
	}
	om, _ := observed["metadata"].(map[string]any)
	for k, v := range om {
		if isSystemMetadata(k) {
			md[k] = copyValue(v)
		}
	}
	return nil
}
