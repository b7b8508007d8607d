package dashboard

import (
	"bytes"
	"strings"
	"testing"

	"github.com/metalambda/metalambda/internal/engineapi"
	"github.com/metalambda/metalambda/internal/gatewayapi"
	"github.com/metalambda/metalambda/web"
)

const traceID = "4bf92f3577b34da6a3ce929d0e0e4736"

// A hook call shows its trace ID: as text without a trace URL template, as a link
// with one; a call without a trace shows none.
func TestHookCallsShowTheirTraceID(t *testing.T) {
	calls := []engineapi.HookCall{{ID: 1, Hook: "sync", TraceID: traceID}, {ID: 2, Hook: "sync"}}
	for _, tc := range []struct {
		template string
		want     string
	}{
		{"", "trace <code>" + traceID + "</code>"},
		{"http://jaeger:16686/trace/{traceID}", `<a href="http://jaeger:16686/trace/` + traceID + `" target="_blank" rel="noopener"><code>` + traceID + `</code></a>`},
	} {
		pages, err := parsePages(web.Templates(), tc.template)
		if err != nil {
			t.Fatal(err)
		}
		var buf bytes.Buffer
		if err := pages["hookcalls.html"].ExecuteTemplate(&buf, "calls", calls); err != nil {
			t.Fatal(err)
		}
		if !strings.Contains(buf.String(), tc.want) {
			t.Errorf("template %q: no %s in\n%s", tc.template, tc.want, buf.String())
		}
		if n := strings.Count(buf.String(), `data-testid="trace-id"`); n != 1 {
			t.Errorf("template %q: %d trace IDs shown, want 1 (the call without a trace shows none)", tc.template, n)
		}
	}
}

func TestValidateTraceURLTemplate(t *testing.T) {
	for tmpl, want := range map[string]string{
		"":                                    "",
		"http://jaeger:16686/trace/{traceID}": "",
		"https://grafana.example.com/explore?traceId={traceID}": "",
		"http://jaeger:16686/trace/":                            "has no {traceID}",
		"javascript:alert('{traceID}')":                         "not an absolute http or https URL",
		"/trace/{traceID}":                                      "not an absolute http or https URL",
	} {
		err := ValidateTraceURLTemplate(tmpl)
		if (want == "") != (err == nil) || (err != nil && !strings.Contains(err.Error(), want)) {
			t.Errorf("ValidateTraceURLTemplate(%q) = %v, want %q", tmpl, err, want)
		}
	}
}

// A Function's recorded call shows its trace ID, linked with a template.
func TestInvocationsShowTheirTraceID(t *testing.T) {
	pages, err := parsePages(web.Templates(), "http://jaeger:16686/trace/{traceID}")
	if err != nil {
		t.Fatal(err)
	}
	fp := &FunctionPage{History: History{InvocationList: gatewayapi.InvocationList{Enabled: true, Items: []gatewayapi.Invocation{{Status: 200, TraceID: traceID}}}}}
	var buf bytes.Buffer
	if err := pages["function.html"].ExecuteTemplate(&buf, "live", Page{Data: fp}); err != nil {
		t.Fatal(err)
	}
	if want := `href="http://jaeger:16686/trace/` + traceID + `"`; !strings.Contains(buf.String(), want) {
		t.Errorf("no %s in\n%s", want, buf.String())
	}
}
