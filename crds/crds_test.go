package crds

import (
	"context"
	"encoding/json"
	"fmt"
	"maps"
	"os"
	"path/filepath"
	"reflect"
	"slices"
	"strings"
	"testing"
	"testing/fstest"

	"k8s.io/apiextensions-apiserver/pkg/apis/apiextensions"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	apivalidation "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/validation"
	structuralschema "k8s.io/apiextensions-apiserver/pkg/apiserver/schema"
	"k8s.io/apiextensions-apiserver/pkg/apiserver/schema/pruning"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/util/validation/field"

	"github.com/google/go-cmp/cmp"
	"sigs.k8s.io/yaml"

	"github.com/metalambda/metalambda/internal/apis/metacontroller/v1alpha1"
	fnv1 "github.com/metalambda/metalambda/internal/apis/metalambda/v1alpha1"
)

const (
	ccName  = "compositecontrollers.metacontroller.k8s.io"
	dcName  = "decoratorcontrollers.metacontroller.k8s.io"
	crName  = "controllerrevisions.metacontroller.k8s.io"
	fnName  = "functions.metalambda.dev"
	nccName = "namespacedcompositecontrollers.metalambda.dev"
	ndcName = "namespaceddecoratorcontrollers.metalambda.dev"
)

func mustAll(t *testing.T) map[string]*apiextensionsv1.CustomResourceDefinition {
	t.Helper()
	all, err := All()
	if err != nil {
		t.Fatal(err)
	}
	byName := map[string]*apiextensionsv1.CustomResourceDefinition{}
	for _, crd := range all {
		byName[crd.Name] = crd
	}
	return byName
}

func TestAllReturnsTheMetacontrollerCRDs(t *testing.T) {
	byName := mustAll(t)
	for _, tc := range []struct {
		name, kind string
		scope      apiextensionsv1.ResourceScope
		shortNames []string
		status     bool
	}{
		{ccName, "CompositeController", apiextensionsv1.ClusterScoped, []string{"cc", "cctl"}, true},
		{dcName, "DecoratorController", apiextensionsv1.ClusterScoped, []string{"dec", "decorators"}, true},
		{crName, "ControllerRevision", apiextensionsv1.NamespaceScoped, nil, false},
	} {
		t.Run(tc.kind, func(t *testing.T) {
			crd := byName[tc.name]
			if crd == nil {
				t.Fatalf("All() lacks %s; it returned %v", tc.name, slices.Sorted(maps.Keys(byName)))
			}
			if got := crd.Annotations["api-approved.kubernetes.io"]; got != "unapproved" {
				t.Errorf("annotation api-approved.kubernetes.io = %q, want unapproved", got)
			}
			if crd.Spec.Group != "metacontroller.k8s.io" || crd.Spec.Names.Kind != tc.kind || crd.Spec.Names.ListKind != tc.kind+"List" {
				t.Errorf("group/kind/listKind = %s/%s/%s", crd.Spec.Group, crd.Spec.Names.Kind, crd.Spec.Names.ListKind)
			}
			if want := strings.TrimSuffix(tc.name, ".metacontroller.k8s.io"); crd.Spec.Names.Plural != want || crd.Spec.Names.Singular != strings.ToLower(tc.kind) {
				t.Errorf("plural/singular = %s/%s", crd.Spec.Names.Plural, crd.Spec.Names.Singular)
			}
			if crd.Spec.Scope != tc.scope {
				t.Errorf("scope = %s, want %s", crd.Spec.Scope, tc.scope)
			}
			if !slices.Equal(crd.Spec.Names.ShortNames, tc.shortNames) {
				t.Errorf("short names = %v, want %v", crd.Spec.Names.ShortNames, tc.shortNames)
			}
			if len(crd.Spec.Versions) != 1 {
				t.Fatalf("versions = %d, want only v1alpha1", len(crd.Spec.Versions))
			}
			v := crd.Spec.Versions[0]
			if v.Name != "v1alpha1" || !v.Served || !v.Storage {
				t.Errorf("version %s served=%v storage=%v, want v1alpha1 served and stored", v.Name, v.Served, v.Storage)
			}
			if hasStatus := v.Subresources != nil && v.Subresources.Status != nil; hasStatus != tc.status {
				t.Errorf("status subresource = %v, want %v", hasStatus, tc.status)
			}
			if v.Schema == nil || v.Schema.OpenAPIV3Schema == nil {
				t.Fatal("no schema")
			}
		})
	}
}

// TestAllReturnsFreshCopies guards callers that modify what All returns.
func TestAllReturnsFreshCopies(t *testing.T) {
	first := mustAll(t)
	first[ccName].Spec.Names.ShortNames = nil
	if second := mustAll(t); len(second[ccName].Spec.Names.ShortNames) == 0 {
		t.Fatal("a change to one All() result is visible in the next")
	}
}

// TestSchemasAreStructural converts each CRD to the internal apiextensions type and
// checks its schema with the structural-schema builder and validator of
// k8s.io/apiextensions-apiserver. (The full CRD validation of
// pkg/apis/apiextensions/validation would pull k8s.io/apiserver and cel-go into go.mod;
// the integration test gets it from the real kube-apiserver instead.)
func TestSchemasAreStructural(t *testing.T) {
	all, err := All()
	if err != nil {
		t.Fatal(err)
	}
	for _, crd := range all {
		t.Run(crd.Name, func(t *testing.T) {
			for _, v := range crd.Spec.Versions {
				structural(t, crd, v.Name)
			}
		})
	}
}

func structural(t *testing.T, v1crd *apiextensionsv1.CustomResourceDefinition, version string) *structuralschema.Structural {
	t.Helper()
	crd := v1crd.DeepCopy()
	apiextensionsv1.SetObjectDefaults_CustomResourceDefinition(crd)
	internal := &apiextensions.CustomResourceDefinition{}
	if err := apiextensionsv1.Convert_v1_CustomResourceDefinition_To_apiextensions_CustomResourceDefinition(crd, internal, nil); err != nil {
		t.Fatal(err)
	}
	s, err := apiextensions.GetSchemaForVersion(internal, version)
	if err != nil || s == nil || s.OpenAPIV3Schema == nil {
		t.Fatalf("%s version %s: no schema (%v)", crd.Name, version, err)
	}
	ss, err := structuralschema.NewStructural(s.OpenAPIV3Schema)
	if err != nil {
		t.Fatalf("%s version %s: not structural: %v", crd.Name, version, err)
	}
	for _, e := range structuralschema.ValidateStructural(field.NewPath("openAPIV3Schema"), ss) {
		t.Errorf("%s version %s: not structural: %v", crd.Name, version, e)
	}
	return ss
}

// TestTestdataIsNotPruned prunes the integration test's manifests with the schemas,
// offline, as the apiserver would: nothing may be dropped.
func TestTestdataIsNotPruned(t *testing.T) {
	byKind := map[string]*apiextensionsv1.CustomResourceDefinition{}
	for _, crd := range mustAll(t) {
		byKind[crd.Spec.Names.Kind] = crd
	}
	paths, err := filepath.Glob("testdata/*.yaml")
	if err != nil || len(paths) == 0 {
		t.Fatalf("no testdata (%v)", err)
	}
	for _, path := range paths {
		data, err := os.ReadFile(path)
		if err != nil {
			t.Fatal(err)
		}
		var obj map[string]any
		if err := yaml.Unmarshal(data, &obj); err != nil {
			t.Fatalf("%s: %v", path, err)
		}
		kind, _ := obj["kind"].(string)
		crd := byKind[kind]
		if crd == nil {
			t.Fatalf("%s: no CRD for kind %q", path, kind)
		}
		pruned := pruning.PruneWithOptions(obj, structural(t, crd, "v1alpha1"), true, structuralschema.UnknownFieldPathOptions{TrackUnknownFieldPaths: true})
		if len(pruned) > 0 {
			t.Errorf("%s: the schema would prune %v", path, pruned)
		}
	}
}

// TestSchemasMatchTheGoTypes walks the Go types the engine decodes next to the schemas:
// every JSON field has a property of the right type, every property is a JSON field
// (no misspelt names), and exactly the fields without omitempty are required.
func TestSchemasMatchTheGoTypes(t *testing.T) {
	byName := mustAll(t)
	for name, typ := range map[string]reflect.Type{
		ccName:  reflect.TypeFor[v1alpha1.CompositeController](),
		dcName:  reflect.TypeFor[v1alpha1.DecoratorController](),
		crName:  reflect.TypeFor[v1alpha1.ControllerRevision](),
		fnName:  reflect.TypeFor[fnv1.Function](),
		nccName: reflect.TypeFor[fnv1.NamespacedCompositeController](),
		ndcName: reflect.TypeFor[fnv1.NamespacedDecoratorController](),
	} {
		t.Run(typ.Name(), func(t *testing.T) {
			schema := byName[name].Spec.Versions[0].Schema.OpenAPIV3Schema
			requireServiceNamespace(schema) // namespaced controllers' Services default it
			checkSchema(t, "", typ, schema)
		})
	}
}

var (
	durationType    = reflect.TypeFor[metav1.Duration]()
	timeType        = reflect.TypeFor[metav1.Time]()
	rawType         = reflect.TypeFor[runtime.RawExtension]()
	objectMetaType  = reflect.TypeFor[metav1.ObjectMeta]()
	stringMapSchema = apiextensionsv1.JSONSchemaProps{Type: "string"}
)

func checkSchema(t *testing.T, path string, typ reflect.Type, s *apiextensionsv1.JSONSchemaProps) {
	t.Helper()
	for typ.Kind() == reflect.Pointer {
		typ = typ.Elem()
	}
	want := func(schemaType, format string) {
		t.Helper()
		if s.Type != schemaType || s.Format != format {
			t.Errorf("%s (%s): schema type %q format %q, want %q %q", path, typ, s.Type, s.Format, schemaType, format)
		}
	}
	switch typ {
	case durationType:
		want("string", "")
		return
	case timeType:
		want("string", "date-time")
		return
	case rawType:
		want("object", "")
		if s.XPreserveUnknownFields == nil || !*s.XPreserveUnknownFields {
			t.Errorf("%s: a RawExtension needs x-kubernetes-preserve-unknown-fields", path)
		}
		return
	case objectMetaType:
		want("object", "")
		return
	}
	switch typ.Kind() {
	case reflect.String:
		want("string", "")
	case reflect.Bool:
		want("boolean", "")
	case reflect.Int32:
		want("integer", "int32")
	case reflect.Int64:
		want("integer", "int64")
	case reflect.Slice:
		want("array", "")
		if s.Items == nil || s.Items.Schema == nil {
			t.Errorf("%s: array without items schema", path)
			return
		}
		checkSchema(t, path+"[]", typ.Elem(), s.Items.Schema)
	case reflect.Map:
		want("object", "")
		if typ.Key().Kind() != reflect.String {
			t.Fatalf("%s: unexpected map type %s", path, typ)
		}
		if typ.Elem().Kind() == reflect.Struct {
			if s.AdditionalProperties == nil || s.AdditionalProperties.Schema == nil {
				t.Errorf("%s: a map of objects needs an additionalProperties schema", path)
				return
			}
			checkSchema(t, path+"{}", typ.Elem(), s.AdditionalProperties.Schema)
			return
		}
		if typ.Elem().Kind() != reflect.String {
			t.Fatalf("%s: unexpected map type %s", path, typ)
		}
		if s.AdditionalProperties == nil || s.AdditionalProperties.Schema == nil || !reflect.DeepEqual(*s.AdditionalProperties.Schema, stringMapSchema) {
			t.Errorf("%s: a map of strings needs additionalProperties {type: string}", path)
		}
	case reflect.Struct:
		want("object", "")
		checkStruct(t, path, typ, s)
	default:
		t.Fatalf("%s: no rule for Go type %s", path, typ)
	}
}

type jsonField struct {
	name      string
	omitempty bool
	typ       reflect.Type
	index     []int // for reflect.Value.FieldByIndex
}

// jsonFields lists the JSON fields of a struct, flattening inlined and embedded ones.
func jsonFields(typ reflect.Type) []jsonField {
	var out []jsonField
	for f := range typ.Fields() {
		tag := f.Tag.Get("json")
		if tag == "-" || !f.IsExported() {
			continue
		}
		name, opts, _ := strings.Cut(tag, ",")
		if f.Anonymous && name == "" {
			for _, inner := range jsonFields(f.Type) {
				inner.index = append([]int{f.Index[0]}, inner.index...)
				out = append(out, inner)
			}
			continue
		}
		if name == "" {
			name = f.Name
		}
		out = append(out, jsonField{
			name:      name,
			omitempty: slices.Contains(strings.Split(opts, ","), "omitempty"),
			typ:       f.Type,
			index:     slices.Clone(f.Index),
		})
	}
	return out
}

func checkStruct(t *testing.T, path string, typ reflect.Type, s *apiextensionsv1.JSONSchemaProps) {
	t.Helper()
	var required []string
	fields := map[string]bool{}
	for _, f := range jsonFields(typ) {
		fields[f.name] = true
		if !f.omitempty {
			required = append(required, f.name)
		}
		prop, ok := s.Properties[f.name]
		if !ok {
			t.Errorf("%s: the schema lacks the field %q of %s", path, f.name, typ)
			continue
		}
		checkSchema(t, path+"."+f.name, f.typ, &prop)
	}
	for name := range s.Properties {
		if !fields[name] {
			t.Errorf("%s: the schema has a property %q that %s does not", path, name, typ)
		}
	}
	slices.Sort(required)
	if got := slices.Sorted(slices.Values(s.Required)); !slices.Equal(got, required) {
		t.Errorf("%s: required = %v, want the fields without omitempty: %v", path, got, required)
	}
}

// TestRepeatedSchemasAreIdentical guards the hand-maintained copies: every hook, and
// every caBundle, authorization, basicAuth, clientTLS and label selector, must have the
// same schema wherever it appears.
func TestRepeatedSchemasAreIdentical(t *testing.T) {
	byName := mustAll(t)
	root := func(name string) apiextensionsv1.JSONSchemaProps {
		return *byName[name].Spec.Versions[0].Schema.OpenAPIV3Schema
	}
	cc, dc := root(ccName), root(dcName)
	at := func(s apiextensionsv1.JSONSchemaProps, path ...string) apiextensionsv1.JSONSchemaProps {
		t.Helper()
		for _, p := range path {
			if p == "[]" {
				s = *s.Items.Schema
				continue
			}
			next, ok := s.Properties[p]
			if !ok {
				t.Fatalf("no property %s in %v", p, path)
			}
			s = next
		}
		s.Description = ""
		return s
	}
	same := func(what string, want apiextensionsv1.JSONSchemaProps, others map[string]apiextensionsv1.JSONSchemaProps) {
		t.Helper()
		for where, got := range others {
			if !reflect.DeepEqual(got, want) {
				t.Errorf("%s at %s differs from the reference copy: %s", what, where, firstDifference(t, got, want))
			}
		}
	}

	hook := at(cc, "spec", "hooks", "sync")
	hooks := map[string]apiextensionsv1.JSONSchemaProps{}
	for _, h := range []string{"customize", "finalize", "preUpdateChild", "postUpdateChild"} {
		hooks["cc "+h] = at(cc, "spec", "hooks", h)
	}
	for _, h := range []string{"customize", "sync", "finalize"} {
		hooks["dc "+h] = at(dc, "spec", "hooks", h)
	}
	same("Hook", hook, hooks)

	for _, part := range []string{"caBundle", "authorization", "basicAuth", "clientTLS"} {
		want := at(hook, "webhook", part)
		same(part, want, map[string]apiextensionsv1.JSONSchemaProps{
			"cc endpointConfigs": at(cc, "spec", "endpointConfigs", "[]", part),
			"dc endpointConfigs": at(dc, "spec", "endpointConfigs", "[]", part),
		})
	}
	same("endpointConfigs", at(cc, "spec", "endpointConfigs"), map[string]apiextensionsv1.JSONSchemaProps{
		"dc": at(dc, "spec", "endpointConfigs"),
	})
	same("labelSelector", at(cc, "spec", "parentResource", "labelSelector"), map[string]apiextensionsv1.JSONSchemaProps{
		"dc resources": at(dc, "spec", "resources", "[]", "labelSelector"),
	})
	selector := at(cc, "spec", "parentResource", "labelSelector", "matchExpressions")
	annotation := at(dc, "spec", "resources", "[]", "annotationSelector", "matchExpressions")
	selector.XListType = nil // atomic on label selectors, as metav1 declares; unset upstream for annotations
	same("matchExpressions", selector, map[string]apiextensionsv1.JSONSchemaProps{"dc annotationSelector": annotation})
	same("update method", at(cc, "spec", "childResources", "[]", "updateStrategy", "method"), map[string]apiextensionsv1.JSONSchemaProps{
		"dc attachments": at(dc, "spec", "attachments", "[]", "updateStrategy", "method"),
	})
	same("status", at(cc, "status"), map[string]apiextensionsv1.JSONSchemaProps{"dc": at(dc, "status")})
}

func TestEnumsAndStatus(t *testing.T) {
	byName := mustAll(t)
	cc := byName[ccName].Spec.Versions[0].Schema.OpenAPIV3Schema
	spec := cc.Properties["spec"]
	method := spec.Properties["childResources"].Items.Schema.Properties["updateStrategy"].Properties["method"]
	if got, want := enumStrings(t, method.Enum), []string{"OnDelete", "Recreate", "InPlace", "RollingRecreate", "RollingInPlace"}; !slices.Equal(got, want) {
		t.Errorf("method enum = %v, want %v", got, want)
	}
	hook := spec.Properties["hooks"].Properties["sync"]
	if got := enumStrings(t, hook.Properties["version"].Enum); !slices.Equal(got, []string{"v1", "v2"}) {
		t.Errorf("hook version enum = %v", got)
	}
	if got := enumStrings(t, hook.Properties["webhook"].Properties["responseUnMarshallMode"].Enum); !slices.Equal(got, []string{"loose", "strict"}) {
		t.Errorf("responseUnMarshallMode enum = %v", got)
	}
	conditions := cc.Properties["status"].Properties["conditions"]
	if conditions.XListType == nil || *conditions.XListType != "map" || !slices.Equal(conditions.XListMapKeys, []string{"type"}) {
		t.Errorf("status.conditions must be a list-type map keyed by type")
	}
	var columns []string
	for _, c := range byName[ccName].Spec.Versions[0].AdditionalPrinterColumns {
		columns = append(columns, c.Name+"="+c.JSONPath)
	}
	for _, want := range []string{"Parent=.spec.parentResource.resource", `Ready=.status.conditions[?(@.type=="Ready")].status`, "Age=.metadata.creationTimestamp"} {
		if !slices.Contains(columns, want) {
			t.Errorf("CompositeController printer columns %v lack %s", columns, want)
		}
	}
}

func enumStrings(t *testing.T, enum []apiextensionsv1.JSON) []string {
	t.Helper()
	var out []string
	for _, e := range enum {
		var s string
		if err := json.Unmarshal(e.Raw, &s); err != nil {
			t.Fatalf("enum value %s: %v", e.Raw, err)
		}
		out = append(out, s)
	}
	return out
}

func TestLoadErrorsNameTheFile(t *testing.T) {
	const good = `apiVersion: apiextensions.k8s.io/v1
kind: CustomResourceDefinition
metadata: {name: widgets.example.com}
spec: {group: example.com, names: {plural: widgets, kind: Widget}, scope: Namespaced, versions: []}
`
	for _, tc := range []struct {
		name  string
		files fstest.MapFS
		want  string
	}{
		{"bad YAML", fstest.MapFS{"a.yaml": {Data: []byte(good)}, "b.yaml": {Data: []byte("spec: [unclosed")}}, "b.yaml"},
		{"unknown field", fstest.MapFS{"typo.yaml": {Data: []byte(strings.Replace(good, "scope:", "scoop:", 1))}}, `typo.yaml: document 1: error unmarshaling JSON: while decoding JSON: json: unknown field "scoop"`},
		{"wrong kind", fstest.MapFS{"cm.yaml": {Data: []byte("apiVersion: v1\nkind: ConfigMap\nmetadata: {name: x}\n")}}, "cm.yaml: document 1: is v1 ConfigMap"},
		{"only comments", fstest.MapFS{"empty.yaml": {Data: []byte("# nothing\n---\n")}}, "empty.yaml holds no CustomResourceDefinition"},
		{"duplicate", fstest.MapFS{"a.yaml": {Data: []byte(good)}, "b.yaml": {Data: []byte(good)}}, "b.yaml defines widgets.example.com, already defined in a.yaml"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := load(tc.files)
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("load error = %v, want one containing %q", err, tc.want)
			}
		})
	}

	multi := fstest.MapFS{
		"multi.yaml":      {Data: []byte("# header\n---\n" + good + "---\n" + strings.ReplaceAll(good, "widget", "gadget"))},
		"notes.txt":       {Data: []byte("not a CRD")},
		"testdata/x.yaml": {Data: []byte("not: a CRD")},
	}
	got, err := load(multi)
	if err != nil {
		t.Fatal(err)
	}
	if len(got) != 2 || got[0].Name != "widgets.example.com" || got[1].Name != "gadgets.example.com" {
		t.Fatalf("multi-document file gave %d CRDs", len(got))
	}
}

// TestKitchenSinksSetEveryField proves the integration test's kitchen-sink manifests
// cover the Go types: they decode strictly into them, and every field of the spec (and
// of the ControllerRevision) is set in at least one place.
func TestKitchenSinksSetEveryField(t *testing.T) {
	for file, obj := range map[string]any{
		"kitchen-sink-compositecontroller.yaml": &v1alpha1.CompositeController{},
		"kitchen-sink-decoratorcontroller.yaml": &v1alpha1.DecoratorController{},
		"controllerrevision.yaml":               &v1alpha1.ControllerRevision{},
	} {
		t.Run(file, func(t *testing.T) {
			data, err := os.ReadFile(filepath.Join("testdata", file))
			if err != nil {
				t.Fatal(err)
			}
			if err := yaml.UnmarshalStrict(data, obj); err != nil {
				t.Fatalf("does not decode strictly into %T: %v", obj, err)
			}
			v := reflect.ValueOf(obj).Elem()
			all, set := map[string]bool{}, map[string]bool{}
			allPaths(v.Type(), "", all)
			setPaths(v, "", set)
			for _, p := range slices.Sorted(maps.Keys(all)) {
				if !set[p] {
					t.Errorf("%s never sets %s", file, p)
				}
			}
		})
	}
}

// skipPaths are not part of what a manifest sets: metadata is the apiserver's, status
// is a subresource.
var skipPaths = map[string]bool{".metadata": true, ".status": true, ".apiVersion": true, ".kind": true}

// leaf reports whether a type is a value rather than something to walk into.
func leaf(typ reflect.Type) bool {
	switch typ {
	case durationType, timeType, rawType, objectMetaType:
		return true
	}
	return typ.Kind() != reflect.Struct && typ.Kind() != reflect.Slice
}

func allPaths(typ reflect.Type, prefix string, out map[string]bool) {
	for typ.Kind() == reflect.Pointer {
		typ = typ.Elem()
	}
	if skipPaths[prefix] {
		return
	}
	if prefix != "" {
		out[prefix] = true
	}
	switch {
	case leaf(typ):
	case typ.Kind() == reflect.Slice:
		allPaths(typ.Elem(), prefix+"[]", out)
	default:
		for _, f := range jsonFields(typ) {
			allPaths(f.typ, prefix+"."+f.name, out)
		}
	}
}

func setPaths(v reflect.Value, prefix string, out map[string]bool) {
	viaPointer := false // a pointer to false or 0 is set all the same
	for v.Kind() == reflect.Pointer {
		if v.IsNil() {
			return
		}
		v, viaPointer = v.Elem(), true
	}
	if skipPaths[prefix] {
		return
	}
	isSet := viaPointer || !v.IsZero()
	if v.Kind() == reflect.Slice {
		isSet = v.Len() > 0
	}
	if isSet && prefix != "" {
		out[prefix] = true
	}
	switch {
	case leaf(v.Type()):
	case v.Kind() == reflect.Slice:
		for i := range v.Len() {
			setPaths(v.Index(i), prefix+"[]", out)
		}
	default:
		for _, f := range jsonFields(v.Type()) {
			setPaths(v.FieldByIndex(f.index), prefix+"."+f.name, out)
		}
	}
}

// firstDifference names the first path at which two schemas differ, and both values.
func firstDifference(t *testing.T, got, want apiextensionsv1.JSONSchemaProps) string {
	t.Helper()
	toAny := func(s apiextensionsv1.JSONSchemaProps) any {
		data, err := json.Marshal(s)
		if err != nil {
			t.Fatal(err)
		}
		var v any
		if err := json.Unmarshal(data, &v); err != nil {
			t.Fatal(err)
		}
		return v
	}
	var walk func(path string, g, w any) string
	walk = func(path string, g, w any) string {
		gm, gok := g.(map[string]any)
		wm, wok := w.(map[string]any)
		if gok && wok {
			for _, k := range slices.Sorted(maps.Keys(wm)) {
				if d := walk(path+"."+k, gm[k], wm[k]); d != "" {
					return d
				}
			}
			for _, k := range slices.Sorted(maps.Keys(gm)) {
				if _, ok := wm[k]; !ok {
					return fmt.Sprintf("%s.%s: got %v, want nothing", path, k, gm[k])
				}
			}
			return ""
		}
		if !reflect.DeepEqual(g, w) {
			return fmt.Sprintf("%s: got %v, want %v", path, g, w)
		}
		return ""
	}
	return walk("", toAny(got), toAny(want))
}

// TestCRDsPassTheAPIServersValidation runs the API server's own validation of a
// CustomResourceDefinition over every CRD: its CEL rules compile and stay within
// the estimated cost the API server allows.
func TestCRDsPassTheAPIServersValidation(t *testing.T) {
	for _, crd := range mustAll(t) {
		t.Run(crd.Name, func(t *testing.T) {
			v1 := crd.DeepCopy()
			apiextensionsv1.SetObjectDefaults_CustomResourceDefinition(v1)
			internal := &apiextensions.CustomResourceDefinition{}
			if err := apiextensionsv1.Convert_v1_CustomResourceDefinition_To_apiextensions_CustomResourceDefinition(v1, internal, nil); err != nil {
				t.Fatal(err)
			}
			for _, err := range apivalidation.ValidateCustomResourceDefinition(context.Background(), internal) {
				t.Errorf("%s: %v", crd.Name, err)
			}
		})
	}
}

// TestNamespacedControllersKeepUpstreamsSpec: a namespaced controller's spec is the
// cluster-scoped one's plus serviceAccountName, so that a manifest moves from one to
// the other by changing its kind and adding a namespace.
func TestNamespacedControllersKeepUpstreamsSpec(t *testing.T) {
	byName := mustAll(t)
	for namespaced, upstream := range map[string]string{nccName: ccName, ndcName: dcName} {
		t.Run(namespaced, func(t *testing.T) {
			crd := byName[namespaced]
			if crd == nil {
				t.Fatalf("All() lacks %s", namespaced)
			}
			if crd.Spec.Scope != apiextensionsv1.NamespaceScoped || crd.Spec.Group != fnv1.Group {
				t.Errorf("scope %s group %s, want Namespaced %s", crd.Spec.Scope, crd.Spec.Group, fnv1.Group)
			}
			spec := crd.Spec.Versions[0].Schema.OpenAPIV3Schema.Properties["spec"]
			sa, ok := spec.Properties["serviceAccountName"]
			if !ok || sa.Default == nil || string(sa.Default.Raw) != `"default"` {
				t.Errorf("spec.serviceAccountName = %+v, want a string defaulting to \"default\"", sa)
			}
			delete(spec.Properties, "serviceAccountName")
			want := byName[upstream].Spec.Versions[0].Schema.OpenAPIV3Schema.Properties["spec"]
			spec.Description, want.Description = "", ""
			// The one difference: a hook's Service may leave its namespace out.
			requireServiceNamespace(&spec)
			got, _ := json.Marshal(spec)
			wantJSON, _ := json.Marshal(want)
			if string(got) != string(wantJSON) {
				t.Log(cmp.Diff(string(wantJSON), string(got)))
				t.Errorf("the spec schema of %s, without serviceAccountName, differs from %s's", namespaced, upstream)
			}
		})
	}
}

// requireServiceNamespace puts namespace back in the required fields of every
// webhook.service schema under s: a namespaced controller's may leave it out.
func requireServiceNamespace(s *apiextensionsv1.JSONSchemaProps) {
	if _, ok := s.Properties["port"]; ok && slices.Equal(s.Required, []string{"name"}) {
		if _, ok := s.Properties["namespace"]; ok {
			s.Required = append(s.Required, "namespace")
		}
	}
	for k, p := range s.Properties {
		requireServiceNamespace(&p)
		s.Properties[k] = p
	}
	if s.Items != nil && s.Items.Schema != nil {
		requireServiceNamespace(s.Items.Schema)
	}
	if s.AdditionalProperties != nil && s.AdditionalProperties.Schema != nil {
		requireServiceNamespace(s.AdditionalProperties.Schema)
	}
}
