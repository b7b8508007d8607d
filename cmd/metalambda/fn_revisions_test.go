package main

import (
	"strings"
	"testing"

	"github.com/metalambda/metalambda/internal/gatewayapi"
)

func TestRollbackTarget(t *testing.T) {
	revs := []gatewayapi.Revision{{Name: "f-e", Revision: 5}, {Name: "f-d", Revision: 4, Current: true}, {Name: "f-b", Revision: 2}}
	for _, tc := range []struct {
		name string
		revs []gatewayapi.Revision
		to   int64
		want string // a revision's name, or an error's text
	}{
		{"default: the one before the current", revs, 0, "f-b"},
		{"default without a current: the one before the newest", []gatewayapi.Revision{{Name: "f-c", Revision: 3}, {Name: "f-a", Revision: 1}}, 0, "f-a"},
		{"--to", revs, 5, "f-e"},
		{"--to not kept", revs, 3, "no revision 3: the revisions kept are 2, 4, 5"},
		{"nothing before", []gatewayapi.Revision{{Name: "f-a", Revision: 1, Current: true}}, 0, "no revision before the current one (1)"},
		{"no revisions", nil, 0, "no revisions recorded yet"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, err := rollbackTarget(tc.revs, tc.to)
			if err != nil {
				if !strings.Contains(err.Error(), tc.want) {
					t.Errorf("error %q, want %q", err, tc.want)
				}
				return
			}
			if got.Name != tc.want {
				t.Errorf("target %s, want %s", got.Name, tc.want)
			}
		})
	}
}
