//go:build integration

package crds_test

import (
	"context"
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"reflect"
	"slices"
	"strings"
	"testing"
	"time"

	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/dynamic"
	"sigs.k8s.io/yaml"

	"github.com/metalambda/metalambda/crds"
	"github.com/metalambda/metalambda/internal/apis/metacontroller/v1alpha1"
	"github.com/metalambda/metalambda/internal/kubetest"
	"github.com/metalambda/metalambda/internal/local/cluster"
)

var env *kubetest.Env

// CRDs need nothing but etcd and kube-apiserver.
func TestMain(m *testing.M) {
	opts := cluster.Defaults()
	opts.Components = nil // etcd and kube-apiserver alone
	kubetest.Main(m, &env, opts)
}

var (
	ccGVR = schema.GroupVersionResource{Group: "metacontroller.k8s.io", Version: "v1alpha1", Resource: "compositecontrollers"}
	dcGVR = schema.GroupVersionResource{Group: "metacontroller.k8s.io", Version: "v1alpha1", Resource: "decoratorcontrollers"}
	crGVR = schema.GroupVersionResource{Group: "metacontroller.k8s.io", Version: "v1alpha1", Resource: "controllerrevisions"}
)

// install installs every CRD of the package; every test starts with it, so it also runs
// Install again and again over CRDs that already exist.
func install(t *testing.T) []*apiextensionsv1.CustomResourceDefinition {
	t.Helper()
	all, err := crds.All()
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(kubetest.Context(t), time.Minute)
	defer cancel()
	if err := crds.Install(ctx, env.Extensions, all...); err != nil {
		t.Fatalf("Install: %v", err)
	}
	return all
}

// manifest reads testdata/<file> as an unstructured object.
func manifest(t *testing.T, file string) *unstructured.Unstructured {
	t.Helper()
	data, err := os.ReadFile(filepath.Join("testdata", file))
	if err != nil {
		t.Fatal(err)
	}
	asJSON, err := yaml.YAMLToJSON(data)
	if err != nil {
		t.Fatalf("%s: %v", file, err)
	}
	obj := &unstructured.Unstructured{}
	if err := obj.UnmarshalJSON(asJSON); err != nil {
		t.Fatalf("%s: %v", file, err)
	}
	return obj
}

func resourceFor(t *testing.T, obj *unstructured.Unstructured, namespace string) dynamic.ResourceInterface {
	t.Helper()
	switch obj.GetKind() {
	case "CompositeController":
		return env.Dynamic.Resource(ccGVR)
	case "DecoratorController":
		return env.Dynamic.Resource(dcGVR)
	case "ControllerRevision":
		return env.Dynamic.Resource(crGVR).Namespace(namespace)
	}
	t.Fatalf("no resource for kind %q", obj.GetKind())
	return nil
}

// create creates obj and deletes it when the test ends. A CRD that was just established
// may take a moment to be served, so a NotFound is retried.
func create(t *testing.T, obj *unstructured.Unstructured, namespace string) (*unstructured.Unstructured, error) {
	t.Helper()
	client := resourceFor(t, obj, namespace)
	var created *unstructured.Unstructured
	var createErr error
	kubetest.Eventually(t, 30*time.Second, "the "+obj.GetKind()+" resource is served", func(ctx context.Context) (bool, error) {
		created, createErr = client.Create(ctx, obj.DeepCopy(), metav1.CreateOptions{})
		return !apierrors.IsNotFound(createErr), createErr
	})
	if createErr == nil {
		t.Cleanup(func() { _ = client.Delete(context.Background(), obj.GetName(), metav1.DeleteOptions{}) })
	}
	return created, createErr
}

func mustCreate(t *testing.T, obj *unstructured.Unstructured, namespace string) *unstructured.Unstructured {
	t.Helper()
	created, err := create(t, obj, namespace)
	if err != nil {
		t.Fatalf("create %s %s: %v", obj.GetKind(), obj.GetName(), err)
	}
	return created
}

func get(t *testing.T, obj *unstructured.Unstructured, namespace string) *unstructured.Unstructured {
	t.Helper()
	got, err := resourceFor(t, obj, namespace).Get(kubetest.Context(t), obj.GetName(), metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	return got
}

// sameJSON fails the test unless got and want encode to the same JSON value.
func sameJSON(t *testing.T, what string, got, want any) {
	t.Helper()
	g, err := json.Marshal(got)
	if err != nil {
		t.Fatal(err)
	}
	w, err := json.Marshal(want)
	if err != nil {
		t.Fatal(err)
	}
	var gv, wv any
	_ = json.Unmarshal(g, &gv)
	_ = json.Unmarshal(w, &wv)
	if !reflect.DeepEqual(gv, wv) {
		t.Errorf("%s changed on the way through the apiserver:\n got %s\nwant %s", what, g, w)
	}
}

func TestInstallIsIdempotentAndRepairsDrift(t *testing.T) {
	all := install(t)
	before := make([]*apiextensionsv1.CustomResourceDefinition, len(all))
	for i, crd := range all {
		before[i] = crd.DeepCopy()
	}
	ctx := kubetest.Context(t)
	api := env.Extensions.ApiextensionsV1().CustomResourceDefinitions()

	first, err := api.Get(ctx, "compositecontrollers.metacontroller.k8s.io", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	// Someone else labels the CRD and drops a short name.
	drifted := first.DeepCopy()
	drifted.Labels = map[string]string{"example.com/owner": "someone-else"}
	drifted.Spec.Names.ShortNames = []string{"cc"}
	drifted, err = api.Update(ctx, drifted, metav1.UpdateOptions{})
	if err != nil {
		t.Fatal(err)
	}

	// Install again, twice: the update path.
	for range 2 {
		if err := crds.Install(ctx, env.Extensions, all...); err != nil {
			t.Fatalf("second Install: %v", err)
		}
	}
	for i := range all {
		if !reflect.DeepEqual(all[i], before[i]) {
			t.Errorf("Install modified its argument %s", all[i].Name)
		}
	}
	got, err := api.Get(ctx, first.Name, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if got.UID != first.UID {
		t.Errorf("Install replaced the CRD (uid %s, was %s) instead of updating it", got.UID, first.UID)
	}
	if got.ResourceVersion == drifted.ResourceVersion {
		t.Errorf("Install did not update the drifted CRD")
	}
	if !slices.Equal(got.Spec.Names.ShortNames, []string{"cc", "cctl"}) {
		t.Errorf("short names after Install = %v, want [cc cctl]", got.Spec.Names.ShortNames)
	}
	if got.Labels["example.com/owner"] != "someone-else" {
		t.Errorf("Install dropped a label it does not own: %v", got.Labels)
	}
	if got.Annotations["api-approved.kubernetes.io"] != "unapproved" {
		t.Errorf("annotations after Install = %v", got.Annotations)
	}
	if !slices.Equal(got.Finalizers, first.Finalizers) {
		t.Errorf("finalizers after Install = %v, want %v", got.Finalizers, first.Finalizers)
	}
	for _, crd := range all {
		c, err := api.Get(ctx, crd.Name, metav1.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		for _, want := range []apiextensionsv1.CustomResourceDefinitionConditionType{apiextensionsv1.Established, apiextensionsv1.NamesAccepted} {
			ok := false
			for _, cond := range c.Status.Conditions {
				ok = ok || cond.Type == want && cond.Status == apiextensionsv1.ConditionTrue
			}
			if !ok {
				t.Errorf("%s is not %s after Install returned: %v", crd.Name, want, c.Status.Conditions)
			}
		}
	}
}

func TestInstallNamesACRDThatIsNotEstablished(t *testing.T) {
	install(t)
	conflict := &apiextensionsv1.CustomResourceDefinition{
		ObjectMeta: metav1.ObjectMeta{
			Name:        "conflicts.metacontroller.k8s.io",
			Annotations: map[string]string{"api-approved.kubernetes.io": "unapproved"},
		},
		Spec: apiextensionsv1.CustomResourceDefinitionSpec{
			Group: "metacontroller.k8s.io",
			// The short name cc belongs to compositecontrollers in the same group.
			Names: apiextensionsv1.CustomResourceDefinitionNames{Plural: "conflicts", Singular: "conflict", Kind: "Conflict", ListKind: "ConflictList", ShortNames: []string{"cc"}},
			Scope: apiextensionsv1.ClusterScoped,
			Versions: []apiextensionsv1.CustomResourceDefinitionVersion{{
				Name: "v1", Served: true, Storage: true,
				Schema: &apiextensionsv1.CustomResourceValidation{OpenAPIV3Schema: &apiextensionsv1.JSONSchemaProps{Type: "object"}},
			}},
		},
	}
	t.Cleanup(func() {
		_ = env.Extensions.ApiextensionsV1().CustomResourceDefinitions().Delete(context.Background(), conflict.Name, metav1.DeleteOptions{})
	})
	ctx, cancel := context.WithTimeout(kubetest.Context(t), 3*time.Second)
	defer cancel()
	err := crds.Install(ctx, env.Extensions, conflict)
	if err == nil {
		t.Fatal("Install returned nil for a CRD whose short name is taken")
	}
	t.Logf("Install: %v", err)
	for _, want := range []string{"conflicts.metacontroller.k8s.io", "NamesAccepted=False", "ShortNamesConflict", `"cc"`} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("the error does not mention %s: %v", want, err)
		}
	}
	if !errors.Is(err, context.DeadlineExceeded) {
		t.Errorf("the error does not wrap context.DeadlineExceeded: %v", err)
	}
}

func TestSeedManifestApplies(t *testing.T) {
	install(t)
	seed := manifest(t, "seed-compositecontroller.yaml")
	mustCreate(t, seed, "")
	got := get(t, seed, "")

	// Stored as written, except for the hook version that defaults to v1 as upstream.
	want := seed.DeepCopy()
	if err := unstructured.SetNestedField(want.Object, "v1", "spec", "hooks", "sync", "version"); err != nil {
		t.Fatal(err)
	}
	sameJSON(t, "the seed CompositeController's spec", got.Object["spec"], want.Object["spec"])

	var typed v1alpha1.CompositeController
	decodeStrict(t, got, &typed)
	if typed.Spec.GenerateSelector == nil || !*typed.Spec.GenerateSelector || len(typed.Spec.ChildResources) != 4 ||
		typed.Spec.ChildResources[2].UpdateStrategy.Method != v1alpha1.ChildUpdateInPlace {
		t.Errorf("decoded seed = %+v", typed.Spec)
	}
}

func TestUpstreamStyleDecoratorControllerApplies(t *testing.T) {
	install(t)
	dc := manifest(t, "upstream-decoratorcontroller.yaml")
	mustCreate(t, dc, "")
	want := dc.DeepCopy()
	_ = unstructured.SetNestedField(want.Object, "v1", "spec", "hooks", "sync", "version")
	sameJSON(t, "the DecoratorController's spec", get(t, dc, "").Object["spec"], want.Object["spec"])
}

// decodeStrict decodes obj into a Go type of the engine, failing on unknown fields.
func decodeStrict(t *testing.T, obj *unstructured.Unstructured, into any) {
	t.Helper()
	data, err := obj.MarshalJSON()
	if err != nil {
		t.Fatal(err)
	}
	dec := json.NewDecoder(strings.NewReader(string(data)))
	dec.DisallowUnknownFields()
	if err := dec.Decode(into); err != nil {
		t.Fatalf("the stored %s does not decode into %T: %v", obj.GetKind(), into, err)
	}
}

func TestKitchenSinksRoundTripUnchanged(t *testing.T) {
	install(t)
	for _, tc := range []struct {
		file  string
		typed any
	}{
		{"kitchen-sink-compositecontroller.yaml", &v1alpha1.CompositeController{}},
		{"kitchen-sink-decoratorcontroller.yaml", &v1alpha1.DecoratorController{}},
	} {
		t.Run(tc.file, func(t *testing.T) {
			obj := manifest(t, tc.file)
			created := mustCreate(t, obj, "")
			sameJSON(t, "the spec returned by create", created.Object["spec"], obj.Object["spec"])
			got := get(t, obj, "")
			sameJSON(t, "the spec read back", got.Object["spec"], obj.Object["spec"])
			decodeStrict(t, got, tc.typed)

			// The status subresource takes the engine's status.
			status := map[string]any{
				"observedGeneration": got.GetGeneration(),
				"conditions": []any{
					map[string]any{
						"type": "Ready", "status": "True", "reason": "Synced", "message": "all hooks answered",
						"observedGeneration": got.GetGeneration(), "lastTransitionTime": "2026-01-02T03:04:05Z",
					},
					map[string]any{
						"type": "metalambda.dev/Unsupported", "status": "False", "reason": "AllSupported", "message": "",
						"lastTransitionTime": "2026-01-02T03:04:05Z",
					},
				},
			}
			got.Object["status"] = status
			updated, err := resourceFor(t, obj, "").UpdateStatus(kubetest.Context(t), got, metav1.UpdateOptions{})
			if err != nil {
				t.Fatalf("update status: %v", err)
			}
			sameJSON(t, "the status", updated.Object["status"], status)
			sameJSON(t, "the spec after a status update", updated.Object["spec"], obj.Object["spec"])
		})
	}
}

// table reads one object through the apiserver's Table conversion, as kubectl get does,
// and returns the column names and the cells of its row.
func table(t *testing.T, path string) (columns []string, cells []any) {
	t.Helper()
	raw, err := env.Kube.CoreV1().RESTClient().Get().AbsPath(path).
		SetHeader("Accept", "application/json;as=Table;v=v1;g=meta.k8s.io").
		DoRaw(kubetest.Context(t))
	if err != nil {
		t.Fatal(err)
	}
	var tbl metav1.Table
	if err := json.Unmarshal(raw, &tbl); err != nil {
		t.Fatal(err)
	}
	for _, c := range tbl.ColumnDefinitions {
		columns = append(columns, c.Name)
	}
	if len(tbl.Rows) != 1 {
		t.Fatalf("%s: %d table rows", path, len(tbl.Rows))
	}
	return columns, tbl.Rows[0].Cells
}

func TestPrinterColumns(t *testing.T) {
	install(t)
	obj := manifest(t, "kitchen-sink-compositecontroller.yaml")
	obj.SetName("printer-columns")
	created := mustCreate(t, obj, "")
	created.Object["status"] = map[string]any{"conditions": []any{map[string]any{
		"type": "Ready", "status": "True", "reason": "Synced", "message": "ok", "lastTransitionTime": "2026-01-02T03:04:05Z",
	}}}
	if _, err := env.Dynamic.Resource(ccGVR).UpdateStatus(kubetest.Context(t), created, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	ns := env.Namespace(t)
	mustCreate(t, manifest(t, "controllerrevision.yaml"), ns)

	for _, tc := range []struct {
		path    string
		columns []string
		cells   map[int]any
	}{{
		path:    "/apis/metacontroller.k8s.io/v1alpha1/compositecontrollers/printer-columns",
		columns: []string{"Name", "Parent", "Parent-API", "Ready", "Reason", "Age"},
		cells:   map[int]any{1: "widgets", 2: "example.com/v1", 3: "True", 4: "Synced"},
	}, {
		path:    "/apis/metacontroller.k8s.io/v1alpha1/namespaces/" + ns + "/controllerrevisions/widgets.example.com-5b1d8a3f",
		columns: []string{"Name", "Resource", "API-Group", "Age"},
		cells:   map[int]any{1: "widgets", 2: "example.com"},
	}} {
		columns, cells := table(t, tc.path)
		if !slices.Equal(columns, tc.columns) {
			t.Errorf("%s: columns = %v, want %v", tc.path, columns, tc.columns)
			continue
		}
		for i, want := range tc.cells {
			if cells[i] != want {
				t.Errorf("%s: column %s = %v, want %v", tc.path, columns[i], cells[i], want)
			}
		}
	}
}

func TestControllerRevisionRoundTrips(t *testing.T) {
	install(t)
	ns := env.Namespace(t)
	obj := manifest(t, "controllerrevision.yaml")
	mustCreate(t, obj, ns)
	got := get(t, obj, ns)
	for _, field := range []string{"parentPatch", "children"} {
		sameJSON(t, field, got.Object[field], obj.Object[field])
	}
	sameJSON(t, "labels", got.GetLabels(), obj.GetLabels())
	var typed v1alpha1.ControllerRevision
	decodeStrict(t, got, &typed)
	if len(typed.Children) != 2 || typed.Children[0].Kind != "Pod" || len(typed.ParentPatch.Raw) == 0 {
		t.Errorf("decoded ControllerRevision = %+v", typed)
	}
}

func TestInvalidManifestsAreRefused(t *testing.T) {
	install(t)
	seed := func(name string, edit func(obj map[string]any)) *unstructured.Unstructured {
		obj := manifest(t, "seed-compositecontroller.yaml")
		obj.SetName(name)
		edit(obj.Object)
		return obj
	}
	set := func(value any, path ...string) func(map[string]any) {
		return func(obj map[string]any) {
			if err := unstructured.SetNestedField(obj, value, path...); err != nil {
				t.Fatal(err)
			}
		}
	}
	for _, tc := range []struct {
		name string
		obj  *unstructured.Unstructured
		want []string
	}{{
		name: "update method Bogus",
		obj:  manifest(t, "invalid-method-compositecontroller.yaml"),
		want: []string{`spec.childResources[0].updateStrategy.method`, `Unsupported value: "Bogus"`,
			`supported values: "OnDelete", "Recreate", "InPlace", "RollingRecreate", "RollingInPlace"`},
	}, {
		name: "hook version v3",
		obj:  seed("invalid-version", set("v3", "spec", "hooks", "sync", "version")),
		want: []string{"spec.hooks.sync.version", `Unsupported value: "v3"`, `"v1", "v2"`},
	}, {
		name: "responseUnMarshallMode lenient",
		obj:  seed("invalid-unmarshall", set("lenient", "spec", "hooks", "sync", "webhook", "responseUnMarshallMode")),
		want: []string{"spec.hooks.sync.webhook.responseUnMarshallMode", `"loose", "strict"`},
	}, {
		name: "no parentResource",
		obj:  seed("invalid-no-parent", func(obj map[string]any) { unstructured.RemoveNestedField(obj, "spec", "parentResource") }),
		want: []string{"spec.parentResource: Required value"},
	}, {
		name: "child without resource",
		obj:  seed("invalid-child", set([]any{map[string]any{"apiVersion": "v1"}}, "spec", "childResources")),
		want: []string{"spec.childResources[0].resource: Required value"},
	}, {
		name: "port is not a number",
		obj:  seed("invalid-port", set(map[string]any{"name": "a", "namespace": "b", "port": "eighty"}, "spec", "hooks", "sync", "webhook", "service")),
		want: []string{"spec.hooks.sync.webhook.service.port", "integer"},
	}, {
		name: "attachment method Bogus",
		obj: func() *unstructured.Unstructured {
			obj := manifest(t, "upstream-decoratorcontroller.yaml")
			obj.SetName("invalid-attachment")
			_ = unstructured.SetNestedSlice(obj.Object, []any{map[string]any{"apiVersion": "v1", "resource": "services", "updateStrategy": map[string]any{"method": "Bogus"}}}, "spec", "attachments")
			return obj
		}(),
		want: []string{"spec.attachments[0].updateStrategy.method", `Unsupported value: "Bogus"`},
	}} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := create(t, tc.obj, "")
			if err == nil {
				t.Fatalf("the apiserver accepted %s", tc.name)
			}
			t.Logf("refused: %v", err)
			if !apierrors.IsInvalid(err) {
				t.Errorf("error is not Invalid: %v", err)
			}
			for _, want := range tc.want {
				if !strings.Contains(err.Error(), want) {
					t.Errorf("the error does not mention %s: %v", want, err)
				}
			}
		})
	}
}
