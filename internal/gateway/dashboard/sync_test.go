package dashboard

import (
	"bytes"
	"strings"
	"testing"
	"time"

	"github.com/metalambda/metalambda/internal/engineapi"
	"github.com/metalambda/metalambda/web"
)

// The sync buttons post the parent (or all) with the CSRF token, and their outcome
// names what was queued, what waits for its hook, and a refusal's reason.
func TestSyncTemplates(t *testing.T) {
	pages, err := parsePages(web.Templates(), "")
	if err != nil {
		t.Fatal(err)
	}
	syncForm := funcs["syncForm"].(func(string, string, string, string, ...ParentRow) SyncForm)
	held := time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)
	for _, tc := range []struct {
		tmpl string
		data any
		want []string
	}{
		{"sync-form", syncForm("tok", "CompositeController", "", "web"),
			[]string{`hx-post="/ui/controllers/CompositeController/web/sync"`, `name="csrf" value="tok"`, `name="all" value="1"`, "Sync all"}},
		{"sync-form", syncForm("tok", "CompositeController", "", "web", ParentRow{Namespace: "ns", Name: "p", Kind: "App"}),
			[]string{`name="namespace" value="ns"`, `name="parent" value="p"`, `name="kind" value="App"`, "Sync now"}},
		{"sync-form", syncForm("tok", "NamespacedCompositeController", "team-a", "greeter"),
			[]string{`hx-post="/ui/namespaces/team-a/controllers/NamespacedCompositeController/greeter/sync"`, `name="all" value="1"`, "Sync all"}},
		{"sync-form", syncForm("tok", "NamespacedCompositeController", "team-a", "greeter", ParentRow{Namespace: "team-a", Name: "g", Kind: "Greeting"}),
			[]string{`hx-post="/ui/namespaces/team-a/controllers/NamespacedCompositeController/greeter/sync"`, `name="parent" value="g"`, "Sync now"}},
		{"sync-result", SyncOutcome{Result: &engineapi.SyncResult{Queued: 2, NotPermitted: 1, Parents: []engineapi.QueuedParent{
			{ObjectRef: engineapi.ObjectRef{Namespace: "ns", Name: "p"}}, {ObjectRef: engineapi.ObjectRef{Name: "q"}, HeldUntil: &held},
		}}}, []string{"Queued 2 parents", "left out 1 you may not update", "ns/p", "synced at 03:04:05Z"}},
		{"sync-result", SyncOutcome{Error: "Refused: user \"dev\" may not update apps p"}, []string{`role="alert"`, "may not update apps p"}},
	} {
		var buf bytes.Buffer
		if err := pages["controller.html"].ExecuteTemplate(&buf, tc.tmpl, tc.data); err != nil {
			t.Fatal(err)
		}
		if err := pages["parent.html"].ExecuteTemplate(&bytes.Buffer{}, tc.tmpl, tc.data); err != nil {
			t.Fatal(err)
		}
		out := strings.Join(strings.Fields(buf.String()), " ")
		for _, want := range tc.want {
			if !strings.Contains(out, strings.Join(strings.Fields(want), " ")) && !strings.Contains(buf.String(), want) {
				t.Errorf("%s: no %q in\n%s", tc.tmpl, want, buf.String())
			}
		}
	}
}
