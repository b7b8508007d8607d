//go:build integration

package dashboard_test

import (
	"strings"
	"testing"
	"time"

	"github.com/chromedp/chromedp"
)

// TestDashboardLogin: a wrong token is refused on the login page; the admin's token
// opens the overview, which names the user and lists the bundled operators'
// controllers and functions; a token whose user may list nothing sees none of them
// (the dashboard reads them as that user).
func TestDashboardLogin(t *testing.T) {
	e := platformEnv(t)
	ctx := newBrowser(t)
	run(t, ctx, "log in with a wrong token",
		chromedp.Navigate(e.URL),
		chromedp.WaitVisible(chromedp.CSS(`#token`)),
		chromedp.SendKeys(chromedp.CSS(`#token`), "not-a-token"),
		chromedp.Submit(chromedp.CSS(`#token`)),
		chromedp.WaitVisible(chromedp.CSS(`#login-error`)),
	)
	waitText(t, ctx, `#login-error`, "does not accept this token", 5*time.Second)
	screenshot(t, ctx, "login")

	login(t, ctx, e, e.adminToken(t))
	waitText(t, ctx, `[data-testid=user]`, "system:serviceaccount:metalambda-system:metalambda-dashboard-admin", 5*time.Second)
	waitText(t, ctx, `[data-controller=python-lambda-operator]`, "CompositeController", 30*time.Second)
	waitText(t, ctx, `[data-function="metalambda-system/pythonlambda"]`, "True", 30*time.Second)

	// A user whom RBAC grants nothing logs in (the token is valid) and sees none of
	// the controllers and Functions: the dashboard reads them as that user.
	nobody := e.ServiceAccount(t, "default", "dashboard-nobody")
	other := newBrowser(t)
	login(t, other, e, nobody)
	waitText(t, other, `main`, "No controllers you may see.", 10*time.Second)
	waitText(t, other, `main`, "No Functions you may see.", time.Second)
	shown := value(t, other, "the overview", chromedp.Text(chromedp.CSS(`main`)))
	for _, hidden := range []string{"python-lambda-operator", "metalambda-system/pythonlambda"} {
		if strings.Contains(shown, hidden) {
			t.Errorf("a user granted nothing sees %q on the overview:\n%s", hidden, shown)
		}
	}
}

const wantAnswer = "Hello Martin! Your name in reverse is nitraM"

// TestDashboardPythonLambda follows the PythonLambda sample through every page: the
// overview counts its parent, the controller's page lists it, the parent's page shows
// its children tree in sync and ready, its events and hook calls; the hook calls page
// shows a response diff; "try it" answers through the ingress, driven by the
// keyboard; the overview reads on a narrow screen.
func TestDashboardPythonLambda(t *testing.T) {
	e := platformEnv(t)
	e.apply(t, "operators/pythonlambda/sample.yaml")
	ctx := newBrowser(t)
	login(t, ctx, e, e.adminToken(t))

	// Overview: the engine counts the sample as the controller's parent.
	waitText(t, ctx, `[data-controller=python-lambda-operator] td:nth-of-type(5)`, "1", time.Minute)

	// The controller's page, opened from the overview.
	run(t, ctx, "open the controller", chromedp.Click(chromedp.CSS(`[data-controller=python-lambda-operator] a`)))
	waitText(t, ctx, `h1`, "python-lambda-operator", 10*time.Second)
	waitText(t, ctx, `[data-parent="python-lambda-operator/demo-python-lambda"]`, "True", 3*time.Minute)
	waitText(t, ctx, `#calls-h + p + div .call summary`, "sync", 30*time.Second)
	screenshot(t, ctx, "controller")

	// The parent's page: its children as a tree, ready and in sync, and its events.
	run(t, ctx, "open the parent", chromedp.Click(chromedp.CSS(`[data-parent="python-lambda-operator/demo-python-lambda"] a`)))
	waitText(t, ctx, `h1`, "python-lambda-operator/demo-python-lambda", 10*time.Second)
	waitText(t, ctx, `#children`, "Pod", 30*time.Second)
	waitText(t, ctx, `#children [data-child="Pod/demo-python-lambda-0"]`, "ready: True", time.Minute)
	waitText(t, ctx, `#children [data-child="Pod/demo-python-lambda-0"]`, "in sync", time.Minute)
	waitText(t, ctx, `#children`, "ConfigMap", time.Second)
	waitText(t, ctx, `#children`, "Ingress", time.Second)
	screenshot(t, ctx, "parent")

	// Hook calls: a sync response that changed shows its diff against the previous
	// call for the same parent (the status' ready replicas went up).
	run(t, ctx, "open the hook calls",
		chromedp.Navigate(e.URL+"hookcalls?controller=CompositeController/python-lambda-operator&namespace=python-lambda-operator&parent=demo-python-lambda"),
		chromedp.WaitVisible(chromedp.CSS(`details.call`)),
		chromedp.Click(chromedp.CSS(`details.call:has(pre.diff) > summary`)),
	)
	waitText(t, ctx, `details.call[open] pre.diff`, "readyReplicas", 10*time.Second)
	screenshot(t, ctx, "hookcalls")

	// PythonLambdas: ready replicas, and "try it" with the keyboard alone.
	run(t, ctx, "open the PythonLambdas", chromedp.Navigate(e.URL+"pythonlambdas"))
	waitText(t, ctx, `[data-lambda="python-lambda-operator/demo-python-lambda"]`, "2 / 2", time.Minute)
	waitText(t, ctx, `[data-lambda="python-lambda-operator/demo-python-lambda"]`, "http://example.com/", time.Second)
	run(t, ctx, "try it",
		chromedp.Focus(chromedp.CSS(`#try-python-lambda-operator-demo-python-lambda-path`)),
		chromedp.KeyEvent("\r"),
	)
	waitText(t, ctx, `#try-python-lambda-operator-demo-python-lambda-result [data-testid=try-answer]`, wantAnswer, 30*time.Second)
	screenshot(t, ctx, "pythonlambdas")

	// The overview with the sample's parent counted and its hook latency charted.
	run(t, ctx, "open the overview", chromedp.Navigate(e.URL))
	waitText(t, ctx, `[data-controller=python-lambda-operator]`, "ms", 30*time.Second)
	screenshot(t, ctx, "overview")

	// A narrow screen: the same overview, its navigation wrapped.
	narrow := newBrowser(t, 390, 844)
	login(t, narrow, e, e.adminToken(t))
	waitText(t, narrow, `[data-controller=python-lambda-operator]`, "True", 30*time.Second)
	screenshot(t, narrow, "overview-narrow")
}
