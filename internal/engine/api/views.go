package api

import (
	"bytes"
	"encoding/json"
	"fmt"
	"net/http"
	"sort"
	"strconv"
	"strings"
	"time"

	"github.com/pmezard/go-difflib/difflib"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	"github.com/metalambda/metalambda/internal/engine/apply"
	"github.com/metalambda/metalambda/internal/engineapi"
	"github.com/metalambda/metalambda/internal/httpapi"
	"github.com/metalambda/metalambda/internal/redact"
)

// maxOutOfSyncPaths bounds the differing fields listed per child.
const maxOutOfSyncPaths = 10

// callView is the API's form of a recorded call: bodies redacted, and the response
// diffed against prev when prev is the call's previous one.
func callView(rc, prev *recordedCall) engineapi.HookCall {
	c := rc.call
	out := engineapi.HookCall{
		ID: rc.id, Time: c.Start.UTC(),
		Controller: callController(c.Info.ControllerType, c.Info.Controller),
		Hook:       c.Info.Hook,
		Parent: engineapi.ObjectRef{
			APIVersion: c.Info.ParentAPIVersion, Kind: c.Info.Parent.Kind,
			Namespace: c.Info.Parent.Namespace, Name: c.Info.Parent.Name, UID: c.Info.ParentUID,
		},
		URL: c.URL, DurationMS: ms(c.Duration), Status: c.Status, TraceID: c.TraceID,
		Request:  recordedBody(c.Request, rc.requestBytes),
		Response: recordedBody(c.Response, rc.responseBytes),
	}
	if c.Err != nil {
		out.Error = c.Err.Error()
	}
	if rc.prev != 0 && prev.id == rc.prev {
		out.PreviousID = prev.id
		out.Diff = responseDiff(prev, rc)
	}
	return out
}

// recordedBody is a body as the API shows it: redacted, or a note of the size of a
// body too big to keep.
func recordedBody(body []byte, tooBig int) json.RawMessage {
	if tooBig > 0 {
		note, _ := json.Marshal(map[string]any{"truncated": true, "bytes": tooBig})
		return note
	}
	if len(body) == 0 {
		return nil
	}
	return redact.JSON(body)
}

// responseDiff is a unified diff of the indented, redacted responses of prev and cur,
// "" when they are equal or one of them was not kept.
func responseDiff(prev, cur *recordedCall) string {
	if prev.call.Response == nil || cur.call.Response == nil {
		return ""
	}
	a, b := indented(prev.call.Response), indented(cur.call.Response)
	if a == b {
		return ""
	}
	diff, err := difflib.GetUnifiedDiffString(difflib.UnifiedDiff{
		A: difflib.SplitLines(a), B: difflib.SplitLines(b),
		FromFile: "call " + strconv.FormatUint(prev.id, 10), ToFile: "call " + strconv.FormatUint(cur.id, 10),
		Context: 3,
	})
	if err != nil {
		return ""
	}
	return diff
}

// indented is a redacted body indented two spaces, with a final newline.
func indented(body []byte) string {
	var buf bytes.Buffer
	if err := json.Indent(&buf, redact.JSON(body), "", "  "); err != nil {
		return string(body) + "\n"
	}
	buf.WriteByte('\n')
	return buf.String()
}

// summary is the overview of one controller object.
func (s *server) summary(obj *unstructured.Unstructured) engineapi.ControllerSummary {
	sum := engineapi.ControllerSummary{ControllerRef: engineapi.ControllerRef{Kind: obj.GetKind(), Namespace: obj.GetNamespace(), Name: obj.GetName()}}
	controllerInfo(&sum, obj)
	if reason, message := notReady(obj); reason != "" {
		sum.Error = message
	}
	if c := s.engine.Controller(sum.Kind, sum.Namespace, sum.Name); c != nil {
		sum.Running, sum.Error = true, ""
		o := c.Overview()
		sum.ParentResources, sum.ChildResources, sum.Parents, sum.Hooks = o.ParentResources, o.ChildResources, o.Parents, o.Hooks
	}
	// The engine records a namespaced controller's calls as namespace/name.
	recorded := sum.Name
	if sum.Namespace != "" {
		recorded = sum.Namespace + "/" + sum.Name
	}
	sum.Latency, sum.SyncErrorsLastHour = s.calls.lastHour(sum.Kind, recorded)
	return sum
}

// conditionReady is the condition the engine writes on a controller object.
const conditionReady = "Ready"

// notReady returns the reason and message of a Ready condition that is not True.
func notReady(obj *unstructured.Unstructured) (reason, message string) {
	conds, _, _ := unstructured.NestedSlice(obj.Object, "status", "conditions")
	for _, c := range conds {
		cond, _ := c.(map[string]any)
		if cond["type"] == conditionReady && cond["status"] != "True" {
			reason, _ = cond["reason"].(string)
			message, _ = cond["message"].(string)
			return reason, message
		}
	}
	return "", ""
}

// oneParent is the one parent of found (the parents of the controller ref names by
// namespace and name that the caller may get), a 404 without one, a 409 with several
// whose message ends with pick, how the request picks a kind.
func oneParent(found []Parent, ref engineapi.ControllerRef, namespace, name, pick string) (Parent, error) {
	switch len(found) {
	case 0:
		what := name
		if namespace != "" {
			what = namespace + "/" + name
		}
		return Parent{}, httpapi.NewError(http.StatusNotFound, "not_found", fmt.Sprintf("%s %s has no parent %s", ref.Kind, ref.Name, what))
	case 1:
		return found[0], nil
	}
	kinds := make([]string, len(found))
	for i, p := range found {
		kinds[i] = p.Object.GetKind()
	}
	return Parent{}, httpapi.NewError(http.StatusConflict, "ambiguous", fmt.Sprintf("%s %s has parents of kinds %s named %s; %s", ref.Kind, ref.Name, strings.Join(kinds, ", "), name, pick))
}

// parentDetail is what the API shows of one parent of the controller ref names: its
// last sync and its children, the ones the hook last asked for and the ones it
// controls.
func parentDetail(ref engineapi.ControllerRef, parent *unstructured.Unstructured, st ParentState) engineapi.ParentDetail {
	out := engineapi.ParentDetail{
		Controller: ref,
		Parent:     apiObjectRef(parent),
		Children:   []engineapi.Child{},
	}
	if !st.LastSync.IsZero() {
		t := st.LastSync.UTC()
		out.LastSyncTime = &t
	}
	if st.LastError != nil {
		out.LastError = st.LastError.Error()
	}
	seen := map[string]bool{}
	for _, d := range st.Desired {
		out.Children = append(out.Children, desiredChild(parent, d))
		seen[childKeyOf(d.Desired)] = true
	}
	for _, o := range st.Controlled {
		if !seen[childKeyOf(o)] {
			out.Children = append(out.Children, observedChild(o))
		}
	}
	sort.Slice(out.Children, func(i, j int) bool { return childLess(out.Children[i].ObjectRef, out.Children[j].ObjectRef) })
	return out
}

// desiredChild compares a child the hook asked for with the cluster's object, as the
// engine does before it decides to write.
func desiredChild(parent *unstructured.Unstructured, d DesiredChild) engineapi.Child {
	child := engineapi.Child{ObjectRef: apiObjectRef(d.Desired), Desired: true, Ready: engineapi.ReadyUnknown, ReadyReason: "the child does not exist"}
	observed := d.Observed
	if observed == nil {
		return child
	}
	child.Exists, child.UID = true, string(observed.GetUID())
	child.Ready, child.ReadyReason = readiness(observed)
	if !isControlledBy(observed, parent) {
		child.OutOfSync = []string{"metadata.ownerReferences"}
		return child
	}
	child.InSync = d.InSync
	if !child.InSync {
		paths := apply.Diff(d.Desired.Object, observed.Object)
		child.OutOfSync = paths[:min(len(paths), maxOutOfSyncPaths)]
	}
	return child
}

// observedChild is a child the parent controls that the hook did not ask for (or
// whose hook answer the engine has not seen): it is not in sync.
func observedChild(o *unstructured.Unstructured) engineapi.Child {
	child := engineapi.Child{ObjectRef: apiObjectRef(o), Exists: true}
	child.Ready, child.ReadyReason = readiness(o)
	return child
}

// childAccess is what a caller needs to see a child of ctl.
func childAccess(ctl Controller, ref engineapi.ObjectRef) access {
	if res, ok := ctl.ChildResource(groupOf(ref.APIVersion), ref.Kind); ok {
		return access{group: res.Group, resource: res.Resource, namespace: ref.Namespace, name: ref.Name}
	}
	return access{group: groupOf(ref.APIVersion), resource: strings.ToLower(ref.Kind), namespace: ref.Namespace, name: ref.Name}
}

func isControlledBy(obj, parent *unstructured.Unstructured) bool {
	for _, r := range obj.GetOwnerReferences() {
		if r.Controller != nil && *r.Controller {
			return r.UID == parent.GetUID()
		}
	}
	return false
}

func apiObjectRef(o *unstructured.Unstructured) engineapi.ObjectRef {
	return engineapi.ObjectRef{APIVersion: o.GetAPIVersion(), Kind: o.GetKind(), Namespace: o.GetNamespace(), Name: o.GetName(), UID: string(o.GetUID())}
}

func childKeyOf(o *unstructured.Unstructured) string {
	return groupOf(o.GetAPIVersion()) + "/" + o.GetKind() + "/" + o.GetNamespace() + "/" + o.GetName()
}

func childLess(a, b engineapi.ObjectRef) bool {
	for _, p := range [][2]string{{a.APIVersion, b.APIVersion}, {a.Kind, b.Kind}, {a.Namespace, b.Namespace}, {a.Name, b.Name}} {
		if p[0] != p[1] {
			return p[0] < p[1]
		}
	}
	return false
}

// readiness reads whether an object is ready, in this order:
//
//   - a status.observedGeneration below metadata.generation: False (not observed yet);
//   - a condition Ready, else Available: its status;
//   - a condition Complete that is True: True; a condition Failed that is True: False;
//   - a status.phase: True for Running, Succeeded, Active and Bound, else False;
//   - no status at all (ConfigMaps, Secrets, Services...): True, nothing to wait for;
//   - anything else: Unknown.
func readiness(obj *unstructured.Unstructured) (state, reason string) {
	status, _, _ := unstructured.NestedMap(obj.Object, "status")
	if len(status) == 0 {
		return engineapi.ReadyTrue, "the object has no status to wait for"
	}
	if og, ok, _ := unstructured.NestedInt64(obj.Object, "status", "observedGeneration"); ok && og < obj.GetGeneration() {
		return engineapi.ReadyFalse, fmt.Sprintf("generation %d is not observed yet (status is of %d)", obj.GetGeneration(), og)
	}
	conds := conditions(status)
	for _, t := range []string{"Ready", "Available"} {
		if s, ok := conds[t]; ok {
			return readyValue(s), "condition " + t + " is " + s
		}
	}
	if conds["Complete"] == "True" {
		return engineapi.ReadyTrue, "condition Complete is True"
	}
	if conds["Failed"] == "True" {
		return engineapi.ReadyFalse, "condition Failed is True"
	}
	if phase, ok := status["phase"].(string); ok {
		switch phase {
		case "Running", "Succeeded", "Active", "Bound":
			return engineapi.ReadyTrue, "phase is " + phase
		}
		return engineapi.ReadyFalse, "phase is " + phase
	}
	return engineapi.ReadyUnknown, "the status has no Ready or Available condition and no phase"
}

func conditions(status map[string]any) map[string]string {
	out := map[string]string{}
	list, _ := status["conditions"].([]any)
	for _, c := range list {
		cond, _ := c.(map[string]any)
		t, _ := cond["type"].(string)
		s, _ := cond["status"].(string)
		if t != "" {
			out[t] = s
		}
	}
	return out
}

func readyValue(s string) string {
	switch s {
	case "True":
		return engineapi.ReadyTrue
	case "False":
		return engineapi.ReadyFalse
	}
	return engineapi.ReadyUnknown
}

func ms(d time.Duration) float64 { return float64(d.Microseconds()) / 1000 }

func unixMinute(m int64) time.Time { return time.Unix(m*60, 0).UTC() }

// groupOf is the group of an apiVersion, "" for the core group.
func groupOf(apiVersion string) string {
	group, _, found := strings.Cut(apiVersion, "/")
	if !found {
		return ""
	}
	return group
}
