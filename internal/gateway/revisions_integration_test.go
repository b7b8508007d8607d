//go:build integration

package gateway

import (
	"context"
	"encoding/json"
	"fmt"
	"maps"
	"net/http"
	"slices"
	"strings"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	fnv1 "github.com/metalambda/metalambda/internal/apis/metalambda/v1alpha1"
	"github.com/metalambda/metalambda/internal/jsonvalue"
	"github.com/metalambda/metalambda/internal/kubetest"
	"github.com/metalambda/metalambda/internal/rollout"
)

// hookFor is a hook request whose parent "p" has this UID.
func hookFor(uid string) map[string]any {
	return map[string]any{"parent": map[string]any{"metadata": map[string]any{"name": "p", "uid": uid}}, "children": map[string]any{}}
}

// revisionsOf lists the ControllerRevisions of a function, by revision number.
func revisionsOf(t *testing.T, ns, name string) map[int64]*unstructured.Unstructured {
	t.Helper()
	list, err := env.Resource(ControllerRevisionsGVR, ns).List(kubetest.Context(t), metav1.ListOptions{LabelSelector: FunctionLabel + "=" + name})
	if err != nil {
		t.Fatal(err)
	}
	out := map[int64]*unstructured.Unstructured{}
	for i := range list.Items {
		n, _, _ := unstructured.NestedInt64(list.Items[i].Object, "revision")
		out[n] = &list.Items[i]
	}
	return out
}

func functionStatus(o *unstructured.Unstructured) fnv1.FunctionStatus {
	var status fnv1.FunctionStatus
	_ = jsonvalue.Convert(o.Object["status"], &status)
	return status
}

// waitRevisions waits until the function's status lists exactly want as its live
// revisions (name: share), with current as its latest.
func waitRevisions(t *testing.T, ns, name string, current string, want map[string]int32) fnv1.FunctionStatus {
	t.Helper()
	var status fnv1.FunctionStatus
	kubetest.Eventually(t, 30*time.Second, "Function "+name+" lists its live revisions", func(ctx context.Context) (bool, error) {
		o, err := env.Get(ctx, FunctionsGVR, ns, name)
		if err != nil {
			return false, nil // keeps the last reason
		}
		status = functionStatus(o)
		got := map[string]int32{}
		for _, r := range status.Revisions {
			got[r.Name] = r.Share
		}
		ok := status.CurrentRevision == current && fmt.Sprint(got) == fmt.Sprint(want)
		return ok, fmt.Errorf("currentRevision %q revisions %+v, want %q %v; status %v", status.CurrentRevision, status.Revisions, current, want, o.Object["status"])
	})
	return status
}

// TestRevisionsRolloutAndRollback walks a function through its revisions: each code
// change is a ControllerRevision owned by the Function, numbered 1, 2, 3, the
// latest at 100%; with a rollout policy a new revision waits at 0% while the old
// code serves; a share moved by hand (as the rollout driver will) splits the
// parents by their UID's bucket, each parent sticking to its revision; going back
// to an earlier code (through kubectl) reuses its ControllerRevision with the next
// number; revisionHistoryLimit prunes; deleting the Function collects its
// revisions.
func TestRevisionsRolloutAndRollback(t *testing.T) {
	g := startGateway(t)
	ns := env.Namespace(t)
	base := "/v1/namespaces/" + ns + "/functions"
	spec := func(version string, extra map[string]any) map[string]any {
		s := map[string]any{"runtime": "javascript", "source": fmt.Sprintf(echoJS, version)}
		for k, v := range extra {
			s[k] = v
		}
		return map[string]any{"metadata": map[string]any{"name": "rev"}, "spec": s}
	}
	revName := func(version string) string {
		return RevisionName("rev", fnv1.FunctionSpec{Runtime: "javascript", Source: fmt.Sprintf(echoJS, version)})
	}
	for i, v := range []string{"v1", "v2", "v3"} {
		method, path, want := "PUT", base+"/rev", http.StatusOK
		if i == 0 {
			method, path, want = "POST", base, http.StatusCreated
		}
		if r := g.do(t, method, path, g.token, spec(v, nil)); r.status != want {
			t.Fatalf("%s %s = %d %s", method, v, r.status, r.raw)
		}
		g.waitHook(t, ns, "rev", "p-"+v)
	}
	fn := env.MustGet(t, FunctionsGVR, ns, "rev")
	waitRevisions(t, ns, "rev", revName("v3"), map[string]int32{revName("v3"): 100})
	revs := revisionsOf(t, ns, "rev")
	for n, v := range map[int64]string{1: "v1", 2: "v2", 3: "v3"} {
		cr := revs[n]
		if cr == nil || cr.GetName() != revName(v) {
			t.Fatalf("revision %d = %v, want %s; all: %v", n, cr, revName(v), revs)
		}
		refs := cr.GetOwnerReferences()
		if len(refs) != 1 || refs[0].UID != fn.GetUID() || refs[0].Controller == nil || !*refs[0].Controller {
			t.Errorf("revision %d owner references = %+v, want the Function as controller", n, refs)
		}
		if got, err := RevisionSpec(cr); err != nil || got.Source != fmt.Sprintf(echoJS, v) || got.Runtime != "javascript" {
			t.Errorf("revision %d holds %+v (%v)", n, got, err)
		}
	}
	if len(revs) != 3 {
		t.Errorf("%d revisions, want 3", len(revs))
	}

	// With a rollout policy, v4 waits at 0% and every parent still gets v3.
	policy := map[string]any{"rollout": map[string]any{"steps": []any{50, 100}}}
	if r := g.do(t, "PUT", base+"/rev", g.token, spec("v4", policy)); r.status != http.StatusOK {
		t.Fatalf("PUT v4 = %d %s", r.status, r.raw)
	}
	waitRevisions(t, ns, "rev", revName("v4"), map[string]int32{revName("v3"): 100, revName("v4"): 0})
	uids := make([]string, 40)
	for i := range uids {
		uids[i] = fmt.Sprintf("0d6c5a1e-%04d-4c2b-9f3a-5e7d8c9b0a1f", i)
		if r := g.do(t, "POST", "/hooks/"+ns+"/rev", "", hookFor(uids[i])); childName(r) != "p-v3" {
			t.Fatalf("parent %s got %d %s while v4 waits at 0%%", uids[i], r.status, r.raw)
		}
	}

	// The driver's move, by hand: 50/50 by the parents' buckets, from the latest object.
	setShares(t, ns, "rev", map[string]int32{revName("v3"): 50, revName("v4"): 50})
	var moved string
	for _, uid := range uids {
		if rollout.Covered(uid, 50) {
			moved = uid
			break
		}
	}
	if moved == "" {
		t.Fatal("no test UID falls in the first half of the buckets")
	}
	kubetest.Eventually(t, 30*time.Second, "the gateway follows the shares", func(context.Context) (bool, error) {
		r := g.do(t, "POST", "/hooks/"+ns+"/rev", "", hookFor(moved))
		return childName(r) == "p-v4", fmt.Errorf("%d %s", r.status, r.raw)
	})
	split := map[string]int{}
	for _, uid := range uids {
		want := "p-v3"
		if rollout.Covered(uid, 50) {
			want = "p-v4"
		}
		for range 2 {
			if r := g.do(t, "POST", "/hooks/"+ns+"/rev", "", hookFor(uid)); childName(r) != want {
				t.Fatalf("parent %s (bucket %d) got %d %s, want %s", uid, rollout.Bucket(uid), r.status, r.raw, want)
			}
		}
		split[want]++
	}
	t.Logf("40 parents at 50%%: %v", split)
	inv := g.do(t, "GET", base+"/rev/invocations", g.token, nil)
	items, _ := inv.body["items"].([]any)
	if len(items) == 0 || !slices.Contains([]any{revName("v3"), revName("v4")}, items[0].(map[string]any)["revision"]) {
		t.Errorf("the invocation history does not name the revision that answered: %s", inv.raw)
	}

	// A new revision during the rollout: both live ones keep their shares, v5 waits;
	// revisionHistoryLimit 1 keeps one old revision (v2) of v1 and v2.
	policy["revisionHistoryLimit"] = 1
	if r := g.do(t, "PUT", base+"/rev", g.token, spec("v5", policy)); r.status != http.StatusOK {
		t.Fatalf("PUT v5 = %d %s", r.status, r.raw)
	}
	waitRevisions(t, ns, "rev", revName("v5"), map[string]int32{revName("v3"): 50, revName("v4"): 50, revName("v5"): 0})
	kubetest.Eventually(t, 30*time.Second, "revision 1 is pruned", func(context.Context) (bool, error) {
		revs := revisionsOf(t, ns, "rev")
		return revs[1] == nil && revs[2] != nil && revs[3] != nil && revs[4] != nil && revs[5] != nil, fmt.Errorf("revisions %v", slices.Sorted(maps.Keys(revs)))
	})

	// Back to v2 through kubectl, without a policy: its ControllerRevision becomes
	// revision 6 and serves every parent at once.
	obj := env.MustGet(t, FunctionsGVR, ns, "rev")
	obj.Object["spec"] = spec("v2", nil)["spec"]
	if _, err := env.Resource(FunctionsGVR, ns).Update(kubetest.Context(t), obj, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	waitRevisions(t, ns, "rev", revName("v2"), map[string]int32{revName("v2"): 100})
	if status := functionStatus(env.MustGet(t, FunctionsGVR, ns, "rev")); status.Revisions[0].Revision != 6 {
		t.Errorf("the rollback's revision number = %d, want 6", status.Revisions[0].Revision)
	}
	if cr := revisionsOf(t, ns, "rev")[6]; cr == nil || cr.GetName() != revName("v2") {
		t.Errorf("revision 6 = %v, want %s reused", cr, revName("v2"))
	}
	for _, uid := range uids[:5] {
		if r := g.do(t, "POST", "/hooks/"+ns+"/rev", "", hookFor(uid)); childName(r) != "p-v2" {
			t.Fatalf("after the rollback parent %s got %d %s", uid, r.status, r.raw)
		}
	}

	// The garbage collector takes the revisions with the Function.
	if r := g.do(t, "DELETE", base+"/rev", g.token, nil); r.status != http.StatusNoContent {
		t.Fatalf("delete = %d %s", r.status, r.raw)
	}
	kubetest.Eventually(t, kubetest.GoneTimeout, "the revisions are collected", func(context.Context) (bool, error) {
		n := len(revisionsOf(t, ns, "rev"))
		return n == 0, fmt.Errorf("%d left", n)
	})
}

// setShares writes the live revisions' shares into the status, from the latest
// object, as the rollout driver does.
func setShares(t *testing.T, ns, name string, shares map[string]int32) {
	t.Helper()
	obj := env.MustGet(t, FunctionsGVR, ns, name)
	status := functionStatus(obj)
	for i := range status.Revisions {
		status.Revisions[i].Share = shares[status.Revisions[i].Name]
	}
	status.Rollout = &fnv1.RolloutStatus{Revision: status.CurrentRevision, Phase: fnv1.RolloutProgressing}
	var raw map[string]any
	if err := jsonvalue.Convert(status, &raw); err != nil {
		t.Fatal(err)
	}
	obj.Object["status"] = raw
	if _, err := env.Resource(FunctionsGVR, ns).UpdateStatus(kubetest.Context(t), obj, metav1.UpdateOptions{FieldManager: "rollout-driver"}); err != nil {
		t.Fatal(err)
	}
}

// TestRolloutPolicyIsValidated: the CRD refuses a bad policy with the field named,
// and so does the gateway's API.
func TestRolloutPolicyIsValidated(t *testing.T) {
	g := startGateway(t)
	ns := env.Namespace(t)
	for _, tc := range []struct {
		name   string
		policy map[string]any
		want   string
	}{
		{"last-not-100", map[string]any{"steps": []any{10, 50}}, "the last step must be 100"},
		{"decreasing", map[string]any{"steps": []any{50, 10, 100}}, "steps must increase"},
		{"negative-pause", map[string]any{"pauseSeconds": -1}, "spec.rollout.pauseSeconds"},
	} {
		obj := &unstructured.Unstructured{Object: map[string]any{
			"apiVersion": "metalambda.dev/v1alpha1", "kind": "Function", "metadata": map[string]any{"name": tc.name},
			"spec": map[string]any{"runtime": "javascript", "source": fmt.Sprintf(echoJS, "x"), "rollout": tc.policy},
		}}
		_, err := env.Resource(FunctionsGVR, ns).Create(kubetest.Context(t), obj, metav1.CreateOptions{})
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s: kubectl create = %v, want a refusal naming %q", tc.name, err, tc.want)
		}
		r := g.do(t, "POST", "/v1/namespaces/"+ns+"/functions", g.token, obj.Object)
		if r.status != http.StatusUnprocessableEntity || r.body["error"] != "invalid_rollout" || !strings.Contains(r.raw, tc.want) {
			t.Errorf("%s: POST = %d %s, want 422 invalid_rollout naming %q", tc.name, r.status, r.raw, tc.want)
		}
	}

	// A driver's status whose shares do not add up to 100 is refused.
	createFunction(t, ns, "shares", "javascript", fmt.Sprintf(echoJS, "x"), 0)
	kubetest.Eventually(t, 30*time.Second, "the function lists its revision", func(ctx context.Context) (bool, error) {
		o, err := env.Get(ctx, FunctionsGVR, ns, "shares")
		return err == nil && len(functionStatus(o).Revisions) == 1, err
	})
	obj := env.MustGet(t, FunctionsGVR, ns, "shares")
	_ = unstructured.SetNestedSlice(obj.Object, []any{
		map[string]any{"name": "a", "revision": int64(1), "share": int64(50)},
		map[string]any{"name": "b", "revision": int64(2), "share": int64(60)},
	}, "status", "revisions")
	_, err := env.Resource(FunctionsGVR, ns).UpdateStatus(kubetest.Context(t), obj, metav1.UpdateOptions{})
	if err == nil || !strings.Contains(err.Error(), "the shares of the live revisions must add up to 100") {
		t.Errorf("shares 50 + 60: UpdateStatus = %v, want a refusal", err)
	}
}

// A live revision is served only from a ControllerRevision the Function controls
// and whose content is what its name was made from. A ControllerRevision's data
// cannot be changed in place (the API refuses it), but whoever may delete and
// create ControllerRevisions in the namespace, and not write the Function, could
// put another one under a live revision's name: with a forged owner reference, or
// without one. A gateway that loads the Function afresh (a new replica, a restart)
// refuses it rather than serve it.
func TestTamperedRevisionIsNotServed(t *testing.T) {
	g := startGateway(t)
	ns := env.Namespace(t)
	base := "/v1/namespaces/" + ns + "/functions"
	policy := map[string]any{"steps": []any{50, 100}}
	put := func(version string) {
		t.Helper()
		body := map[string]any{"metadata": map[string]any{"name": "tamper"}, "spec": map[string]any{"runtime": "javascript", "source": fmt.Sprintf(echoJS, version), "rollout": policy}}
		if r := g.do(t, "PUT", base+"/tamper", g.token, body); r.status != http.StatusOK && r.status != http.StatusCreated {
			t.Fatalf("PUT %s = %d %s", version, r.status, r.raw)
		}
	}
	put("v1")
	g.waitHook(t, ns, "tamper", "p-v1")
	put("v2") // waits at 0%: v1 stays live, and is read from its ControllerRevision
	v1 := RevisionName("tamper", fnv1.FunctionSpec{Runtime: "javascript", Source: fmt.Sprintf(echoJS, "v1")})
	v2 := RevisionName("tamper", fnv1.FunctionSpec{Runtime: "javascript", Source: fmt.Sprintf(echoJS, "v2")})
	waitRevisions(t, ns, "tamper", v2, map[string]int32{v1: 100, v2: 0})
	fn := env.MustGet(t, FunctionsGVR, ns, "tamper")
	evil, _ := json.Marshal(fnv1.RevisionData{Spec: fnv1.FunctionSpec{Runtime: "javascript", Source: fmt.Sprintf(echoJS, "evil")}})
	var evilData map[string]any
	_ = json.Unmarshal(evil, &evilData)

	for _, attack := range []struct {
		name  string
		owner []any
	}{
		{"another one with a forged owner", []any{map[string]any{"apiVersion": fnv1.Group + "/" + fnv1.Version, "kind": fnv1.Kind, "name": "tamper", "uid": string(fn.GetUID()), "controller": true}}},
		{"another one without an owner", nil},
	} {
		t.Run(attack.name, func(t *testing.T) {
			crs := env.Resource(ControllerRevisionsGVR, ns)
			if err := crs.Delete(kubetest.Context(t), v1, metav1.DeleteOptions{}); err != nil {
				t.Fatal(err)
			}
			kubetest.WaitObjectGone(t, kubetest.GoneTimeout, "the revision is deleted", crs, v1)
			meta := map[string]any{"name": v1, "labels": map[string]any{FunctionLabel: "tamper"}}
			if attack.owner != nil {
				meta["ownerReferences"] = attack.owner
			}
			forged := &unstructured.Unstructured{Object: map[string]any{"apiVersion": "apps/v1", "kind": "ControllerRevision", "metadata": meta, "data": evilData, "revision": int64(1)}}
			if _, err := crs.Create(kubetest.Context(t), forged, metav1.CreateOptions{}); err != nil {
				t.Fatal(err)
			}
			fresh := startGateway(t)
			uid := "0d6c5a1e-0000-4c2b-9f3a-5e7d8c9b0a1f" // any parent: v1 serves them all
			deadline := time.Now().Add(5 * time.Second)
			for time.Now().Before(deadline) {
				if r := fresh.do(t, "POST", "/hooks/"+ns+"/tamper", "", hookFor(uid)); childName(r) == "p-evil" {
					t.Fatalf("a fresh gateway served the forged revision: %s", r.raw)
				}
				time.Sleep(100 * time.Millisecond)
			}
			if r := g.do(t, "POST", "/hooks/"+ns+"/tamper", "", hookFor(uid)); childName(r) != "p-v1" {
				t.Errorf("the gateway that recorded v1 answers %d %s, want v1 still", r.status, r.raw)
			}
		})
	}
}
