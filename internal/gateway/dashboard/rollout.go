package dashboard

import (
	"errors"
	"net/http"
	"net/url"
	"strings"
	"time"

	"github.com/go-chi/chi/v5"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	fnv1 "github.com/metalambda/metalambda/internal/apis/metalambda/v1alpha1"
	"github.com/metalambda/metalambda/internal/httpapi"
	"github.com/metalambda/metalambda/internal/jsonvalue"
	"github.com/metalambda/metalambda/internal/rollout"
)

// The rollout panel of a function's page, in its live region: the live revisions
// and their shares, where the rollout stands as the rollout driver reports it
// (status.rollout), and the controls that phase takes, which post to the
// gateway's API (POST .../rollout/{action}) as the session's user.

// RolloutPanel is what the rollout panel shows.
type RolloutPanel struct {
	// Policy is whether the function has spec.rollout.
	Policy bool
	// Revisions are the live revisions, oldest first.
	Revisions []LiveRevision
	// Status is status.rollout; nil when no rollout was reported.
	Status *fnv1.RolloutStatus
	// PauseAsked is spec.rollout.paused.
	PauseAsked bool
	// Step is the 1-based step reached, of Steps, at StepShare percent.
	Step, Steps int
	StepShare   int32
	MaxFailures int32
	// StepStart is when the step began; zero when not reported.
	StepStart      time.Time
	FailingParents []FailingParent
	// Actions are the controls the rollout takes now (rollout.Allowed).
	Actions []RolloutButton
}

// RolloutButton is one control: its action, its label, and the question asked
// before it is sent ("" for none).
type RolloutButton struct {
	Action, Label, Confirm string
}

// PhaseClass is the style of the rollout's phase.
func (p RolloutPanel) PhaseClass() string {
	if p.Status == nil {
		return ""
	}
	switch p.Status.Phase {
	case fnv1.RolloutHalted:
		return "bad"
	case fnv1.RolloutPaused:
		return "warn"
	case fnv1.RolloutComplete:
		return "ok"
	}
	return ""
}

// LiveRevision is one live revision and its share; New marks the one rolled out.
type LiveRevision struct {
	Name     string
	Revision int64
	Share    int32
	New      bool
}

// FailingParent is one of status.rollout.failingParents, with its page when the
// text names a controller and a parent.
type FailingParent struct {
	Text, URL string
}

// RolloutBadge is the small rollout mark of a function in the Functions list.
type RolloutBadge struct {
	Phase string
	// Share is the new revision's share, in percent.
	Share int32
}

// rolloutPanel reads the panel of Function u.
func rolloutPanel(u *unstructured.Unstructured) RolloutPanel {
	var f fnv1.Function
	_ = jsonvalue.Convert(u.Object, &f) // a field that does not decode shows as unset
	p := RolloutPanel{Policy: f.Spec.Rollout != nil, Status: f.Status.Rollout}
	for _, r := range f.Status.Revisions {
		isNew := f.Status.Rollout != nil && r.Name == f.Status.Rollout.Revision
		p.Revisions = append(p.Revisions, LiveRevision{Name: r.Name, Revision: r.Revision, Share: r.Share, New: isNew})
	}
	for _, a := range rollout.Allowed(u.GetNamespace()+"/"+u.GetName(), f.Spec.Rollout, f.Status.Rollout) {
		p.Actions = append(p.Actions, rolloutButton(a, f.Status.Rollout))
	}
	if f.Spec.Rollout == nil {
		return p
	}
	p.PauseAsked, p.MaxFailures = f.Spec.Rollout.Paused, f.Spec.Rollout.MaxFailures
	steps := f.Spec.Rollout.StepsOrDefault()
	p.Steps = len(steps)
	if ro := f.Status.Rollout; ro != nil {
		p.Step = int(ro.Step) + 1
		if ro.Step >= 0 && int(ro.Step) < len(steps) {
			p.StepShare = steps[ro.Step]
		}
		if ro.StepStartTime != nil {
			p.StepStart = ro.StepStartTime.Time
		}
		for _, text := range ro.FailingParents {
			p.FailingParents = append(p.FailingParents, FailingParent{Text: text, URL: parentURL(text)})
		}
	}
	return p
}

// rolloutButton is the control of action on the rollout ro (nil for none).
func rolloutButton(action string, ro *fnv1.RolloutStatus) RolloutButton {
	b := RolloutButton{Action: action, Label: strings.ToUpper(action[:1]) + action[1:]}
	revision := ""
	if ro != nil {
		revision = ro.Revision
	}
	switch action {
	case rollout.Promote:
		b.Confirm = "Promote " + revision + " to 100% of the parents now?"
	case rollout.Abort:
		b.Confirm = "Abort the rollout of " + revision + "? The previous revision serves every parent again."
	}
	return b
}

// rolloutBadge is the list's mark of a rollout under way or halted; nil for none
// or a complete one.
func rolloutBadge(u *unstructured.Unstructured) *RolloutBadge {
	var status fnv1.FunctionStatus
	_ = jsonvalue.Convert(u.Object["status"], &status)
	ro := status.Rollout
	if ro == nil || ro.Phase == "" || ro.Phase == fnv1.RolloutComplete {
		return nil
	}
	b := &RolloutBadge{Phase: ro.Phase}
	for _, r := range status.Revisions {
		if r.Name == ro.Revision {
			b.Share = r.Share
		}
	}
	return b
}

// parentURL is the dashboard's page of a failing parent written as
// "<controller kind>/<controller name> <namespace>/<name>" (or "<name>" alone for a
// cluster-scoped parent); "" for text of another shape.
func parentURL(text string) string {
	controller, parent, ok := strings.Cut(text, " ")
	kind, name, ok2 := strings.Cut(controller, "/")
	if !ok || !ok2 || kind == "" || name == "" || parent == "" {
		return ""
	}
	ns, pname, namespaced := strings.Cut(parent, "/")
	if !namespaced {
		ns, pname = "-", parent
	}
	if ns == "" || pname == "" || strings.ContainsAny(pname, "/ ") {
		return ""
	}
	return Prefix + "/controllers/" + url.PathEscape(kind) + "/" + url.PathEscape(name) + "/parents/" + url.PathEscape(ns) + "/" + url.PathEscape(pname)
}

// RolloutOutcome is what a rollout button shows: what was asked, or why it was
// refused.
type RolloutOutcome struct {
	Done, Error string
}

// rolloutDone says what each action asked for.
var rolloutDone = map[string]string{
	rollout.Pause:   "Paused: the shares stay until you resume.",
	rollout.Resume:  "Resumed: the rollout driver takes the next steps.",
	rollout.Promote: "Promote asked: the rollout driver moves the new revision to 100%.",
	rollout.Abort:   "Abort asked: the rollout driver gives every parent back to the previous revision.",
}

// rolloutAction posts a rollout control to the gateway's API as the session's user.
func (d *Dashboard) rolloutAction(w http.ResponseWriter, r *http.Request) {
	ns, name, action := chi.URLParam(r, "namespace"), chi.URLParam(r, "name"), chi.URLParam(r, "action")
	out := &RolloutOutcome{}
	c, ctx, err := d.api(r)
	if err == nil {
		_, err = c.Rollout(ctx, ns, name, action)
	}
	if err != nil {
		out.Error = rolloutError(err)
	} else {
		out.Done = rolloutDone[action]
	}
	p := newFunctionPage(FunctionForm{Namespace: ns, Name: name})
	p.RolloutResult = out
	d.answerWithFunction(w, r, http.StatusOK, p, "rollout-result")
}

// rolloutError is the API's refusal as a person reads it.
func rolloutError(err error) string {
	var api *httpapi.Error
	if !errors.As(err, &api) {
		return err.Error()
	}
	if api.Status == http.StatusForbidden {
		return "Refused: " + api.Message + ". The rollout controls need update on functions."
	}
	return api.Message
}
