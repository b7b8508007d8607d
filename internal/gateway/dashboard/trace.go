package dashboard

import (
	"fmt"
	"net/url"
	"strings"
)

// TraceIDPlaceholder is what Options.TraceURLTemplate holds in place of a trace ID.
const TraceIDPlaceholder = "{traceID}"

// ValidateTraceURLTemplate checks a trace URL template: an absolute http or https
// URL holding TraceIDPlaceholder. An empty template is valid (trace IDs are shown
// as text).
func ValidateTraceURLTemplate(tmpl string) error {
	if tmpl == "" {
		return nil
	}
	if !strings.Contains(tmpl, TraceIDPlaceholder) {
		return fmt.Errorf("trace URL template %q has no %s to replace with a trace ID", tmpl, TraceIDPlaceholder)
	}
	u, err := url.Parse(strings.ReplaceAll(tmpl, TraceIDPlaceholder, "0"))
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
		return fmt.Errorf("trace URL template %q is not an absolute http or https URL (e.g. http://jaeger:16686/trace/%s)", tmpl, TraceIDPlaceholder)
	}
	return nil
}

// traceLinker is the template function traceURL: the link to a trace in the
// tracing UI, "" without a template.
func traceLinker(tmpl string) func(traceID string) string {
	return func(traceID string) string {
		if tmpl == "" || traceID == "" {
			return ""
		}
		return strings.ReplaceAll(tmpl, TraceIDPlaceholder, url.PathEscape(traceID))
	}
}
