//go:build integration

package dashboard_test

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/cdproto/page"
	"github.com/chromedp/chromedp"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/client-go/util/retry"

	fnv1 "github.com/metalambda/metalambda/internal/apis/metalambda/v1alpha1"
	"github.com/metalambda/metalambda/internal/gateway"
	"github.com/metalambda/metalambda/internal/jsonvalue"
	"github.com/metalambda/metalambda/internal/kubetest"
)

// TestRolloutButtons: with a rollout in progress (its status written by hand, as the
// engine's rollout driver would), the Functions list marks it and the Function page
// shows the shares, phase, step, failures and failing parents; Pause sets
// spec.rollout.paused; once the driver reports Paused the panel follows live and
// offers Resume; Abort asks first, then sets the abort annotation to the revision.
func TestRolloutButtons(t *testing.T) {
	e := platformEnv(t)
	ns := e.Namespace(t)
	functions := e.Dynamic.Resource(gateway.FunctionsGVR).Namespace(ns)
	source := func(v string) string {
		return fmt.Sprintf("function sync(request) {\n  return {children: [], status: {version: %q}};\n}\n", v)
	}
	e.Create(t, gateway.FunctionsGVR, ns, &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": fnv1.Group + "/" + fnv1.Version, "kind": fnv1.Kind, "metadata": map[string]any{"name": "shop"},
		"spec": map[string]any{"runtime": "javascript", "source": source("v1"),
			"rollout": map[string]any{"steps": []any{int64(10), int64(50), int64(100)}, "pauseSeconds": int64(300), "maxFailures": int64(3)}},
	}})
	status := waitLiveRevisions(t, e, ns, "shop", 1)
	from := status.CurrentRevision
	stored := e.MustGet(t, gateway.FunctionsGVR, ns, "shop")
	_ = unstructured.SetNestedField(stored.Object, source("v2"), "spec", "source")
	if _, err := functions.Update(kubetest.Context(t), stored, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	to := waitLiveRevisions(t, e, ns, "shop", 2).CurrentRevision
	started := metav1.NewTime(time.Now().Add(-2 * time.Hour)) // "2h ago" stays put while the test runs
	writeRollout(t, e, ns, "shop", func(s *fnv1.FunctionStatus) {
		s.Revisions[0].Share, s.Revisions[1].Share = 50, 50
		s.Rollout = &fnv1.RolloutStatus{Revision: to, From: from, Step: 1, Phase: fnv1.RolloutProgressing, Failures: 2, StepStartTime: &started,
			Reason: "ParentsFailing", Message: "2 parents failed to sync on " + to,
			FailingParents: []string{"CompositeController/shops " + ns + "/berlin", "CompositeController/shops " + ns + "/paris"}}
	})

	ctx := newBrowser(t)
	dialogs := make(chan string, 4)
	acceptDialogs(ctx, dialogs)
	login(t, ctx, e, e.adminToken(t))
	row := `tr[data-function="` + ns + `/shop"]`
	step(t, ctx, "open the list", chromedp.Navigate(e.URL+"functions"), chromedp.WaitVisible(chromedp.CSS(row+` [data-testid=rollout-badge]`)))
	waitText(t, ctx, row+` [data-testid=rollout-badge]`, "Progressing 50%", 10*time.Second)

	step(t, ctx, "open the function", chromedp.Navigate(e.URL+"functions/"+ns+"/shop"), chromedp.WaitVisible(chromedp.CSS(`[data-testid=rollout-pause]`)))
	waitText(t, ctx, `[data-testid=rollout-phase]`, "Progressing", 10*time.Second)
	waitText(t, ctx, `[data-testid=rollout-step]`, "2 of 3 (50%)", time.Second)
	waitText(t, ctx, `[data-testid=rollout-failures]`, "2 of 3 tolerated", time.Second)
	waitText(t, ctx, `[data-testid=failing-parents]`, "CompositeController/shops "+ns+"/paris", time.Second)
	waitText(t, ctx, `[data-testid=sharebar]`, "2 · 50%", time.Second)
	href := value(t, ctx, "a failing parent's link", chromedp.AttributeValue(chromedp.CSS(`[data-testid=failing-parents] a`), "href"))
	if href.Value != "/ui/controllers/CompositeController/shops/parents/"+ns+"/berlin" {
		t.Errorf("the failing parent links to %q", href.Value)
	}
	if n := value(t, ctx, "the buttons", chromedp.Evaluate[int](`document.querySelectorAll('[data-testid=rollout] button').length`)); n != 3 {
		t.Errorf("a progressing rollout offers %d buttons, want 3 (pause, promote, abort)", n)
	}
	screenshot(t, ctx, "functions-rollout")

	step(t, ctx, "pause", chromedp.Click(chromedp.CSS(`[data-testid=rollout-pause]`)))
	waitText(t, ctx, `[data-testid=rollout-result]`, "Paused: the shares stay until you resume.", 10*time.Second)
	if paused, _, _ := unstructured.NestedBool(e.MustGet(t, gateway.FunctionsGVR, ns, "shop").Object, "spec", "rollout", "paused"); !paused {
		t.Fatal("after Pause, spec.rollout.paused is not true")
	}
	writeRollout(t, e, ns, "shop", func(s *fnv1.FunctionStatus) {
		s.Rollout.Phase, s.Rollout.Reason, s.Rollout.Message = fnv1.RolloutPaused, "Paused", "paused by a person"
	})
	waitText(t, ctx, `[data-testid=rollout-phase]`, "Paused", 15*time.Second)
	step(t, ctx, "see resume", chromedp.WaitVisible(chromedp.CSS(`[data-testid=rollout-resume]`)))

	step(t, ctx, "abort", chromedp.Click(chromedp.CSS(`[data-testid=rollout-abort]`)))
	select {
	case msg := <-dialogs:
		if !strings.Contains(msg, "Abort the rollout of "+to) {
			t.Errorf("abort asked %q", msg)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("abort asked nothing before it was sent")
	}
	waitText(t, ctx, `[data-testid=rollout-result]`, "Abort asked", 10*time.Second)
	if got := e.MustGet(t, gateway.FunctionsGVR, ns, "shop").GetAnnotations()[fnv1.AbortAnnotation]; got != to {
		t.Errorf("after Abort the annotation %s = %q, want %s", fnv1.AbortAnnotation, got, to)
	}
}

// acceptDialogs accepts every JavaScript dialog the page opens (htmx's hx-confirm
// asks with confirm()), sending its message to messages.
func acceptDialogs(ctx context.Context, messages chan<- string) {
	dialogs := chromedp.Events(ctx, page.JavascriptDialogOpening)
	go func() {
		for ev, err := range dialogs {
			if err != nil {
				return
			}
			select {
			case messages <- ev.Message:
			default:
			}
			go func() {
				_, _ = chromedp.Call(ctx, page.HandleJavaScriptDialog, page.HandleJavaScriptDialogParams{Accept: true})
			}()
		}
	}()
}

// waitLiveRevisions waits until the function's status lists n live revisions, the
// current one last, and returns the status.
func waitLiveRevisions(t *testing.T, e *env, ns, name string, n int) fnv1.FunctionStatus {
	t.Helper()
	var status fnv1.FunctionStatus
	kubetest.Eventually(t, time.Minute, fmt.Sprintf("Function %s lists %d live revisions", name, n), func(ctx context.Context) (bool, error) {
		o, err := e.Get(ctx, gateway.FunctionsGVR, ns, name)
		if err != nil {
			return false, err
		}
		status = fnv1.FunctionStatus{}
		_ = jsonvalue.Convert(o.Object["status"], &status)
		ok := len(status.Revisions) == n && status.Revisions[n-1].Name == status.CurrentRevision
		return ok, fmt.Errorf("status %v", o.Object["status"])
	})
	return status
}

// writeRollout changes the function's status with change, from the latest object,
// as the rollout driver does (the gateway writes the same status).
func writeRollout(t *testing.T, e *env, ns, name string, change func(*fnv1.FunctionStatus)) {
	t.Helper()
	functions := e.Dynamic.Resource(gateway.FunctionsGVR).Namespace(ns)
	err := retry.RetryOnConflict(retry.DefaultRetry, func() error {
		o, err := functions.Get(kubetest.Context(t), name, metav1.GetOptions{})
		if err != nil {
			return err
		}
		var status fnv1.FunctionStatus
		if err := jsonvalue.Convert(o.Object["status"], &status); err != nil {
			return err
		}
		change(&status)
		var raw map[string]any
		if err := jsonvalue.Convert(status, &raw); err != nil {
			return err
		}
		o.Object["status"] = raw
		_, err = functions.UpdateStatus(kubetest.Context(t), o, metav1.UpdateOptions{FieldManager: "rollout-driver"})
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
}
