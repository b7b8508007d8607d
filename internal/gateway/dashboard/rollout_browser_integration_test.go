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

	fnv1 "github.com/metalambda/metalambda/internal/apis/metalambda/v1alpha1"
	"github.com/metalambda/metalambda/internal/gateway"
	"github.com/metalambda/metalambda/internal/jsonvalue"
	"github.com/metalambda/metalambda/internal/kubetest"
)

// TestRolloutButtons: with a rollout in progress (the engine's rollout driver holds
// the new revision at its first step for the step's pause), the Functions list marks
// it and the Function page shows the shares, phase, step and failures; Pause sets
// spec.rollout.paused, and once the driver reports Paused the panel follows live and
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
			"rollout": map[string]any{"steps": []any{int64(10), int64(50), int64(100)}, "pauseSeconds": int64(3600), "maxFailures": int64(3)}},
	}})
	waitLiveRevisions(t, e, ns, "shop", 1)
	stored := e.MustGet(t, gateway.FunctionsGVR, ns, "shop")
	_ = unstructured.SetNestedField(stored.Object, source("v2"), "spec", "source")
	if _, err := functions.Update(kubetest.Context(t), stored, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	to := waitLiveRevisions(t, e, ns, "shop", 2).CurrentRevision

	ctx := newBrowser(t)
	dialogs := make(chan string, 4)
	acceptDialogs(ctx, dialogs)
	login(t, ctx, e, e.adminToken(t))
	row := `tr[data-function="` + ns + `/shop"]`
	step(t, ctx, "open the list", chromedp.Navigate(e.URL+"functions"), chromedp.WaitVisible(chromedp.CSS(row)))
	waitText(t, ctx, row+` [data-testid=rollout-badge]`, "Progressing 10%", 30*time.Second)

	step(t, ctx, "open the function", chromedp.Navigate(e.URL+"functions/"+ns+"/shop"), chromedp.WaitVisible(chromedp.CSS(`[data-testid=rollout-pause]`)))
	waitText(t, ctx, `[data-testid=rollout-phase]`, "Progressing", 10*time.Second)
	waitText(t, ctx, `[data-testid=rollout-step]`, "1 of 3 (10%)", time.Second)
	waitText(t, ctx, `[data-testid=rollout-failures]`, "0 of 3 tolerated", time.Second)
	waitText(t, ctx, `[data-testid=sharebar]`, "2 · 10%", time.Second)
	if n := value(t, ctx, "the buttons", chromedp.Evaluate[int](`document.querySelectorAll('[data-testid=rollout] button').length`)); n != 3 {
		t.Errorf("a progressing rollout offers %d buttons, want 3 (pause, promote, abort)", n)
	}
	screenshot(t, ctx, "functions-rollout")

	step(t, ctx, "pause", chromedp.Click(chromedp.CSS(`[data-testid=rollout-pause]`)))
	waitText(t, ctx, `[data-testid=rollout-result]`, "Paused: the shares stay until you resume.", 10*time.Second)
	if paused, _, _ := unstructured.NestedBool(e.MustGet(t, gateway.FunctionsGVR, ns, "shop").Object, "spec", "rollout", "paused"); !paused {
		t.Fatal("after Pause, spec.rollout.paused is not true")
	}
	// The driver reports Paused; the panel follows without a reload.
	waitText(t, ctx, `[data-testid=rollout-phase]`, "Paused", 30*time.Second)
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
	// The driver halts it: the old revision serves every parent again.
	waitText(t, ctx, `[data-testid=rollout-phase]`, "Halted", 30*time.Second)
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
