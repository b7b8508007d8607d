//go:build integration

package main

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	fnv1 "github.com/metalambda/metalambda/internal/apis/metalambda/v1alpha1"
	"github.com/metalambda/metalambda/internal/gateway"
	"github.com/metalambda/metalambda/internal/jsonvalue"
	"github.com/metalambda/metalambda/internal/kubetest"
)

// TestFnRollout: with a rollout in progress (its status written by hand, as the
// engine's rollout driver would), fn rollout status shows the shares, phase, step,
// failures and failing parents; pause, promote and abort land on the Function as
// spec.rollout.paused and the annotations naming the revision; a pause of a paused
// rollout and an abort of a Halted one fail with the gateway's reason.
func TestFnRollout(t *testing.T) {
	c, ns, _ := adminCLI(t)
	functions := env.Resource(gateway.FunctionsGVR, ns)
	source := func(v string) string {
		return fmt.Sprintf(`function sync(request) { return {children: [], status: {v: %q}}; }`, v)
	}
	obj := &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": fnv1.Group + "/" + fnv1.Version, "kind": fnv1.Kind, "metadata": map[string]any{"name": "ro"},
		"spec": map[string]any{"runtime": "javascript", "source": source("v1"), "rollout": map[string]any{"steps": []any{int64(10), int64(50), int64(100)}, "maxFailures": int64(3)}},
	}}
	env.Create(t, gateway.FunctionsGVR, ns, obj)
	revisions := func(n int) fnv1.FunctionStatus {
		var status fnv1.FunctionStatus
		kubetest.Eventually(t, 30*time.Second, fmt.Sprintf("Function ro lists %d live revisions", n), func(ctx context.Context) (bool, error) {
			o, err := env.Get(ctx, gateway.FunctionsGVR, ns, "ro")
			if err != nil {
				return false, err
			}
			_ = jsonvalue.Convert(o.Object["status"], &status)
			return len(status.Revisions) == n && status.Revisions[n-1].Name == status.CurrentRevision, fmt.Errorf("status %v", o.Object["status"])
		})
		return status
	}
	from := revisions(1).CurrentRevision
	stored := env.MustGet(t, gateway.FunctionsGVR, ns, "ro")
	_ = unstructured.SetNestedField(stored.Object, source("v2"), "spec", "source")
	if _, err := functions.Update(kubetest.Context(t), stored, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	to := revisions(2).CurrentRevision

	none := c.run(t, "", "fn", "rollout", "status", "ro").must(t)
	if !strings.Contains(none.out, "Rollout:   none in progress") {
		t.Errorf("status before the driver wrote one:\n%s", none.out)
	}
	writeStatus := func(phase string) {
		t.Helper()
		o := env.MustGet(t, gateway.FunctionsGVR, ns, "ro")
		var status fnv1.FunctionStatus
		_ = jsonvalue.Convert(o.Object["status"], &status)
		status.Revisions[0].Share, status.Revisions[1].Share = 50, 50
		status.Rollout = &fnv1.RolloutStatus{Revision: to, From: from, Step: 1, Phase: phase, Failures: 2, Reason: "HookFailed",
			Message: "2 parents failed on " + to, FailingParents: []string{"CompositeController/web " + ns + "/p1", "CompositeController/web " + ns + "/p2"}}
		var raw map[string]any
		_ = jsonvalue.Convert(status, &raw)
		o.Object["status"] = raw
		if _, err := functions.UpdateStatus(kubetest.Context(t), o, metav1.UpdateOptions{FieldManager: "rollout-driver"}); err != nil {
			t.Fatal(err)
		}
	}
	writeStatus(fnv1.RolloutProgressing)

	out := c.run(t, "", "fn", "rollout", "status", "ro").must(t).out
	for _, want := range []string{
		"Revisions: " + from + " (1) 50%, " + to + " (2) 50%",
		"Rollout:   " + to + " from " + from,
		"Phase:     Progressing",
		"Step:      2 of 3 (50%)",
		"Failures:  2 (maxFailures 3)",
		"Failing parents:\n  CompositeController/web " + ns + "/p1\n  CompositeController/web " + ns + "/p2\n",
		"Reason:    HookFailed",
		"Message:   2 parents failed on " + to,
	} {
		if !strings.Contains(out, want) {
			t.Errorf("fn rollout status does not say %q:\n%s", want, out)
		}
	}

	paused := c.run(t, "", "fn", "rollout", "pause", "ro").must(t)
	if !strings.Contains(paused.err, "function "+ns+"/ro: the rollout of "+to+" paused") {
		t.Errorf("pause said %q", paused.err)
	}
	if p, _, _ := unstructured.NestedBool(env.MustGet(t, gateway.FunctionsGVR, ns, "ro").Object, "spec", "rollout", "paused"); !p {
		t.Error("after fn rollout pause, spec.rollout.paused is not true")
	}
	if again := c.run(t, "", "fn", "rollout", "pause", "ro"); again.code == 0 || !strings.Contains(again.err, "is paused already") {
		t.Errorf("a second pause = exit %d, stderr %q", again.code, again.err)
	}
	c.run(t, "", "fn", "rollout", "promote", "ro").must(t)
	if got := env.MustGet(t, gateway.FunctionsGVR, ns, "ro").GetAnnotations()[fnv1.PromoteAnnotation]; got != to {
		t.Errorf("after fn rollout promote the annotation = %q, want %s", got, to)
	}

	writeStatus(fnv1.RolloutHalted)
	refused := c.run(t, "", "fn", "rollout", "abort", "ro")
	if refused.code == 0 || !strings.Contains(refused.err, "is Halted (HookFailed: 2 parents failed on "+to+")") {
		t.Errorf("abort of a halted rollout = exit %d, stderr %q", refused.code, refused.err)
	}
	c.run(t, "", "fn", "rollout", "resume", "ro").must(t)
	if _, found, _ := unstructured.NestedFieldNoCopy(env.MustGet(t, gateway.FunctionsGVR, ns, "ro").Object, "spec", "rollout", "paused"); found {
		t.Error("after fn rollout resume, spec.rollout.paused is still set")
	}
}
