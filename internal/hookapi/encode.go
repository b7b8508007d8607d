package hookapi

import (
	"strconv"

	"github.com/metalambda/metalambda/internal/jsonvalue"
)

// The requests append their JSON encoding (jsonvalue.Appender) byte for byte as
// encoding/json marshals them, without its reflection: a request is most of what the
// engine encodes while it syncs.

// AppendJSON appends m's encoding.
func (m ObjectMap) AppendJSON(dst []byte) ([]byte, error) {
	return jsonvalue.AppendMap(dst, m, appendObject)
}

// AppendJSON appends o's encoding.
func (o Objects) AppendJSON(dst []byte) ([]byte, error) {
	return jsonvalue.AppendMap(dst, o, func(dst []byte, m ObjectMap) ([]byte, error) { return m.AppendJSON(dst) })
}

// AppendJSON appends r's encoding.
func (r *CompositeRequest) AppendJSON(dst []byte) ([]byte, error) {
	return appendFields(dst, []field{
		{"controller", r.Controller}, {"parent", r.Parent}, {"children", r.Children}, {"related", r.Related},
	}, r.Finalizing)
}

// AppendJSON appends r's encoding.
func (r *DecoratorRequest) AppendJSON(dst []byte) ([]byte, error) {
	return appendFields(dst, []field{
		{"controller", r.Controller}, {"object", r.Object}, {"attachments", r.Attachments}, {"related", r.Related},
	}, r.Finalizing)
}

// field is one member of a request: its JSON name and value.
type field struct {
	name  string
	value any
}

// appendFields appends an object of fields in order, then "finalizing", the last
// field of both requests.
func appendFields(dst []byte, fields []field, finalizing bool) ([]byte, error) {
	dst = append(dst, '{')
	for _, f := range fields {
		dst = append(dst, '"')
		dst = append(dst, f.name...)
		dst = append(dst, '"', ':')
		var err error
		if dst, err = jsonvalue.Append(dst, f.value); err != nil {
			return dst, err
		}
		dst = append(dst, ',')
	}
	dst = append(dst, `"finalizing":`...)
	dst = strconv.AppendBool(dst, finalizing)
	return append(dst, '}'), nil
}

func appendObject(dst []byte, o Object) ([]byte, error) { return jsonvalue.Append(dst, o) }
