//go:build integration

package dashboard_test

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/cdproto/cdp"
	"github.com/chromedp/cdproto/input"
	"github.com/chromedp/chromedp"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	"github.com/metalambda/metalambda/internal/gateway"
)

// greetJS answers a parent with a ConfigMap child greeting it; the parent named b is
// greeted with greetingB.
const greetJS = `function sync(request) {
  const name = request.parent.metadata.name;
  const greeting = name === "b" ? %q : "hello";
  return {children: [{apiVersion: "v1", kind: "ConfigMap", metadata: {name: name + "-greeting"}, data: {greeting: greeting}}]};
}
`

// brokenJS does not compile: line 3, column 20 is an unexpected ";".
const brokenJS = `function sync(request) {
  const name = request.parent.metadata.name;
  const greeting = ;
  return {children: []};
}
`

// TestFunctionPages is the Functions flow of the dashboard: log in; create a
// JavaScript function with a syntax error and see the error at its line, in the editor
// and in text; fix it; test-invoke it; see the call in the history; edit it so that
// one recorded call's answer changes and see replay flag exactly that call, with its
// diff, before saving.
func TestFunctionPages(t *testing.T) {
	e := platformEnv(t)
	ctx := newBrowser(t)
	login(t, ctx, e, e.adminToken(t))
	screenshot(t, ctx, "functions-login")

	// A new function, from the JavaScript starter, with a syntax error.
	step(t, ctx, "open the new function page",
		chromedp.Navigate(e.URL+"functions"),
		chromedp.WaitVisible(chromedp.CSS(`table[data-testid=functions]`)),
		chromedp.Click(chromedp.CSS(`a[href="/ui/functions/new"]`)),
		chromedp.WaitVisible(chromedp.CSS(`.cm-content`)),
	)
	if src := editorText(t, ctx); !strings.Contains(src, "function sync(request)") {
		t.Fatalf("the new function's editor does not hold the starter hook:\n%s", src)
	}
	step(t, ctx, "type a name and a source that does not compile",
		chromedp.SendKeys(chromedp.CSS(`#fn-name`), "greet"),
		typeSource(brokenJS),
		chromedp.Click(chromedp.CSS(`#save`)),
		chromedp.WaitVisible(chromedp.CSS(`#save-result [data-testid=problems]`)),
		chromedp.WaitVisible(chromedp.CSS(`.cm-lintRange-error`)),
	)
	waitText(t, ctx, `#save-result`, "Line 3, column 20:", 5*time.Second)
	waitText(t, ctx, `#save-result`, "Unexpected token ;", 5*time.Second)
	if line := value(t, ctx, "the line of the editor's error mark", chromedp.Evaluate[int](markedLine)); line != 3 {
		t.Errorf("the editor marks line %d, want 3", line)
	}
	screenshot(t, ctx, "functions-compile-error")

	// The editor keeps an undo history: the fix typed, undone and redone.
	fixed := fmt.Sprintf(greetJS, "hello")
	step(t, ctx, "type the fix and undo it",
		typeSource(fixed),
		chromedp.KeyEvent("z", chromedp.KeyModifiers(chromedp.ModifierCtrl)),
	)
	if src := editorText(t, ctx); src != brokenJS {
		t.Errorf("after undo the editor holds:\n%s\nwant the source before the fix", src)
	}
	step(t, ctx, "redo the fix", chromedp.KeyEvent("y", chromedp.KeyModifiers(chromedp.ModifierCtrl)))
	if src := editorText(t, ctx); src != fixed {
		t.Errorf("after redo the editor holds:\n%s\nwant the fix", src)
	}

	// Fixed, it is created and served.
	step(t, ctx, "fix the source and create the function",
		chromedp.Click(chromedp.CSS(`#save`)),
		chromedp.WaitVisible(chromedp.CSS(`[data-testid=function-name]`)),
	)
	waitText(t, ctx, `[data-testid=function-name]`, "default/greet", 5*time.Second)
	waitText(t, ctx, `[data-testid=ready]`, "True", 30*time.Second)
	screenshot(t, ctx, "functions-created")

	// A test call with the template request, then one per parent a, b and c.
	step(t, ctx, "test-invoke with the template request",
		chromedp.Click(chromedp.CSS(`#use-template`)),
		chromedp.Click(chromedp.CSS(`#test`)),
	)
	waitText(t, ctx, `#test-result`, "Answered in", 30*time.Second)
	waitText(t, ctx, `[data-testid=test-response]`, `"world-greeting"`, 5*time.Second)
	screenshot(t, ctx, "functions-test")
	for _, parent := range []string{"a", "b", "c"} {
		req := fmt.Sprintf(`{"parent": {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": %q, "namespace": "default"}}, "children": {}}`, parent)
		step(t, ctx, "test-invoke for parent "+parent,
			chromedp.SetValue(chromedp.CSS(`#test-request`), req),
			chromedp.Click(chromedp.CSS(`#test`)),
		)
		waitText(t, ctx, `[data-testid=test-response]`, `"`+parent+`-greeting"`, 30*time.Second)
	}

	// The calls are in the history, live, newest first.
	waitText(t, ctx, `table[data-testid=history] tr[data-call="0"]`, "ConfigMap default/c", 30*time.Second)
	waitText(t, ctx, `table[data-testid=history] tr[data-call="3"]`, "Greeter default/world", 5*time.Second)
	screenshot(t, ctx, "functions-history")

	// Edited so that only b's answer changes, the unsaved source is replayed.
	step(t, ctx, "edit the source and replay it",
		typeSource(fmt.Sprintf(greetJS, "bonjour")),
		chromedp.SetValue(chromedp.CSS(`#replay-limit`), "4"),
		chromedp.Click(chromedp.CSS(`#replay`)),
		chromedp.WaitVisible(chromedp.CSS(`[data-testid=replay-summary]`)),
	)
	waitText(t, ctx, `[data-testid=replay-summary]`, "1 of 4", 5*time.Second)
	changed := value(t, ctx, "the changed rows", chromedp.Evaluate[[]string](
		`Array.from(document.querySelectorAll('table[data-testid=replay] tr[data-changed=true] td:nth-child(3)'), td => td.textContent.trim())`))
	if len(changed) != 1 || changed[0] != "ConfigMap default/b" {
		t.Errorf("replay flags the calls of %q, want exactly ConfigMap default/b", changed)
	}
	waitText(t, ctx, `table[data-testid=replay] tr[data-changed=true] [data-testid=diff]`, `+        "greeting": "bonjour"`, 5*time.Second)
	if diff := value(t, ctx, "the diff", chromedp.Text(chromedp.CSS(`[data-testid=diff]`))); !strings.Contains(diff, `-        "greeting": "hello"`) {
		t.Errorf("the diff lacks the old answer:\n%s", diff)
	}
	if stored := storedSource(t, e, "default", "greet"); strings.Contains(stored, "bonjour") {
		t.Errorf("replay saved the source")
	}
	screenshot(t, ctx, "functions-replay")

	// Saved at last.
	step(t, ctx, "save the edited source",
		chromedp.Click(chromedp.CSS(`#save`)),
		chromedp.WaitVisible(chromedp.CSS(`[data-testid=saved]`)),
	)
	if stored := storedSource(t, e, "default", "greet"); !strings.Contains(stored, "bonjour") {
		t.Errorf("the saved source is not the edited one:\n%s", stored)
	}

	// The list shows it, served.
	step(t, ctx, "open the list", chromedp.Navigate(e.URL+"functions"))
	waitText(t, ctx, `tr[data-function="default/greet"]`, "True", 30*time.Second)
	screenshot(t, ctx, "functions-list")
}

// step runs browser actions within a minute like run, and on failure saves a
// screenshot and logs where the browser is and what the page says.
func step(t *testing.T, ctx context.Context, what string, actions ...chromedp.Action[chromedp.Void]) {
	t.Helper()
	sctx, cancel := context.WithTimeout(ctx, time.Minute)
	defer cancel()
	if err := chromedp.Do(sctx, actions...); err != nil {
		dctx, cancel := context.WithTimeout(ctx, 10*time.Second)
		defer cancel()
		page, _ := chromedp.Run(dctx, chromedp.Evaluate[string](`location.href + "\n" + document.body.innerText.slice(0, 4000)`))
		if png, err := chromedp.Run(dctx, chromedp.FullScreenshot(100)); err == nil {
			_ = os.WriteFile(filepath.Join(t.ArtifactDir(), "failed.png"), png, 0o644)
		}
		t.Fatalf("%s: %v\nthe page:\n%s", what, err, page)
	}
}

// markedLine is the 1-based line of the editor that holds its first error mark.
const markedLine = `(() => {
  const mark = document.querySelector('.cm-lintRange-error');
  const lines = Array.from(document.querySelectorAll('.cm-content .cm-line'));
  return lines.findIndex((l) => l.contains(mark)) + 1;
})()`

// typeSource replaces the editor's text as a user would: select all, then type (as
// text input, so that the editor's bracket closing and indenting leave it as it is).
func typeSource(src string) chromedp.Action[chromedp.Void] {
	return chromedp.Steps(
		chromedp.Focus(chromedp.CSS(`.cm-content`)),
		chromedp.KeyEvent("a", chromedp.KeyModifiers(chromedp.ModifierCtrl)),
		chromedp.Func(func(ctx context.Context, t *chromedp.Target) error {
			_, err := cdp.Call(ctx, t, input.InsertText, input.InsertTextParams{Text: src})
			return err
		}),
	)
}

// editorText is the text the page's editor holds (the textarea it keeps in step).
func editorText(t *testing.T, ctx context.Context) string {
	t.Helper()
	return value(t, ctx, "the editor's text", chromedp.Value(chromedp.CSS(`textarea[data-editor]`)))
}

// storedSource is spec.source of a Function as the API server has it.
func storedSource(t *testing.T, e *env, ns, name string) string {
	t.Helper()
	u, err := e.Dynamic.Resource(gateway.FunctionsGVR).Namespace(ns).Get(context.Background(), name, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	src, _, _ := unstructured.NestedString(u.Object, "spec", "source")
	return src
}
