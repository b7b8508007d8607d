package apply

import (
	"encoding/json"
	"errors"
	"fmt"
	"maps"

	utiljson "k8s.io/apimachinery/pkg/util/json"
)

// LastAppliedAnnotation holds, in three-way mode, the JSON of what the hook last
// asked for, so a later merge knows which fields the hook has since dropped.
const LastAppliedAnnotation = "metacontroller.k8s.io/last-applied-configuration"

// ErrMalformed marks an object that cannot be handled as given: metadata that is
// not an object, an unreadable last-applied annotation, a value that is not JSON.
// It is terminal: retrying the same input fails the same way.
var ErrMalformed = errors.New("malformed object")

// isSystemMetadata names the metadata fields the API server owns.
func isSystemMetadata(field string) bool {
	switch field {
	case "uid", "resourceVersion", "generation", "creationTimestamp", "deletionTimestamp",
		"deletionGracePeriodSeconds", "managedFields", "selfLink":
		return true
	}
	return false
}

// ForApply returns the body of a server-side apply for desired: desired without
// status, server-owned metadata, managedFields and the last-applied annotation
// (dropping annotations, or metadata, when that stripping leaves them empty). desired is not
// modified: the maps it strips are copied, everything else is shared with desired, so
// the result is for encoding, not for changing; when nothing is to be stripped, it is
// desired itself. Marshalled as JSON it is a valid application/apply-patch+yaml body.
func ForApply(desired map[string]any) map[string]any {
	if desired == nil || stripsNothing(desired) {
		return desired
	}
	out := maps.Clone(desired)
	delete(out, "status")
	md, ok := out["metadata"].(map[string]any)
	if !ok {
		return out
	}
	md = maps.Clone(md)
	out["metadata"] = md
	had := len(md)
	for k := range md {
		if isSystemMetadata(k) {
			delete(md, k)
		}
	}
	removeLastApplied(md)
	if len(md) == 0 && had > 0 {
		delete(out, "metadata")
	}
	return out
}

// stripsNothing reports whether ForApply would find nothing to strip in desired, as
// for the children a hook returns: copying its maps was about a twentieth of what
// the engine allocated while it converged.
func stripsNothing(desired map[string]any) bool {
	if _, ok := desired["status"]; ok {
		return false
	}
	md, ok := desired["metadata"].(map[string]any)
	if !ok {
		return true
	}
	for k := range md {
		if isSystemMetadata(k) {
			return false
		}
	}
	ann, ok := md["annotations"].(map[string]any)
	if !ok {
		return true
	}
	_, has := ann[LastAppliedAnnotation]
	return !has
}

// removeLastApplied drops the last-applied annotation from md, copying its
// annotations rather than changing them.
func removeLastApplied(md map[string]any) {
	ann, ok := md["annotations"].(map[string]any)
	if !ok {
		return
	}
	if _, has := ann[LastAppliedAnnotation]; !has {
		return
	}
	ann = maps.Clone(ann)
	delete(ann, LastAppliedAnnotation)
	md["annotations"] = ann
	if len(ann) == 0 {
		delete(md, "annotations")
	}
}

// SetLastApplied writes the last-applied annotation into obj (creating metadata and
// annotations as needed): the JSON, with sorted keys, of obj without that
// annotation, status and server-owned metadata. obj is modified in place.
func SetLastApplied(obj map[string]any) error {
	text, err := lastAppliedJSON(obj)
	if err != nil {
		return err
	}
	return setAnnotation(obj, LastAppliedAnnotation, text)
}

func lastAppliedJSON(obj map[string]any) (string, error) {
	b, err := json.Marshal(ForApply(obj))
	if err != nil {
		return "", fmt.Errorf("%w: encode last-applied configuration: %w", ErrMalformed, err)
	}
	return string(b), nil
}

func setAnnotation(obj map[string]any, key, value string) error {
	if obj == nil {
		return fmt.Errorf("%w: nil object", ErrMalformed)
	}
	md, err := childObject(obj, "metadata")
	if err != nil {
		return err
	}
	ann, err := childObject(md, "annotations")
	if err != nil {
		return fmt.Errorf("metadata: %w", err)
	}
	ann[key] = value
	return nil
}

// childObject returns m[key] as an object, creating it when missing or null.
func childObject(m map[string]any, key string) (map[string]any, error) {
	switch v := m[key].(type) {
	case map[string]any:
		if v != nil {
			return v, nil
		}
	case nil:
	default:
		return nil, fmt.Errorf("%s: %w: a %T, not an object", key, ErrMalformed, v)
	}
	v := map[string]any{}
	m[key] = v
	return v, nil
}

// LastApplied reads the last-applied annotation of obj: nil when it is absent or
// empty, an ErrMalformed error when it is not a JSON object. Numbers decode as
// unstructured does: int64 when integral, float64 otherwise.
func LastApplied(obj map[string]any) (map[string]any, error) {
	md, _ := obj["metadata"].(map[string]any)
	ann, _ := md["annotations"].(map[string]any)
	raw := ann[LastAppliedAnnotation]
	if raw == nil {
		return nil, nil
	}
	text, ok := raw.(string)
	if !ok {
		return nil, fmt.Errorf("%w: annotation %s is a %T, not a string", ErrMalformed, LastAppliedAnnotation, raw)
	}
	if text == "" {
		return nil, nil
	}
	var out map[string]any
	if err := utiljson.Unmarshal([]byte(text), &out); err != nil {
		return nil, fmt.Errorf("%w: annotation %s: %w", ErrMalformed, LastAppliedAnnotation, err)
	}
	return out, nil
}
