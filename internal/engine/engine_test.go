package engine

import (
	"net/http"
	"net/url"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	"github.com/metalambda/metalambda/internal/apis/metacontroller/v1alpha1"
)

func TestFinalizerNameFitsTheLimit(t *testing.T) {
	short := finalizerName(compositeFinalizerPrefix, "my-controller")
	if short != "metacontroller.io/compositecontroller-my-controller" {
		t.Errorf("short name = %q, want upstream's name", short)
	}
	long := strings.Repeat("x", 80)
	a, b := finalizerName(compositeFinalizerPrefix, long), finalizerName(compositeFinalizerPrefix, long+"y")
	for _, f := range []string{a, b} {
		_, name, _ := strings.Cut(f, "/")
		if len(name) > 63 {
			t.Errorf("%q: name part has %d characters, more than 63", f, len(name))
		}
	}
	if a == b {
		t.Errorf("two long names map to the same finalizer %q", a)
	}
}

func TestClassifyRequests(t *testing.T) {
	tests := []struct {
		method, path, contentType string
		verb, resource            string
	}{
		{"GET", "/api/v1/namespaces/ns/configmaps?watch=true", "", "watch", "configmaps"},
		{"GET", "/api/v1/namespaces/ns/configmaps", "", "list", "configmaps"},
		{"GET", "/api/v1/namespaces/ns/configmaps/a", "", "get", "configmaps"},
		{"GET", "/api/v1/namespaces/ns", "", "get", "namespaces"},
		{"GET", "/api/v1/namespaces", "", "list", "namespaces"},
		{"PUT", "/apis/example.com/v1/namespaces/ns/things/a/status", "", "update", "things/status"},
		{"PATCH", "/api/v1/namespaces/ns/services/s", "application/apply-patch+yaml", "apply", "services"},
		{"PATCH", "/api/v1/namespaces/ns/services/s", "application/merge-patch+json", "patch", "services"},
		{"POST", "/api/v1/namespaces/ns/events", "", "create", "events"},
		{"DELETE", "/apis/metacontroller.k8s.io/v1alpha1/compositecontrollers/c", "", "delete", "compositecontrollers"},
		{"GET", "/apis", "", "get", "discovery"},
	}
	for _, tt := range tests {
		u, _ := url.Parse("https://api" + tt.path)
		req := &http.Request{Method: tt.method, URL: u, Header: http.Header{"Content-Type": {tt.contentType}}}
		verb, resource := classify(req)
		if verb != tt.verb || resource != tt.resource {
			t.Errorf("%s %s = %s %s, want %s %s", tt.method, tt.path, verb, resource, tt.verb, tt.resource)
		}
	}
}

func TestMapChanges(t *testing.T) {
	v := func(s string) *string { return &s }
	got := mapChanges(map[string]string{"keep": "1", "change": "a", "drop": "x"},
		map[string]*string{"keep": v("1"), "change": v("b"), "drop": nil, "absent": nil, "add": v("n")})
	want := map[string]any{"change": "b", "drop": nil, "add": "n"}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("mapChanges (-want +got):\n%s", diff)
	}
}

func TestDecoratorSelector(t *testing.T) {
	rule := v1alpha1.DecoratorControllerResourceRule{
		LabelSelector: &metav1.LabelSelector{MatchLabels: map[string]string{"app": "web"}},
		AnnotationSelector: &v1alpha1.AnnotationSelector{
			MatchAnnotations: map[string]string{"team": "a b/c"}, // not a valid label value
			MatchExpressions: []metav1.LabelSelectorRequirement{{Key: "skip", Operator: metav1.LabelSelectorOpDoesNotExist}},
		},
	}
	selects, err := decoratorSelector(rule)
	if err != nil {
		t.Fatal(err)
	}
	obj := func(labels, annotations map[string]string) *unstructured.Unstructured {
		u := &unstructured.Unstructured{Object: map[string]any{}}
		u.SetLabels(labels)
		u.SetAnnotations(annotations)
		return u
	}
	tests := []struct {
		name string
		obj  *unstructured.Unstructured
		want bool
	}{
		{"both match", obj(map[string]string{"app": "web"}, map[string]string{"team": "a b/c"}), true},
		{"label differs", obj(map[string]string{"app": "db"}, map[string]string{"team": "a b/c"}), false},
		{"annotation missing", obj(map[string]string{"app": "web"}, nil), false},
		{"excluded by expression", obj(map[string]string{"app": "web"}, map[string]string{"team": "a b/c", "skip": ""}), false},
	}
	for _, tt := range tests {
		if got := selects(tt.obj); got != tt.want {
			t.Errorf("%s: selects = %v, want %v", tt.name, got, tt.want)
		}
	}
	bad := rule
	bad.AnnotationSelector = &v1alpha1.AnnotationSelector{MatchExpressions: []metav1.LabelSelectorRequirement{{Key: "k", Operator: "Near"}}}
	if _, err := decoratorSelector(bad); err == nil || !strings.Contains(err.Error(), "Near") {
		t.Errorf("unknown operator: err = %v", err)
	}
}

func TestOnlyStatusChanged(t *testing.T) {
	base := &unstructured.Unstructured{Object: map[string]any{"metadata": map[string]any{"resourceVersion": "1", "generation": int64(1)}}}
	with := func(f func(u *unstructured.Unstructured)) *unstructured.Unstructured {
		u := base.DeepCopy()
		u.SetResourceVersion("2")
		f(u)
		return u
	}
	tests := []struct {
		name string
		new  *unstructured.Unstructured
		want bool
	}{
		{"status only", with(func(u *unstructured.Unstructured) { u.Object["status"] = map[string]any{"x": "y"} }), true},
		{"generation", with(func(u *unstructured.Unstructured) { u.SetGeneration(2) }), false},
		{"labels", with(func(u *unstructured.Unstructured) { u.SetLabels(map[string]string{"a": "b"}) }), false},
		{"annotations", with(func(u *unstructured.Unstructured) { u.SetAnnotations(map[string]string{"a": "b"}) }), false},
		{"finalizers only, as upstream", with(func(u *unstructured.Unstructured) { u.SetFinalizers([]string{"f"}) }), true},
		{"deletion", with(func(u *unstructured.Unstructured) { now := metav1.Now(); u.SetDeletionTimestamp(&now) }), false},
		{"cache replay", base.DeepCopy(), false},
	}
	for _, tt := range tests {
		if got := onlyStatusChanged(base, tt.new); got != tt.want {
			t.Errorf("%s: onlyStatusChanged = %v, want %v", tt.name, got, tt.want)
		}
	}
	now := metav1.Now()
	base.SetDeletionTimestamp(&now)
	if onlyStatusChanged(base, with(func(u *unstructured.Unstructured) { u.Object["status"] = map[string]any{"x": "y"} })) {
		t.Errorf("a status change of a parent being deleted is dropped; upstream lets every update of it through")
	}
}

func TestOptionsAndStrategy(t *testing.T) {
	if s, err := ParseApplyStrategy("dynamic-apply"); err != nil || s != ThreeWay {
		t.Errorf("dynamic-apply = %v, %v; want the three-way alias", s, err)
	}
	if _, err := ParseApplyStrategy("magic"); err == nil {
		t.Error("an unknown strategy was accepted")
	}
	o := Defaults()
	if err := o.Validate(); err != nil {
		t.Fatalf("defaults invalid: %v", err)
	}
	o.Workers = 0
	if err := o.Validate(); err == nil || !strings.Contains(err.Error(), "workers") {
		t.Errorf("workers 0: err = %v", err)
	}
}

func TestUnsupportedFieldsAreListed(t *testing.T) {
	yes := true
	spec := &v1alpha1.CompositeControllerSpec{
		ParentResource: v1alpha1.CompositeControllerParentResourceRule{RevisionHistory: &v1alpha1.CompositeControllerRevisionHistory{}},
		ChildResources: []v1alpha1.CompositeControllerChildResourceRule{
			{UpdateStrategy: &v1alpha1.CompositeControllerChildUpdateStrategy{Method: v1alpha1.ChildUpdateRollingInPlace}},
			{UpdateStrategy: &v1alpha1.CompositeControllerChildUpdateStrategy{Method: v1alpha1.ChildUpdateInPlace}},
		},
		Hooks: &v1alpha1.CompositeControllerHooks{Sync: &v1alpha1.Hook{Webhook: &v1alpha1.Webhook{
			Etag:          &v1alpha1.WebhookEtagConfig{Enabled: &yes},
			Authorization: &v1alpha1.WebhookAuthorization{SecretRef: &v1alpha1.KeyReference{Name: "s", Namespace: "n", Key: "k"}},
		}}, PreUpdateChild: &v1alpha1.Hook{}},
		EndpointConfigs: []v1alpha1.EndpointConfig{{Host: "x"}},
	}
	got := strings.Join(compositeUnsupported(spec, true), "\n")
	for _, want := range []string{"preUpdateChild"} {
		if !strings.Contains(got, want) {
			t.Errorf("unsupported list lacks %q:\n%s", want, got)
		}
	}
	for _, supported := range []string{"revisionHistory", "childResources[0]", "childResources[1]", "authorization", "endpointConfigs", "etag"} {
		if strings.Contains(got, supported) {
			t.Errorf("supported %s was listed:\n%s", supported, got)
		}
	}
	// ControllerRevisions are namespaced: a cluster-scoped parent cannot roll.
	got = strings.Join(compositeUnsupported(spec, false), "\n")
	if want := "childResources[0].updateStrategy.method RollingInPlace acts as its non-rolling form"; !strings.Contains(got, want) {
		t.Errorf("cluster-scoped parent: unsupported list lacks %q:\n%s", want, got)
	}
}

// endpointConfigs apply by host (case and default ports aside) to webhooks that set
// no TLS or auth field of their own; a webhook's own settings replace an entry whole.
func TestSecuritySettings(t *testing.T) {
	token := &v1alpha1.WebhookAuthorization{SecretRef: &v1alpha1.KeyReference{Name: "entry", Namespace: "n", Key: "k"}}
	own := &v1alpha1.BasicAuth{SecretRef: &v1alpha1.KeyReference{Name: "own", Namespace: "n"}}
	endpoints := []v1alpha1.EndpointConfig{{Host: "other.example"}, {Host: "Hooks.Example:443", Authorization: token}}
	tests := []struct {
		url     string
		webhook v1alpha1.Webhook
		want    any
	}{
		{"https://hooks.example/sync", v1alpha1.Webhook{}, token},
		{"https://hooks.example:443/sync", v1alpha1.Webhook{}, token},
		{"http://hooks.example/sync", v1alpha1.Webhook{}, nil}, // port 80, not 443
		{"https://elsewhere.example/sync", v1alpha1.Webhook{}, nil},
		{"https://hooks.example/sync", v1alpha1.Webhook{BasicAuth: own}, own},
	}
	for _, tt := range tests {
		got := securitySettings(&tt.webhook, tt.url, endpoints)
		var auth any
		switch {
		case got.Authorization != nil:
			auth = got.Authorization
		case got.BasicAuth != nil:
			auth = got.BasicAuth
		}
		if auth != tt.want {
			t.Errorf("%s with %+v: settings %+v, want auth %v", tt.url, tt.webhook, got, tt.want)
		}
	}
}
