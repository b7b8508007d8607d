package dashboard

import (
	"fmt"
	"testing"
	"time"
)

// TestSessionsAreBounded: logging in again and again with one token keeps its
// newest sessions only, and many tokens together keep the newest of all; the ones
// that go are the oldest, and a session of another token is untouched by the first.
func TestSessionsAreBounded(t *testing.T) {
	now := time.Unix(1000, 0)
	ss := newSessions(time.Hour, func() time.Time { return now })
	ss.perToken, ss.total = 3, 10
	tick := func() { now = now.Add(time.Second) }

	other := ss.add(&Session{Token: "other"})
	tick()
	var mine []*Session
	for range 5 {
		mine = append(mine, ss.add(&Session{Token: "mine"}))
		tick()
	}
	for i, s := range mine {
		if kept := ss.get(s.ID) != nil; kept != (i >= 2) {
			t.Errorf("session %d of 5 of one token kept = %v, want only the newest 3", i, kept)
		}
	}
	if ss.get(other.ID) == nil {
		t.Error("another token's session was evicted")
	}

	var many []*Session
	for i := range 20 {
		many = append(many, ss.add(&Session{Token: fmt.Sprint("token-", i)}))
		tick()
	}
	if n := len(ss.byID); n != ss.total {
		t.Errorf("%d live sessions, want the bound of %d", n, ss.total)
	}
	for i, s := range many {
		if kept := ss.get(s.ID) != nil; kept != (i >= 10) {
			t.Errorf("session %d of 20 tokens kept = %v, want only the newest 10", i, kept)
		}
	}
}
