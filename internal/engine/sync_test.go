package engine

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	dynamicfake "k8s.io/client-go/dynamic/fake"
	clienttesting "k8s.io/client-go/testing"
	"k8s.io/client-go/tools/record"

	"github.com/metalambda/metalambda/internal/apis/metacontroller/v1alpha1"
	"github.com/metalambda/metalambda/internal/engine/discovery"
	"github.com/metalambda/metalambda/internal/engine/hook"
	"github.com/metalambda/metalambda/internal/engine/informer"
)

// fakeCaller answers every hook call with one JSON body, or fails.
type fakeCaller struct {
	body  string
	err   error
	calls int
}

func (f *fakeCaller) Call(_ context.Context, _ hook.Endpoint, _ hook.CallInfo, _, response any) error {
	f.calls++
	if f.err != nil {
		return f.err
	}
	return json.Unmarshal([]byte(f.body), response)
}

var (
	testParents    = schema.GroupVersionResource{Group: "test.metalambda.dev", Version: "v1", Resource: "parents"}
	testConfigMaps = schema.GroupVersionResource{Version: "v1", Resource: "configmaps"}
)

func testParent(status map[string]any) *unstructured.Unstructured {
	p := &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": "test.metalambda.dev/v1", "kind": "Parent",
		"metadata": map[string]any{"name": "p", "namespace": "ns", "uid": "u1", "generation": int64(1)},
		"spec":     map[string]any{},
	}}
	if status != nil {
		p.Object["status"] = status
	}
	return p
}

// syncWith runs one sync of parent p against a fake API holding objs, with the hook
// answering as caller does; it returns the writes made, as "verb resource[/sub] name".
func syncWith(t *testing.T, caller *fakeCaller, objs []runtime.Object, failCreate string) ([]string, error) {
	t.Helper()
	dyn := dynamicfake.NewSimpleDynamicClientWithCustomListKinds(runtime.NewScheme(), map[schema.GroupVersionResource]string{
		testParents: "ParentList", testConfigMaps: "ConfigMapList",
	}, objs...)
	if failCreate != "" {
		dyn.PrependReactor("create", "configmaps", func(a clienttesting.Action) (bool, runtime.Object, error) {
			obj := a.(clienttesting.CreateAction).GetObject().(*unstructured.Unstructured)
			return obj.GetName() == failCreate, nil, errors.New("admission webhook denied the request")
		})
	}
	factory := informer.NewFactory(dyn, informer.Options{})
	parents, children := factory.Subscribe(testParents), factory.Subscribe(testConfigMaps)
	defer parents.Close()
	defer children.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if !parents.WaitForSync(ctx) || !children.WaitForSync(ctx) {
		t.Fatal("informers did not sync")
	}
	opts := Defaults()
	opts.ApplyStrategy = ThreeWay
	env := &environment{opts: opts, dynamic: dyn, meta: dynamicWrites{dyn}, recorder: record.NewFakeRecorder(10), own: newOwnWrites()}
	c := &controller{
		kind: CompositeKind, name: "c", env: env, caller: caller,
		hooks:  hooks{sync: &hook.Endpoint{URL: "http://hook.example/sync"}},
		flavor: &composite{env: env, generateSelector: true},
		parents: []*parentType{{
			res: &discovery.Resource{GroupVersionResource: testParents, Kind: "Parent", Namespaced: true, HasStatus: true},
			sub: parents, selects: func(*unstructured.Unstructured) bool { return true },
		}},
		children: []*childType{{
			rule:   v1alpha1.ResourceRule{APIVersion: "v1", Resource: "configmaps"},
			res:    &discovery.Resource{GroupVersionResource: testConfigMaps, Kind: "ConfigMap", Namespaced: true},
			sub:    children,
			method: v1alpha1.ChildUpdateInPlace,
		}},
	}
	dyn.ClearActions()
	_, err := c.reconcile(ctx, parentKey{namespace: "ns", name: "p"})
	var writes []string
	for _, a := range dyn.Actions() {
		switch a.GetVerb() {
		case "create", "update", "patch", "delete":
			res := a.GetResource().Resource
			if a.GetSubresource() != "" {
				res += "/" + a.GetSubresource()
			}
			var name string
			switch a := a.(type) {
			case interface{ GetObject() runtime.Object }: // create and update
				name = a.GetObject().(*unstructured.Unstructured).GetName()
			case clienttesting.PatchAction:
				name = a.GetName()
			case clienttesting.DeleteAction:
				name = a.GetName()
			}
			writes = append(writes, a.GetVerb()+" "+res+" "+name)
		}
	}
	slices.Sort(writes)
	return writes, err
}

// ownedConfigMap is a child as the engine created it for the hook's answer `{"data": {"k": "v"}}`.
func ownedConfigMap(t *testing.T, name string) *unstructured.Unstructured {
	t.Helper()
	d := &unstructured.Unstructured{Object: configMapObject(name)}
	c := &controller{env: &environment{opts: Options{ApplyStrategy: ThreeWay}, own: newOwnWrites()}, flavor: &composite{generateSelector: true}}
	c.flavor.prepareChild(testParent(nil), d)
	if err := c.stamp(d); err != nil {
		t.Fatal(err)
	}
	return d
}

func configMapObject(name string) map[string]any {
	return map[string]any{"apiVersion": "v1", "kind": "ConfigMap", "metadata": map[string]any{"name": name, "namespace": "ns"}, "data": map[string]any{"k": "v"}}
}

func TestSyncPhases(t *testing.T) {
	twoChildren := `{"status": {"ready": 2}, "children": [
		{"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "a"}, "data": {"k": "v"}},
		{"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "b"}, "data": {"k": "v"}}]}`
	tests := []struct {
		name       string
		caller     *fakeCaller
		existing   []string // children that exist, as the hook wants them
		status     map[string]any
		failCreate string
		want       []string
		wantErr    string
	}{{
		name:     "a failing hook writes nothing",
		caller:   &fakeCaller{err: errors.New("connection refused")},
		existing: []string{"a"},
		wantErr:  "connection refused",
	}, {
		name:     "a child of an undeclared type writes nothing",
		caller:   &fakeCaller{body: `{"children": [{"apiVersion": "v1", "kind": "Secret", "metadata": {"name": "s"}}]}`},
		existing: []string{"a"},
		wantErr:  "not a declared child resource",
	}, {
		name:   "missing children are created and the status written",
		caller: &fakeCaller{body: twoChildren},
		want:   []string{"create configmaps a", "create configmaps b", "update parents/status p"},
	}, {
		name:       "a failed child write still writes the status",
		caller:     &fakeCaller{body: twoChildren},
		failCreate: "b",
		want:       []string{"create configmaps a", "create configmaps b", "update parents/status p"},
		wantErr:    "create ConfigMap ns/b: admission webhook denied the request",
	}, {
		name:     "children the hook no longer returns are deleted",
		caller:   &fakeCaller{body: `{"status": {"ready": 2}, "children": []}`},
		existing: []string{"a"},
		status:   map[string]any{"ready": int64(2), "observedGeneration": int64(1)},
		want:     []string{"delete configmaps a"},
	}, {
		name:     "in sync: nothing written",
		caller:   &fakeCaller{body: twoChildren},
		existing: []string{"a", "b"},
		status:   map[string]any{"ready": int64(2), "observedGeneration": int64(1)},
	}}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			objs := []runtime.Object{testParent(tt.status)}
			for _, name := range tt.existing {
				objs = append(objs, ownedConfigMap(t, name))
			}
			writes, err := syncWith(t, tt.caller, objs, tt.failCreate)
			if fmt.Sprint(writes) != fmt.Sprint(tt.want) {
				t.Errorf("writes %q, want %q", writes, tt.want)
			}
			if (err == nil) != (tt.wantErr == "") || (err != nil && !strings.Contains(err.Error(), tt.wantErr)) {
				t.Errorf("error %v, want %q", err, tt.wantErr)
			}
			if tt.caller.calls != 1 {
				t.Errorf("%d hook calls, want 1", tt.caller.calls)
			}
		})
	}
}
