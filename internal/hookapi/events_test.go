package hookapi

import (
	"encoding/json"
	"fmt"
	"strings"
	"testing"
	"unicode/utf8"

	"github.com/google/go-cmp/cmp"
)

func TestEventValidate(t *testing.T) {
	tests := []struct {
		name  string
		event Event
		want  string // part of the error; "" for valid
	}{
		{"normal", Event{Type: "Normal", Reason: "Created", Message: "made it"}, ""},
		{"warning", Event{Type: "Warning", Reason: "QuotaLow"}, ""},
		{"type omitted", Event{Reason: "Synced"}, ""},
		{"digits in reason", Event{Reason: "Retry3Times"}, ""},
		{"unknown type", Event{Type: "Info", Reason: "Created"}, `type "Info" is not Normal or Warning`},
		{"type in lower case", Event{Type: "warning", Reason: "Created"}, `type "warning"`},
		{"empty reason", Event{Type: "Normal"}, "reason is empty"},
		{"reason with a space", Event{Reason: "Not Camel"}, `reason "Not Camel" is not UpperCamelCase`},
		{"reason in lower case", Event{Reason: "created"}, "is not UpperCamelCase"},
		{"reason too long", Event{Reason: "A" + strings.Repeat("b", MaxEventReasonLength)}, "129 characters long; at most 128"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			err := tt.event.Validate()
			switch {
			case tt.want == "" && err != nil:
				t.Errorf("Validate() = %v, want no error", err)
			case tt.want != "" && (err == nil || !strings.Contains(err.Error(), tt.want)):
				t.Errorf("Validate() = %v, want an error containing %q", err, tt.want)
			}
		})
	}
}

func TestCheckEvents(t *testing.T) {
	long := strings.Repeat("x", MaxEventMessageBytes+10)
	valid, problems := CheckEvents([]Event{
		{Reason: "Defaulted"},
		{Type: "Info", Reason: "Bad"},
		{Type: "Warning", Reason: "Long", Message: long},
		{Type: "Normal", Reason: ""},
	})
	want := []Event{
		{Type: "Normal", Reason: "Defaulted"},
		{Type: "Warning", Reason: "Long", Message: long[:MaxEventMessageBytes-3] + "..."},
	}
	if diff := cmp.Diff(want, valid); diff != "" {
		t.Errorf("valid events (-want +got):\n%s", diff)
	}
	wantProblems := []string{`events[1]: type "Info" is not Normal or Warning`, "events[3]: reason is empty"}
	if diff := cmp.Diff(wantProblems, problems); diff != "" {
		t.Errorf("problems (-want +got):\n%s", diff)
	}

	var many []Event
	for i := range 100 {
		many = append(many, Event{Reason: fmt.Sprintf("E%d", i)})
	}
	valid, problems = CheckEvents(many)
	if len(valid) != MaxEvents || valid[MaxEvents-1].Reason != "E9" {
		t.Errorf("100 events: kept %d (last %+v), want the first %d", len(valid), valid[len(valid)-1], MaxEvents)
	}
	if diff := cmp.Diff([]string{"90 events past the first 10 were dropped"}, problems); diff != "" {
		t.Errorf("100 events: problems (-want +got):\n%s", diff)
	}

	if valid, problems := CheckEvents(nil); valid != nil || problems != nil {
		t.Errorf("no events: %v, %v", valid, problems)
	}
}

func TestCutMessage(t *testing.T) {
	tests := []struct {
		in    string
		limit int
		want  string
	}{
		{"short", 10, "short"},
		{"exactly10!", 10, "exactly10!"},
		{"eleven char", 10, "eleven ..."},
		{"ééééé", 8, "éé..."}, // never half of a two-byte character
	}
	for _, tt := range tests {
		got := CutMessage(tt.in, tt.limit)
		if got != tt.want || len(got) > tt.limit || !utf8.ValidString(got) {
			t.Errorf("CutMessage(%q, %d) = %q, want %q", tt.in, tt.limit, got, tt.want)
		}
	}
}

// TestResponsesCarryEvents decodes answers as hooks send them: events is optional,
// and an answer without it encodes as before.
func TestResponsesCarryEvents(t *testing.T) {
	var c CompositeResponse
	body := `{"children": [], "events": [{"type": "Warning", "reason": "ConfigInvalid", "message": "spec.size must be positive"}]}`
	if err := json.Unmarshal([]byte(body), &c); err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff([]Event{{Type: "Warning", Reason: "ConfigInvalid", Message: "spec.size must be positive"}}, c.Events); diff != "" {
		t.Errorf("composite events (-want +got):\n%s", diff)
	}
	var d DecoratorResponse
	if err := json.Unmarshal([]byte(`{"labels": {}, "events": [{"reason": "Decorated"}]}`), &d); err != nil {
		t.Fatal(err)
	}
	if len(d.Events) != 1 || d.Events[0].Reason != "Decorated" {
		t.Errorf("decorator events = %+v", d.Events)
	}
	out, _ := json.Marshal(CompositeResponse{})
	if strings.Contains(string(out), "events") {
		t.Errorf("an answer without events encodes them: %s", out)
	}
}
