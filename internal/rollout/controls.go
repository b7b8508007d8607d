package rollout

import (
	"fmt"

	fnv1 "github.com/metalambda/metalambda/internal/apis/metalambda/v1alpha1"
)

// The controls a person has on a rollout in progress: the gateway's API takes them
// (POST .../rollout/{action}) and sets what the rollout driver reads; the CLI and
// the dashboard offer them.
const (
	// Pause sets spec.rollout.paused: the shares stay and no step is taken.
	Pause = "pause"
	// Resume clears spec.rollout.paused.
	Resume = "resume"
	// Promote sets fnv1.PromoteAnnotation to the revision being rolled out.
	Promote = "promote"
	// Abort sets fnv1.AbortAnnotation to the revision being rolled out.
	Abort = "abort"
)

// Actions are the controls, in the order they are offered.
var Actions = []string{Pause, Resume, Promote, Abort}

// Refusal says why a rollout does not take an action; Code names the case
// (no_rollout_policy, no_rollout, rollout_halted, rollout_complete,
// already_paused, not_paused).
type Refusal struct {
	Code, Message string
}

func (r *Refusal) Error() string { return r.Message }

// CheckAction is nil when the rollout of Function f (key: namespace/name) takes
// action, else a *Refusal naming why not:
//   - pause, promote and abort need a rollout policy and a status.rollout that
//     is neither Halted nor Complete; pause one not paused yet (spec nor phase);
//   - resume needs spec.rollout.paused, whatever the phase (a pause left over
//     from a rollout that ended would hold the next one).
func CheckAction(action, key string, policy *fnv1.RolloutPolicy, ro *fnv1.RolloutStatus) error {
	if action == Resume {
		if policy == nil || !policy.Paused {
			return refuse("not_paused", "function %s is not paused (spec.rollout.paused is not true): there is nothing to resume", key)
		}
		return nil
	}
	switch {
	case policy == nil:
		return refuse("no_rollout_policy", "function %s has no rollout policy (spec.rollout): a new revision serves every call at once, there is no rollout to %s", key, action)
	case ro == nil || ro.Revision == "":
		return refuse("no_rollout", "function %s has no rollout in progress (status.rollout is not set): there is nothing to %s", key, action)
	case ro.Phase == fnv1.RolloutHalted:
		return refuse("rollout_halted", "the rollout of %s (function %s) is Halted%s: the previous revision serves every parent again; there is nothing to %s (change the code for a new rollout, or roll back)", ro.Revision, key, because(ro), action)
	case ro.Phase == fnv1.RolloutComplete:
		return refuse("rollout_complete", "the rollout of %s (function %s) is Complete: it serves every parent; there is nothing to %s (roll back with metalambda fn rollback)", ro.Revision, key, action)
	case action == Pause && (policy.Paused || ro.Phase == fnv1.RolloutPaused):
		return refuse("already_paused", "the rollout of %s (function %s) is paused already (spec.rollout.paused is true)", ro.Revision, key)
	}
	return nil
}

// Allowed are the actions the rollout takes, in the order of Actions.
func Allowed(key string, policy *fnv1.RolloutPolicy, ro *fnv1.RolloutStatus) []string {
	var out []string
	for _, a := range Actions {
		if CheckAction(a, key, policy, ro) == nil {
			out = append(out, a)
		}
	}
	return out
}

func refuse(code, format string, args ...any) *Refusal {
	return &Refusal{Code: code, Message: fmt.Sprintf(format, args...)}
}

// because is " (reason: message)" of a rollout, or "" when it says neither.
func because(ro *fnv1.RolloutStatus) string {
	switch {
	case ro.Reason != "" && ro.Message != "":
		return " (" + ro.Reason + ": " + ro.Message + ")"
	case ro.Reason != "" || ro.Message != "":
		return " (" + ro.Reason + ro.Message + ")"
	}
	return ""
}
