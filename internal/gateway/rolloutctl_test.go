package gateway

import (
	"encoding/json"
	"errors"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/go-chi/chi/v5"
	"github.com/google/go-cmp/cmp"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	dynamicfake "k8s.io/client-go/dynamic/fake"

	fnv1 "github.com/metalambda/metalambda/internal/apis/metalambda/v1alpha1"
	"github.com/metalambda/metalambda/internal/httpapi"
	"github.com/metalambda/metalambda/internal/jsonvalue"
)

// rolloutFunction is Function ns/hello with a rollout policy (paused or not) and
// status.rollout of revision hello-new in phase, or none for "".
func rolloutFunction(t *testing.T, phase string, paused bool, annotations map[string]string) *unstructured.Unstructured {
	t.Helper()
	f := fnv1.Function{
		TypeMeta:   metav1.TypeMeta{APIVersion: fnv1.Group + "/" + fnv1.Version, Kind: fnv1.Kind},
		ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "hello", Annotations: annotations},
		Spec:       fnv1.FunctionSpec{Runtime: "javascript", Source: "x", Rollout: &fnv1.RolloutPolicy{Steps: []int32{10, 100}, Paused: paused}},
	}
	if phase != "" {
		f.Status.Rollout = &fnv1.RolloutStatus{Revision: "hello-new", From: "hello-old", Phase: phase, Reason: "TooManyFailures", Message: "2 parents failed"}
	}
	u := &unstructured.Unstructured{}
	if err := jsonvalue.Convert(f, &u.Object); err != nil {
		t.Fatal(err)
	}
	return u
}

func TestApplyRolloutAction(t *testing.T) {
	const promote, abort = fnv1.PromoteAnnotation, fnv1.AbortAnnotation
	for _, tc := range []struct {
		name, action, phase string
		paused              bool
		annotations         map[string]string
		// wantCode is the refusal's error code; "" for a change.
		wantCode        string
		wantPaused      bool
		wantAnnotations map[string]string
	}{
		{name: "pause a progressing rollout", action: "pause", phase: fnv1.RolloutProgressing, wantPaused: true},
		{name: "pause twice", action: "pause", phase: fnv1.RolloutProgressing, paused: true, wantCode: "already_paused"},
		{name: "pause a paused phase", action: "pause", phase: fnv1.RolloutPaused, wantCode: "already_paused"},
		{name: "pause without a rollout", action: "pause", wantCode: "no_rollout"},
		{name: "pause a halted rollout", action: "pause", phase: fnv1.RolloutHalted, wantCode: "rollout_halted"},
		{name: "pause a complete rollout", action: "pause", phase: fnv1.RolloutComplete, wantCode: "rollout_complete"},
		{name: "resume", action: "resume", phase: fnv1.RolloutPaused, paused: true},
		{name: "resume a pause left after a halt", action: "resume", phase: fnv1.RolloutHalted, paused: true},
		{name: "resume what is not paused", action: "resume", phase: fnv1.RolloutProgressing, wantCode: "not_paused"},
		{name: "promote", action: "promote", phase: fnv1.RolloutProgressing, wantAnnotations: map[string]string{promote: "hello-new"}},
		{name: "promote while paused", action: "promote", phase: fnv1.RolloutPaused, paused: true, wantPaused: true, wantAnnotations: map[string]string{promote: "hello-new"}},
		{name: "promote after an abort", action: "promote", phase: fnv1.RolloutProgressing, annotations: map[string]string{abort: "hello-new", "keep": "me"},
			wantAnnotations: map[string]string{promote: "hello-new", "keep": "me"}},
		{name: "promote keeps a stale abort of another revision", action: "promote", phase: fnv1.RolloutProgressing, annotations: map[string]string{abort: "hello-older"},
			wantAnnotations: map[string]string{promote: "hello-new", abort: "hello-older"}},
		{name: "promote a complete rollout", action: "promote", phase: fnv1.RolloutComplete, wantCode: "rollout_complete"},
		{name: "abort", action: "abort", phase: fnv1.RolloutProgressing, wantAnnotations: map[string]string{abort: "hello-new"}},
		{name: "abort after a promote", action: "abort", phase: fnv1.RolloutPaused, annotations: map[string]string{promote: "hello-new"}, wantAnnotations: map[string]string{abort: "hello-new"}},
		{name: "abort a halted rollout", action: "abort", phase: fnv1.RolloutHalted, wantCode: "rollout_halted"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			u := rolloutFunction(t, tc.phase, tc.paused, tc.annotations)
			err := applyRolloutAction(tc.action, u)
			if tc.wantCode != "" {
				if err == nil || errorCode(err) != tc.wantCode {
					t.Fatalf("error = %v, want code %s", err, tc.wantCode)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			paused, _, _ := unstructured.NestedBool(u.Object, "spec", "rollout", "paused")
			if paused != tc.wantPaused {
				t.Errorf("spec.rollout.paused = %v, want %v", paused, tc.wantPaused)
			}
			if diff := cmp.Diff(tc.wantAnnotations, u.GetAnnotations()); diff != "" {
				t.Errorf("annotations (-want +got):\n%s", diff)
			}
		})
	}
}

func TestRolloutRefusalsNameTheReason(t *testing.T) {
	u := rolloutFunction(t, fnv1.RolloutHalted, false, nil)
	err := applyRolloutAction("abort", u)
	for _, want := range []string{"hello-new", "ns/hello", "Halted", "TooManyFailures: 2 parents failed", "nothing to abort"} {
		if err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("the refusal %q does not say %q", err, want)
		}
	}
	u = rolloutFunction(t, "", false, nil)
	unstructured.RemoveNestedField(u.Object, "spec", "rollout")
	if err := applyRolloutAction("promote", u); err == nil || !strings.Contains(err.Error(), "no rollout policy (spec.rollout)") {
		t.Errorf("promote without a policy: %v", err)
	}
}

// TestRolloutActionHandler: the handler answers the Function as written, 400 for an
// unknown action, 404 for no such Function, 409 for a refusal; a refusal writes
// nothing.
func TestRolloutActionHandler(t *testing.T) {
	stored := rolloutFunction(t, fnv1.RolloutProgressing, false, nil)
	dyn := dynamicfake.NewSimpleDynamicClientWithCustomListKinds(runtime.NewScheme(), map[schema.GroupVersionResource]string{FunctionsGVR: "FunctionList"}, stored)
	g := &Gateway{dyn: dyn}
	r := chi.NewRouter()
	r.Post("/v1/namespaces/{namespace}/functions/{name}/rollout/{action}", g.rolloutAction)
	post := func(path string) *httptest.ResponseRecorder {
		w := httptest.NewRecorder()
		r.ServeHTTP(w, httptest.NewRequest(http.MethodPost, path, nil))
		return w
	}
	for _, tc := range []struct {
		path     string
		status   int
		code     string
		contains string
	}{
		{"/v1/namespaces/ns/functions/hello/rollout/restart", 400, "unknown_action", "pause, resume, promote and abort"},
		{"/v1/namespaces/ns/functions/nope/rollout/pause", 404, "not_found", "nope"},
		{"/v1/namespaces/ns/functions/hello/rollout/resume", 409, "not_paused", "nothing to resume"},
		{"/v1/namespaces/ns/functions/hello/rollout/pause", 200, "", ""},
		{"/v1/namespaces/ns/functions/hello/rollout/pause", 409, "already_paused", "paused already"},
	} {
		w := post(tc.path)
		if w.Code != tc.status || !strings.Contains(w.Body.String(), tc.code) || !strings.Contains(w.Body.String(), tc.contains) {
			t.Errorf("POST %s = %d %s, want %d %s %q", tc.path, w.Code, w.Body, tc.status, tc.code, tc.contains)
		}
		if w.Code == http.StatusOK {
			var got map[string]any
			if err := json.Unmarshal(w.Body.Bytes(), &got); err != nil {
				t.Fatal(err)
			}
			if paused, _, _ := unstructured.NestedBool(got, "spec", "rollout", "paused"); !paused {
				t.Errorf("POST %s answered a Function not paused: %s", tc.path, w.Body)
			}
		}
	}
}

// errorCode is the code of an *httpapi.Error, or "" for another error.
func errorCode(err error) string {
	var e *httpapi.Error
	if errors.As(err, &e) {
		return e.Code
	}
	return ""
}
