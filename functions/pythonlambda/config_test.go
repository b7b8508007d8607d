package pythonlambda

import (
	"encoding/json"
	"errors"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/metalambda/metalambda/internal/apis/metacontroller/v1alpha1"
	"github.com/metalambda/metalambda/internal/hookapi"
)

func secretRef(name, key string) map[string]any {
	return map[string]any{"secretKeyRef": map[string]any{"name": name, "key": key}}
}

func TestEnvSourcesInvalid(t *testing.T) {
	tests := []struct {
		name string
		opt  parentOpt
		want string
	}{
		{"value and valueFrom", withSpec("env", []any{map[string]any{"name": "A", "value": "1", "valueFrom": secretRef("s", "k")}}), "spec.env[0]: value and valueFrom are both set"},
		{"two sources", withSpec("env", []any{map[string]any{"name": "A", "valueFrom": map[string]any{
			"secretKeyRef": map[string]any{"name": "s", "key": "k"}, "configMapKeyRef": map[string]any{"name": "c", "key": "k"}}}}), "give exactly one of secretKeyRef, configMapKeyRef and fieldRef"},
		{"resourceFieldRef", withSpec("env", []any{map[string]any{"name": "A", "valueFrom": map[string]any{"resourceFieldRef": map[string]any{"resource": "limits.cpu"}}}}), "give exactly one"},
		{"bad secret name", withSpec("env", []any{map[string]any{"name": "A", "valueFrom": secretRef("Not_A_Name", "k")}}), `spec.env[0].valueFrom.secretKeyRef.name "Not_A_Name"`},
		{"bad key", withSpec("env", []any{map[string]any{"name": "A", "valueFrom": secretRef("s", "a/b")}}), `spec.env[0].valueFrom.secretKeyRef.key "a/b"`},
		{"bad fieldPath", withSpec("env", []any{map[string]any{"name": "A", "valueFrom": map[string]any{"fieldRef": map[string]any{"fieldPath": "spec.containers"}}}}), `fieldPath "spec.containers" is not one`},
		{"envFrom empty", withSpec("envFrom", []any{map[string]any{"prefix": "X_"}}), "spec.envFrom[0]: give exactly one of secretRef and configMapRef"},
		{"envFrom both", withSpec("envFrom", []any{map[string]any{"secretRef": map[string]any{"name": "s"}, "configMapRef": map[string]any{"name": "c"}}}), "give exactly one"},
		{"envFrom bad prefix", withSpec("envFrom", []any{map[string]any{"prefix": "1-", "secretRef": map[string]any{"name": "s"}}}), `spec.envFrom[0].prefix "1-"`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			resp, err := Sync(&hookapi.CompositeRequest{Parent: parent(tt.opt)})
			if !errors.Is(err, ErrInvalidParent) || !strings.Contains(err.Error(), tt.want) {
				t.Fatalf("Sync = %v, %v; want an ErrInvalidParent containing %q", resp, err, tt.want)
			}
		})
	}
}

// withEnvSources makes the parent read the Secret "db" (twice), the ConfigMap
// "settings" and the pod's name.
func withEnvSources() parentOpt {
	return func(obj hookapi.Object) {
		withSpec("env", []any{
			map[string]any{"name": "PASSWORD", "valueFrom": secretRef("db", "password")},
			map[string]any{"name": "LEVEL", "valueFrom": map[string]any{"configMapKeyRef": map[string]any{"name": "settings", "key": "level"}}},
			map[string]any{"name": "POD", "valueFrom": map[string]any{"fieldRef": map[string]any{"fieldPath": "metadata.name"}}},
		})(obj)
		withSpec("envFrom", []any{map[string]any{"secretRef": map[string]any{"name": "db"}, "prefix": "DB_"}})(obj)
	}
}

func TestCustomize(t *testing.T) {
	resp, err := Customize(&hookapi.CustomizeRequest{Parent: parent(withEnvSources())})
	if err != nil {
		t.Fatal(err)
	}
	want := []v1alpha1.RelatedResourceRule{
		{ResourceRule: v1alpha1.ResourceRule{APIVersion: "v1", Resource: "secrets"}, Namespace: "python-lambda-operator", Names: []string{"db"}},
		{ResourceRule: v1alpha1.ResourceRule{APIVersion: "v1", Resource: "configmaps"}, Namespace: "python-lambda-operator", Names: []string{"settings"}},
	}
	if diff := cmp.Diff(want, resp.RelatedResources); diff != "" {
		t.Errorf("related (-want +got):\n%s", diff)
	}
	none, err := Customize(&hookapi.CustomizeRequest{Parent: parent()})
	if err != nil || none.RelatedResources == nil || len(none.RelatedResources) != 0 {
		t.Errorf("without env sources: %+v, %v; want an empty list", none, err)
	}
}

func related(secretVersion string) hookapi.Objects {
	out := hookapi.Objects{relatedSecretKey: {}, relatedConfigMapKey: {}}
	if secretVersion != "" {
		out[relatedSecretKey]["db"] = hookapi.Object{"metadata": map[string]any{"name": "db", "uid": "u1", "resourceVersion": secretVersion},
			"data": map[string]any{"password": "c2VjcmV0"}}
	}
	out[relatedConfigMapKey]["settings"] = hookapi.Object{"metadata": map[string]any{"name": "settings", "uid": "u2", "resourceVersion": "7"}}
	return out
}

// TestSecretChangeRolls follows a Secret change: the first sync records the new
// config revision in status and keeps the pods; the parent with that status (the
// engine's next revision) gets pods with a new spec-hash that read the Secret again.
func TestSecretChangeRolls(t *testing.T) {
	sync := func(p hookapi.Object, rel hookapi.Objects) (string, string, map[string]any) {
		t.Helper()
		resp, err := syncAt(&hookapi.CompositeRequest{Parent: p, Related: rel}, now)
		if err != nil {
			t.Fatal(err)
		}
		for _, c := range resp.Children {
			if c["kind"] == "Pod" {
				ann := c["metadata"].(map[string]any)["annotations"].(map[string]any)
				return ann[SpecHashAnnotation].(string), ann[ConfigRevisionAnnotation].(string), toMap(t, resp.Status)
			}
		}
		t.Fatal("no pod")
		return "", "", nil
	}
	p := parent(withEnvSources())
	hash1, rev1, st1 := sync(p, related("10"))
	if st1["configRevision"] != rev1 || rev1 == "" {
		t.Fatalf("fresh: status.configRevision %v, pods %q", st1["configRevision"], rev1)
	}
	p["status"] = st1
	if hash, _, _ := sync(p, related("10")); hash != hash1 {
		t.Errorf("steady: the hash changed")
	}
	hash2, rev2, st2 := sync(p, related("11"))
	if hash2 != hash1 || rev2 != rev1 || st2["configRevision"] == rev1 {
		t.Errorf("after the Secret changed: pods (%s, %s), status %v; want the pods kept and a new status.configRevision", hash2, rev2, st2["configRevision"])
	}
	p["status"] = st2
	hash3, rev3, _ := sync(p, related("11"))
	if hash3 == hash1 || rev3 != st2["configRevision"] {
		t.Errorf("next revision: pods (%s, %s); want a new hash and config revision %v", hash3, rev3, st2["configRevision"])
	}
	if _, missing, _ := sync(parent(withEnvSources()), related("")); missing == rev1 {
		t.Errorf("a missing Secret has the revision of an existing one")
	}
	for _, st := range []map[string]any{st1, st2} {
		if strings.Contains(toJSON(t, st), "c2VjcmV0") {
			t.Errorf("the status holds the Secret's data: %v", st)
		}
	}
}

func toJSON(t *testing.T, v any) string {
	t.Helper()
	body, err := json.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	return string(body)
}
