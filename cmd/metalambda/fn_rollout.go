package main

import (
	"context"
	"fmt"
	"io"
	"strings"
	"time"

	"github.com/spf13/cobra"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	fnv1 "github.com/metalambda/metalambda/internal/apis/metalambda/v1alpha1"
	"github.com/metalambda/metalambda/internal/jsonvalue"
	"github.com/metalambda/metalambda/internal/rollout"
)

func (f *fnCommand) rolloutCommand() *cobra.Command {
	c := &cobra.Command{
		Use:   "rollout",
		Short: "Show and steer a function's rollout of a new revision",
		Long: `Show and steer the rollout of a function's new revision (a function with spec.rollout;
see docs/rollouts.md). The engine's rollout driver moves the shares and reports in
status.rollout; these verbs ask it to act, through the gateway, as the caller (who
needs update on functions):

  pause    sets spec.rollout.paused: the shares stay, no step is taken
  resume   clears it
  promote  moves the new revision to 100% at once (annotation metalambda.dev/rollout-promote)
  abort    halts the rollout: the previous revision serves every parent again
           (annotation metalambda.dev/rollout-abort)

A rollout that is Halted or Complete takes no pause, promote or abort: the gateway
refuses with the reason.`,
		Args: unknownCommand,
		RunE: func(c *cobra.Command, _ []string) error { return noCommand(c) },
	}
	c.AddCommand(f.rolloutStatusCommand())
	for _, action := range rollout.Actions {
		c.AddCommand(f.rolloutActionCommand(action))
	}
	return c
}

func (f *fnCommand) rolloutStatusCommand() *cobra.Command {
	return &cobra.Command{
		Use:   "status NAME",
		Short: "Show where a function's rollout stands",
		Long: `Show where a function's rollout stands: the live revisions and their shares, the
phase, the step, the failures counted against maxFailures, the failing parents, and
the driver's reason and message.`,
		Example:           `  metalambda fn rollout status hello`,
		Args:              exactArgs("NAME"),
		ValidArgsFunction: f.completeNames,
		RunE: func(cmd *cobra.Command, args []string) error {
			return f.run(cmd, func(ctx context.Context, c *gatewayClient) error {
				obj, err := c.get(ctx, args[0])
				if err != nil {
					return err
				}
				fn, err := decodeFunction(obj)
				if err != nil {
					return err
				}
				printRollout(f.out, fn, time.Now())
				return nil
			})
		},
	}
}

// rolloutActionHelp is each action's short help and what is said once it is done.
var rolloutActionHelp = map[string]struct{ short, done string }{
	rollout.Pause:   {"Pause a function's rollout at its current step", "paused (spec.rollout.paused: true): the shares stay until you resume"},
	rollout.Resume:  {"Resume a paused rollout", "resumed (spec.rollout.paused cleared)"},
	rollout.Promote: {"Move a rollout's new revision to 100% at once", "to be promoted: the rollout driver moves it to 100%"},
	rollout.Abort:   {"Abort a rollout: the previous revision serves every parent again", "to be aborted: the rollout driver gives every parent back to the previous revision"},
}

func (f *fnCommand) rolloutActionCommand(action string) *cobra.Command {
	help := rolloutActionHelp[action]
	return &cobra.Command{
		Use:               action + " NAME",
		Short:             help.short,
		Example:           "  metalambda fn rollout " + action + " hello",
		Args:              exactArgs("NAME"),
		ValidArgsFunction: f.completeNames,
		RunE: func(cmd *cobra.Command, args []string) error {
			return f.run(cmd, func(ctx context.Context, c *gatewayClient) error {
				obj, err := c.rollout(ctx, args[0], action)
				if err != nil {
					return err
				}
				what := "the rollout"
				if rev, _, _ := unstructured.NestedString(obj.Object, "status", "rollout", "revision"); rev != "" {
					what += " of " + rev
				}
				fmt.Fprintf(f.err, "function %s/%s: %s %s\n", c.namespace, args[0], what, help.done)
				return nil
			})
		},
	}
}

func decodeFunction(obj *unstructured.Unstructured) (*fnv1.Function, error) {
	var fn fnv1.Function
	if err := jsonvalue.Convert(obj.Object, &fn); err != nil {
		return nil, fmt.Errorf("function %s/%s: read it: %w", obj.GetNamespace(), obj.GetName(), err)
	}
	return &fn, nil
}

// printRollout writes where fn's rollout stands, for a person.
func printRollout(w io.Writer, fn *fnv1.Function, now time.Time) {
	fmt.Fprintf(w, "Function:  %s/%s\n", fn.Namespace, fn.Name)
	fmt.Fprintf(w, "Revisions: %s\n", shares(fn.Status.Revisions))
	ro, policy := fn.Status.Rollout, fn.Spec.Rollout
	if policy == nil {
		fmt.Fprintln(w, "Rollout:   none (no spec.rollout: a new revision serves every call at once)")
	}
	if ro == nil {
		if policy != nil {
			fmt.Fprintln(w, "Rollout:   none in progress")
		}
		return
	}
	fmt.Fprintf(w, "Rollout:   %s from %s\n", orNone(ro.Revision), orNone(ro.From))
	phase := ro.Phase
	if policy != nil && policy.Paused && phase != fnv1.RolloutPaused {
		phase += " (pause asked: spec.rollout.paused)"
	}
	fmt.Fprintf(w, "Phase:     %s\n", orNone(phase))
	if policy != nil {
		steps := policy.StepsOrDefault()
		step := fmt.Sprintf("%d of %d", ro.Step+1, len(steps))
		if int(ro.Step) < len(steps) && ro.Step >= 0 {
			step += fmt.Sprintf(" (%d%%)", steps[ro.Step])
		}
		if ro.StepStartTime != nil {
			step += ", for " + since(now, ro.StepStartTime.Time)
		}
		fmt.Fprintf(w, "Step:      %s\n", step)
		fmt.Fprintf(w, "Failures:  %d (maxFailures %d)\n", ro.Failures, policy.MaxFailures)
	}
	if len(ro.FailingParents) > 0 {
		fmt.Fprintln(w, "Failing parents:")
		for _, p := range ro.FailingParents {
			fmt.Fprintf(w, "  %s\n", p)
		}
	}
	if ro.Reason != "" {
		fmt.Fprintf(w, "Reason:    %s\n", ro.Reason)
	}
	if ro.Message != "" {
		fmt.Fprintf(w, "Message:   %s\n", ro.Message)
	}
}

// shares lists live revisions as "name (number) share%", oldest first.
func shares(revs []fnv1.RevisionShare) string {
	if len(revs) == 0 {
		return "<none yet>"
	}
	parts := make([]string, 0, len(revs))
	for _, r := range revs {
		parts = append(parts, fmt.Sprintf("%s (%d) %d%%", r.Name, r.Revision, r.Share))
	}
	return strings.Join(parts, ", ")
}

func orNone(s string) string {
	if s == "" {
		return "<none>"
	}
	return s
}

func since(now, t time.Time) string {
	return now.Sub(t).Truncate(time.Second).String()
}
