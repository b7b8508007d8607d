package main

import (
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	fnv1 "github.com/metalambda/metalambda/internal/apis/metalambda/v1alpha1"
)

func TestPrintRollout(t *testing.T) {
	now := time.Date(2026, 11, 27, 10, 0, 0, 0, time.UTC)
	started := metav1.NewTime(now.Add(-90 * time.Second))
	meta := metav1.ObjectMeta{Namespace: "ns", Name: "hello"}
	live := []fnv1.RevisionShare{{Name: "hello-a", Revision: 1, Share: 50}, {Name: "hello-b", Revision: 2, Share: 50}}
	for _, tc := range []struct {
		name string
		fn   fnv1.Function
		want string
	}{
		{"no policy", fnv1.Function{ObjectMeta: meta, Status: fnv1.FunctionStatus{Revisions: live[:1]}}, `
Function:  ns/hello
Revisions: hello-a (1) 50%
Rollout:   none (no spec.rollout: a new revision serves every call at once)
`},
		{"policy, nothing in progress", fnv1.Function{ObjectMeta: meta, Spec: fnv1.FunctionSpec{Rollout: &fnv1.RolloutPolicy{}}}, `
Function:  ns/hello
Revisions: <none yet>
Rollout:   none in progress
`},
		{"progressing with failures", fnv1.Function{ObjectMeta: meta,
			Spec: fnv1.FunctionSpec{Rollout: &fnv1.RolloutPolicy{MaxFailures: 2}},
			Status: fnv1.FunctionStatus{Revisions: live, Rollout: &fnv1.RolloutStatus{
				Revision: "hello-b", From: "hello-a", Step: 1, Phase: fnv1.RolloutProgressing, Failures: 1,
				FailingParents: []string{"CompositeController/web ns/p1"}, StepStartTime: &started,
				Reason: "StepStarted", Message: "50% of the parents on hello-b"}}}, `
Function:  ns/hello
Revisions: hello-a (1) 50%, hello-b (2) 50%
Rollout:   hello-b from hello-a
Phase:     Progressing
Step:      2 of 3 (50%), for 1m30s
Failures:  1 (maxFailures 2)
Failing parents:
  CompositeController/web ns/p1
Reason:    StepStarted
Message:   50% of the parents on hello-b
`},
		{"pause asked, not yet seen", fnv1.Function{ObjectMeta: meta,
			Spec:   fnv1.FunctionSpec{Rollout: &fnv1.RolloutPolicy{Steps: []int32{100}, Paused: true}},
			Status: fnv1.FunctionStatus{Revisions: live, Rollout: &fnv1.RolloutStatus{Revision: "hello-b", From: "hello-a", Phase: fnv1.RolloutProgressing}}}, `
Function:  ns/hello
Revisions: hello-a (1) 50%, hello-b (2) 50%
Rollout:   hello-b from hello-a
Phase:     Progressing (pause asked: spec.rollout.paused)
Step:      1 of 1 (100%)
Failures:  0 (maxFailures 0)
`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var b strings.Builder
			printRollout(&b, &tc.fn, now)
			if diff := cmp.Diff(strings.TrimPrefix(tc.want, "\n"), b.String()); diff != "" {
				t.Errorf("(-want +got):\n%s", diff)
			}
		})
	}
}
