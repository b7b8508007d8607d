//go:build integration

package dashboard_test

import (
	"testing"
	"time"

	"github.com/chromedp/chromedp"
)

// TestDashboardLogin: a wrong token is refused on the login page; the admin's token
// opens the overview, which names the user and lists the bundled operators'
// controllers and functions.
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
	screenshot(t, ctx, "overview")
}
