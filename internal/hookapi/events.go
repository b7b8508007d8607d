package hookapi

import (
	"fmt"
	"regexp"
	"unicode/utf8"
)

// Event is a Kubernetes event a sync or finalize hook asks the engine to record on
// its parent (a DecoratorController's target), as `kubectl describe` shows them.
type Event struct {
	// Type is "Normal" or "Warning"; empty means "Normal".
	Type string `json:"type,omitempty"`
	// Reason is a short UpperCamelCase word a machine can match on, such as
	// "ConfigInvalid".
	Reason string `json:"reason"`
	// Message is for people; it is cut to MaxEventMessageBytes.
	Message string `json:"message,omitempty"`
}

// Event types.
const (
	EventTypeNormal  = "Normal"
	EventTypeWarning = "Warning"
)

// Limits of the events of one answer.
const (
	// MaxEvents is how many events of one answer are considered; the rest are dropped.
	MaxEvents = 10
	// MaxEventReasonLength is the longest reason, Kubernetes' limit.
	MaxEventReasonLength = 128
	// MaxEventMessageBytes is the longest message; a longer one is cut to it, ending
	// in "...". It is the limit of an event's note in events.k8s.io/v1.
	MaxEventMessageBytes = 1024
)

// reasonPattern is UpperCamelCase: a capital letter, then letters and digits.
var reasonPattern = regexp.MustCompile(`^[A-Z][A-Za-z0-9]*$`)

// Validate reports what makes e unfit to record.
func (e Event) Validate() error {
	switch {
	case e.Type != "" && e.Type != EventTypeNormal && e.Type != EventTypeWarning:
		return fmt.Errorf("type %q is not %s or %s", e.Type, EventTypeNormal, EventTypeWarning)
	case e.Reason == "":
		return fmt.Errorf("reason is empty")
	case len(e.Reason) > MaxEventReasonLength:
		return fmt.Errorf("reason is %d characters long; at most %d are allowed", len(e.Reason), MaxEventReasonLength)
	case !reasonPattern.MatchString(e.Reason):
		return fmt.Errorf("reason %q is not UpperCamelCase (a capital letter, then letters and digits, such as ConfigInvalid)", e.Reason)
	}
	return nil
}

// CheckEvents returns the events of an answer to record and what is wrong with the
// others. Only the first MaxEvents are considered: each valid one is kept, its type
// defaulted to Normal and its message cut to MaxEventMessageBytes; an invalid one is
// left out with a problem naming its index; the events past MaxEvents are left out
// with one problem that counts them.
func CheckEvents(events []Event) (valid []Event, problems []string) {
	for i, e := range events[:min(len(events), MaxEvents)] {
		if err := e.Validate(); err != nil {
			problems = append(problems, fmt.Sprintf("events[%d]: %v", i, err))
			continue
		}
		if e.Type == "" {
			e.Type = EventTypeNormal
		}
		e.Message = CutMessage(e.Message, MaxEventMessageBytes)
		valid = append(valid, e)
	}
	if extra := len(events) - MaxEvents; extra > 0 {
		problems = append(problems, fmt.Sprintf("%d events past the first %d were dropped", extra, MaxEvents))
	}
	return valid, problems
}

// CutMessage cuts s to at most limit bytes, ending in "..." when cut, without
// splitting a UTF-8 character.
func CutMessage(s string, limit int) string {
	const ellipsis = "..."
	if len(s) <= limit {
		return s
	}
	end := max(limit-len(ellipsis), 0)
	for end > 0 && !utf8.RuneStart(s[end]) {
		end--
	}
	return s[:end] + ellipsis
}
