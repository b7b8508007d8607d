package rollout

import (
	"fmt"
	"testing"

	fnv1 "github.com/metalambda/metalambda/internal/apis/metalambda/v1alpha1"
)

func TestAllowed(t *testing.T) {
	policy, paused := &fnv1.RolloutPolicy{}, &fnv1.RolloutPolicy{Paused: true}
	ro := func(phase string) *fnv1.RolloutStatus { return &fnv1.RolloutStatus{Revision: "f-b", Phase: phase} }
	for _, tc := range []struct {
		name   string
		policy *fnv1.RolloutPolicy
		status *fnv1.RolloutStatus
		want   string
	}{
		{"no policy", nil, nil, "[]"},
		{"no rollout", policy, nil, "[]"},
		{"no rollout, a pause left", paused, nil, "[resume]"},
		{"progressing", policy, ro(fnv1.RolloutProgressing), "[pause promote abort]"},
		{"pause asked, not seen yet", paused, ro(fnv1.RolloutProgressing), "[resume promote abort]"},
		{"paused", paused, ro(fnv1.RolloutPaused), "[resume promote abort]"},
		{"halted", policy, ro(fnv1.RolloutHalted), "[]"},
		{"complete, a pause left", paused, ro(fnv1.RolloutComplete), "[resume]"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := fmt.Sprint(Allowed("ns/f", tc.policy, tc.status)); got != tc.want {
				t.Errorf("Allowed = %s, want %s", got, tc.want)
			}
		})
	}
}
