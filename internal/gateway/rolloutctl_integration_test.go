//go:build integration

package gateway

import (
	"fmt"
	"net/http"
	"strings"
	"testing"
	"time"

	rbacv1 "k8s.io/api/rbac/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	fnv1 "github.com/metalambda/metalambda/internal/apis/metalambda/v1alpha1"
	"github.com/metalambda/metalambda/internal/jsonvalue"
	"github.com/metalambda/metalambda/internal/kubetest"
)

// writeRollout writes status.rollout of the function's current revision, from its
// previous one, in phase, with the shares given, from the latest object: what the
// engine's rollout driver does.
func writeRollout(t *testing.T, ns, name, from, phase string, shares map[string]int32) {
	t.Helper()
	obj := env.MustGet(t, FunctionsGVR, ns, name)
	status := functionStatus(obj)
	for i := range status.Revisions {
		status.Revisions[i].Share = shares[status.Revisions[i].Name]
	}
	status.Rollout = &fnv1.RolloutStatus{Revision: status.CurrentRevision, From: from, Step: 0, Phase: phase,
		Reason: "TooManyFailures", Message: "2 parents failed on the new revision", Failures: 2,
		FailingParents: []string{"CompositeController/web " + ns + "/p1"}}
	var raw map[string]any
	if err := jsonvalue.Convert(status, &raw); err != nil {
		t.Fatal(err)
	}
	obj.Object["status"] = raw
	if _, err := env.Resource(FunctionsGVR, ns).UpdateStatus(kubetest.Context(t), obj, metav1.UpdateOptions{FieldManager: "rollout-driver"}); err != nil {
		t.Fatal(err)
	}
}

// TestRolloutControls: the rollout controls of the API set spec.rollout.paused and
// the promote and abort annotations, naming the revision status.rollout names, on
// the real object, as the caller; they refuse, with the reason, a function with no
// rollout in progress, a pause of a paused rollout, and any action on a Halted or
// Complete rollout; a user who may read functions but not update them is refused;
// an unknown action is a 400 and an unknown function a 404.
func TestRolloutControls(t *testing.T) {
	g := startGateway(t, func(o *Options) { o.AuthCacheTTL = time.Millisecond })
	ns := env.Namespace(t)
	base := "/v1/namespaces/" + ns + "/functions"
	fn := func(version string) map[string]any {
		return map[string]any{"metadata": map[string]any{"name": "ro"}, "spec": map[string]any{
			"runtime": "javascript", "source": fmt.Sprintf(echoJS, version),
			"rollout": map[string]any{"steps": []int{10, 50, 100}, "maxFailures": 1},
		}}
	}
	revName := func(version string) string {
		return RevisionName("ro", fnv1.FunctionSpec{Runtime: "javascript", Source: fmt.Sprintf(echoJS, version)})
	}
	if r := g.do(t, "POST", base, g.token, fn("v1")); r.status != http.StatusCreated {
		t.Fatalf("create = %d %s", r.status, r.raw)
	}
	waitRevisions(t, ns, "ro", revName("v1"), map[string]int32{revName("v1"): 100})
	action := func(name, what, token string) reply {
		return g.do(t, "POST", base+"/"+name+"/rollout/"+what, token, nil)
	}
	expect := func(r reply, status int, code, message string) {
		t.Helper()
		if r.status != status || (code != "" && r.body["error"] != code) || !strings.Contains(fmt.Sprint(r.body["message"]), message) {
			t.Errorf("answer %d %s, want %d %s %q", r.status, r.raw, status, code, message)
		}
	}
	expect(action("ro", "pause", g.token), http.StatusConflict, "no_rollout", "has no rollout in progress (status.rollout is not set): there is nothing to pause")

	if r := g.do(t, "PUT", base+"/ro", g.token, fn("v2")); r.status != http.StatusOK {
		t.Fatalf("update = %d %s", r.status, r.raw)
	}
	waitRevisions(t, ns, "ro", revName("v2"), map[string]int32{revName("v1"): 100, revName("v2"): 0})
	writeRollout(t, ns, "ro", revName("v1"), fnv1.RolloutProgressing, map[string]int32{revName("v1"): 90, revName("v2"): 10})

	stored := func() *unstructured.Unstructured { return env.MustGet(t, FunctionsGVR, ns, "ro") }
	expect(action("ro", "pause", g.token), http.StatusOK, "", "")
	if paused, _, _ := unstructured.NestedBool(stored().Object, "spec", "rollout", "paused"); !paused {
		t.Errorf("after pause spec.rollout = %v", stored().Object["spec"].(map[string]any)["rollout"])
	}
	expect(action("ro", "pause", g.token), http.StatusConflict, "already_paused", "is paused already")

	// A reader: get and list, no update.
	reader := &rbacv1.Role{ObjectMeta: metav1.ObjectMeta{Name: "reader"}, Rules: []rbacv1.PolicyRule{{APIGroups: []string{fnv1.Group}, Resources: []string{"functions"}, Verbs: []string{"get", "list", "watch"}}}}
	if _, err := env.Kube.RbacV1().Roles(ns).Create(kubetest.Context(t), reader, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	readerToken := serviceAccount(t, ns, "reader", false, rbacv1.RoleRef{APIGroup: "rbac.authorization.k8s.io", Kind: "Role", Name: "reader"})
	g.waitStatus(t, "GET", base+"/ro", readerToken, nil, http.StatusOK)
	expect(action("ro", "promote", readerToken), http.StatusForbidden, "", "update")
	if got := stored().GetAnnotations()[fnv1.PromoteAnnotation]; got != "" {
		t.Errorf("a refused promote left the annotation %q", got)
	}

	r := action("ro", "promote", g.token)
	expect(r, http.StatusOK, "", "")
	if got := stored().GetAnnotations()[fnv1.PromoteAnnotation]; got != revName("v2") {
		t.Errorf("after promote the annotation = %q, want %s", got, revName("v2"))
	}
	if answered, _, _ := unstructured.NestedStringMap(r.body, "metadata", "annotations"); answered[fnv1.PromoteAnnotation] != revName("v2") {
		t.Errorf("promote answered annotations %v", answered)
	}
	expect(action("ro", "abort", g.token), http.StatusOK, "", "")
	annotations := stored().GetAnnotations()
	if annotations[fnv1.AbortAnnotation] != revName("v2") || annotations[fnv1.PromoteAnnotation] != "" {
		t.Errorf("after abort the annotations = %v, want the abort of %s alone", annotations, revName("v2"))
	}
	expect(action("ro", "resume", g.token), http.StatusOK, "", "")
	if _, found, _ := unstructured.NestedFieldNoCopy(stored().Object, "spec", "rollout", "paused"); found {
		t.Errorf("after resume spec.rollout = %v", stored().Object["spec"].(map[string]any)["rollout"])
	}
	if steps, _, _ := unstructured.NestedSlice(stored().Object, "spec", "rollout", "steps"); len(steps) != 3 {
		t.Errorf("resume changed the policy: %v", stored().Object["spec"])
	}
	expect(action("ro", "resume", g.token), http.StatusConflict, "not_paused", "nothing to resume")

	writeRollout(t, ns, "ro", revName("v1"), fnv1.RolloutHalted, map[string]int32{revName("v1"): 100, revName("v2"): 0})
	expect(action("ro", "abort", g.token), http.StatusConflict, "rollout_halted", "is Halted (TooManyFailures: 2 parents failed on the new revision)")
	expect(action("ro", "pause", g.token), http.StatusConflict, "rollout_halted", "nothing to pause")
	writeRollout(t, ns, "ro", revName("v1"), fnv1.RolloutComplete, map[string]int32{revName("v2"): 100})
	expect(action("ro", "promote", g.token), http.StatusConflict, "rollout_complete", "is Complete")

	expect(action("ro", "restart", g.token), http.StatusBadRequest, "unknown_action", "unknown rollout action \"restart\"")
	expect(action("nope", "pause", g.token), http.StatusNotFound, "not_found", "nope")
}
