//go:build integration

package main

import (
	"encoding/json"
	"regexp"
	"strings"
	"testing"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	"github.com/metalambda/metalambda/internal/gateway"
)

// TestFnHistoryAndRollback: three applies make revisions 1 to 3; history lists them
// newest first with the current one at 100%; rollback goes back to the previous
// revision by default and to any kept one with --to, each time as a new revision
// number of the same ControllerRevision, serving the old code; a revision not kept is
// refused with the ones that are.
func TestFnHistoryAndRollback(t *testing.T) {
	c, ns, _ := adminCLI(t)
	path := writeFile(t, t.TempDir(), "echo.js", echoHooks["echo.js"])
	for _, greeting := range []string{"one", "two", "three"} {
		c.run(t, "", "fn", "apply", "-f", path, "--env", "GREETING="+greeting).must(t)
	}
	greets := func(want string) {
		t.Helper()
		r := c.run(t, "", "fn", "invoke", "echo", "-d", `{"parent": {"metadata": {"name": "p", "uid": "0d6c5a1e-0001-4c2b-9f3a-5e7d8c9b0a1f"}}, "children": {}}`).must(t)
		if got := childName(t, r.out); got != "p-"+want {
			t.Errorf("the function answers %q, want p-%s", got, want)
		}
	}
	greets("three")

	history := c.run(t, "", "fn", "history", "echo").must(t)
	rows := strings.Split(strings.TrimSpace(history.out), "\n")
	if len(rows) != 4 || !regexp.MustCompile(`^REVISION\s+NAME\s+CREATED\s+SHARE\s+CURRENT\s+RUNTIME\s+HANDLER\s+SOURCE$`).MatchString(rows[0]) {
		t.Fatalf("history = \n%s", history.out)
	}
	for i, want := range []string{`^3\s+echo-[0-9a-f]{10}\s+\S+\s+100%\s+\*\s+javascript\s+<default>\s+sha256:[0-9a-f]{12}$`, `^2\s+echo-[0-9a-f]{10}\s+\S+\s+-\s+javascript`, `^1\s+echo-`} {
		if !regexp.MustCompile(want).MatchString(rows[i+1]) {
			t.Errorf("history row %d = %q, want %s", i+1, rows[i+1], want)
		}
	}
	second := strings.Fields(rows[2])[1]

	rolled := c.run(t, "", "fn", "rollback", "echo").must(t)
	if !strings.Contains(rolled.err, "function "+ns+"/echo rolled back to revision 2 ("+second+")") {
		t.Errorf("rollback's stderr = %q", rolled.err)
	}
	greets("two")
	fn := env.MustGet(t, gateway.FunctionsGVR, ns, "echo")
	if greeting, _, _ := unstructured.NestedString(fn.Object, "spec", "env", "GREETING"); greeting != "two" {
		t.Errorf("after the rollback the spec's env GREETING = %q, want two (what kubectl shows)", greeting)
	}

	var list struct {
		Items []struct {
			Name     string `json:"name"`
			Revision int64  `json:"revision"`
			Current  bool   `json:"current"`
			Share    *int32 `json:"share"`
		} `json:"items"`
	}
	out := c.run(t, "", "fn", "history", "echo", "-o", "json").must(t).out
	if err := json.Unmarshal([]byte(out), &list); err != nil {
		t.Fatalf("history -o json: %v\n%s", err, out)
	}
	if len(list.Items) != 3 || list.Items[0].Revision != 4 || list.Items[0].Name != second || !list.Items[0].Current || list.Items[0].Share == nil || *list.Items[0].Share != 100 {
		t.Errorf("after the rollback history = %+v, want revision 4 the reused %s, current at 100%%", list.Items, second)
	}

	c.run(t, "", "fn", "rollback", "echo", "--to", "1").must(t)
	greets("one")

	refused := c.run(t, "", "fn", "rollback", "echo", "--to", "9")
	if refused.code == 0 || !strings.Contains(refused.err, "no revision 9: the revisions kept are 3, 4, 5") {
		t.Errorf("rollback --to 9 = exit %d, stderr %q", refused.code, refused.err)
	}
	if bad := c.run(t, "", "fn", "rollback", "echo", "--to", "0"); bad.code == 0 || !strings.Contains(bad.err, "a revision number is 1 or more") {
		t.Errorf("rollback --to 0 = exit %d, stderr %q", bad.code, bad.err)
	}
}
