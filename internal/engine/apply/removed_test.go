package apply

import (
	"testing"

	"github.com/google/go-cmp/cmp"
)

func TestRemoved(t *testing.T) {
	tests := []struct {
		name                           string
		lastApplied, desired, observed string
		want                           []string
	}{{
		name:        "steady state",
		lastApplied: serviceFromHook,
		desired:     serviceFromHook,
		observed:    serviceFromServer,
	}, {
		name:        "annotation dropped by the hook",
		lastApplied: `{"metadata": {"annotations": {"example.com/owner": "team-a", "keep": "1"}}}`,
		desired:     `{"metadata": {"annotations": {"keep": "1"}}}`,
		observed:    `{"metadata": {"annotations": {"example.com/owner": "team-a", "keep": "1", "other": "x"}}}`,
		want:        []string{`metadata.annotations["example.com/owner"]`},
	}, {
		name:        "already gone from observed",
		lastApplied: `{"spec": {"a": 1, "b": 2}}`,
		desired:     `{"spec": {"a": 1}}`,
		observed:    `{"spec": {"a": 1}}`,
	}, {
		name:        "a field dropped inside a container, matched by name",
		lastApplied: `{"spec": {"containers": [{"name": "a", "image": "a"}, {"name": "b", "image": "b", "command": ["x"]}]}}`,
		desired:     `{"spec": {"containers": [{"name": "b", "image": "b"}, {"name": "a", "image": "a"}]}}`,
		observed:    `{"spec": {"containers": [{"name": "a", "image": "a"}, {"name": "b", "image": "b", "command": ["x"], "imagePullPolicy": "Always"}]}}`,
		want:        []string{"spec.containers[1].command"},
	}, {
		name:        "a list-map item dropped is reported at its observed index",
		lastApplied: `{"spec": {"ports": [{"port": 53, "protocol": "UDP"}, {"port": 53}]}}`,
		desired:     `{"spec": {"ports": [{"port": 53}]}}`,
		observed:    `{"spec": {"ports": [{"port": 53, "protocol": "UDP"}, {"port": 53, "protocol": "TCP"}, {"port": 99, "protocol": "TCP"}]}}`,
		want:        []string{"spec.ports[0]"},
	}, {
		name:        "a field dropped inside a plain list item, by position",
		lastApplied: `{"spec": {"rules": [{"host": "a", "path": "/x"}, {"host": "b"}]}}`,
		desired:     `{"spec": {"rules": [{"host": "a"}, {"host": "b"}]}}`,
		observed:    `{"spec": {"rules": [{"host": "a", "path": "/x"}, {"host": "b"}]}}`,
		want:        []string{"spec.rules[0].path"},
	}, {
		name:        "pod steady state, with the items admission added",
		lastApplied: podWithVolumesFromHook,
		desired:     podWithVolumesFromHook,
		observed:    podWithVolumesFromServer,
	}, {
		name:        "a volume and its mount dropped by the hook, at their observed indexes",
		lastApplied: podWithVolumesFromHook,
		desired: `{"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "web", "namespace": "shop", "labels": {"app": "web"}},
		  "spec": {
		  "containers": [{"name": "web", "image": "example.com/web:2.0", "args": ["--config=/etc/web/config.yaml", "--verbose"],
		    "ports": [{"name": "http", "containerPort": 8080}],
		    "volumeMounts": [{"name": "config", "mountPath": "/etc/web", "readOnly": true}]}],
		  "volumes": [{"name": "config", "configMap": {"name": "web-config"}}],
		  "tolerations": [{"key": "dedicated", "operator": "Equal", "value": "web", "effect": "NoSchedule"}]}}`,
		observed: podWithVolumesFromServer,
		want:     []string{"spec.containers[0].volumeMounts[1]", "spec.volumes[1]"},
	}, {
		name:        "a list-map item dropped, matched by the desired key when observed items lack it",
		lastApplied: `{"spec": {"items": [{"name": "a"}, {"name": "b"}]}}`,
		desired:     `{"spec": {"items": [{"name": "a"}]}}`,
		observed:    `{"spec": {"items": [{"other": 1}, {"name": "a"}, {"name": "b", "x": 1}]}}`,
		want:        []string{"spec.items[2]"},
	}, {
		name:        "all items of a list-map dropped",
		lastApplied: `{"spec": {"volumes": [{"name": "a"}]}}`,
		desired:     `{"spec": {"volumes": []}}`,
		observed:    `{"spec": {"volumes": [{"name": "a"}, {"name": "kube-api-access-x"}]}}`,
		want:        []string{"spec.volumes[0]"},
	}, {
		name:        "a toleration dropped by the hook, at its observed index",
		lastApplied: `{"spec": {"tolerations": [{"key": "a", "operator": "Exists"}, {"key": "b", "operator": "Exists"}]}}`,
		desired:     `{"spec": {"tolerations": [{"key": "a", "operator": "Exists"}]}}`,
		observed:    `{"spec": {"tolerations": [{"key": "n", "operator": "Exists"}, {"key": "b", "operator": "Exists"}, {"key": "a", "operator": "Exists"}]}}`,
		want:        []string{"spec.tolerations[1]"},
	}, {
		name:        "a field dropped inside a toleration",
		lastApplied: `{"spec": {"tolerations": [{"key": "a", "effect": "NoSchedule"}]}}`,
		desired:     `{"spec": {"tolerations": [{"key": "a"}]}}`,
		observed:    `{"spec": {"tolerations": [{"key": "n"}, {"key": "a", "effect": "NoSchedule"}]}}`,
		want:        []string{"spec.tolerations[1].effect"},
	}, {
		name:        "one of two similar tolerations dropped",
		lastApplied: `{"spec": {"tolerations": [{"key": "a"}, {"key": "a", "effect": "NoSchedule"}]}}`,
		desired:     `{"spec": {"tolerations": [{"key": "a"}]}}`,
		observed:    `{"spec": {"tolerations": [{"key": "a"}, {"key": "a", "effect": "NoSchedule"}]}}`,
		want:        []string{"spec.tolerations[1].effect"},
	}, {
		name:        "tolerations kept, one observed item holding two",
		lastApplied: `{"spec": {"tolerations": [{"key": "a", "effect": "E"}, {"key": "a", "value": "v"}]}}`,
		desired:     `{"spec": {"tolerations": [{"key": "a", "effect": "E"}, {"key": "a", "value": "v"}]}}`,
		observed:    `{"spec": {"tolerations": [{"key": "a", "effect": "E", "value": "v"}]}}`,
	}, {
		name:        "a finalizer dropped by the hook, at its observed index",
		lastApplied: `{"metadata": {"finalizers": ["example.com/a", "example.com/b"]}}`,
		desired:     `{"metadata": {"finalizers": ["example.com/a"]}}`,
		observed:    `{"metadata": {"finalizers": ["kubernetes.io/pvc-protection", "example.com/b", "example.com/a"]}}`,
		want:        []string{"metadata.finalizers[1]"},
	}, {
		name:        "status, server metadata and the annotation are not the hook's",
		lastApplied: `{"status": {"x": 1}, "metadata": {"uid": "u", "annotations": {"` + LastAppliedAnnotation + `": "{}"}}}`,
		desired:     `{"metadata": {"annotations": {}}}`,
		observed:    `{"status": {"x": 1}, "metadata": {"uid": "u", "annotations": {"` + LastAppliedAnnotation + `": "{}"}}}`,
	}}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			got := Removed(fromHook(t, tc.lastApplied), fromHook(t, tc.desired), fromServer(t, tc.observed))
			if diff := cmp.Diff(tc.want, got); diff != "" {
				t.Errorf("Removed() mismatch (-want +got):\n%s", diff)
			}
		})
	}
	t.Run("a container dropped by the hook", func(t *testing.T) {
		desired := edit(t, fromHook(t, podFromHook), func(v any) any { return v.([]any)[:2] }, "spec", "containers")
		got := Removed(fromHook(t, podFromHook), desired, fromServer(t, podFromServer))
		if diff := cmp.Diff([]string{"spec.containers[2]"}, got); diff != "" {
			t.Errorf("Removed() mismatch (-want +got):\n%s", diff)
		}
	})
	if got := Removed(nil, nil, nil); got != nil {
		t.Errorf("Removed(nil, nil, nil) = %v, want nil", got)
	}
}

// managed returns the Service as the server returns it with fieldsV1 as the field
// set of an Apply by manager "metalambda" (plus entries that must be ignored).
func managed(t *testing.T, fieldsV1 string) map[string]any {
	t.Helper()
	obj := fromServer(t, serviceFromServer)
	return set(t, obj, []any{
		map[string]any{"manager": "metalambda", "operation": "Apply", "fieldsType": "FieldsV1",
			"fieldsV1": fromServer(t, fieldsV1)},
		map[string]any{"manager": "metalambda", "operation": "Update", "fieldsType": "FieldsV1",
			"fieldsV1": fromServer(t, `{"f:spec": {"f:sessionAffinity": {}}}`)},
		map[string]any{"manager": "metalambda", "operation": "Apply", "subresource": "status",
			"fieldsV1": fromServer(t, `{"f:status": {"f:loadBalancer": {}}}`)},
		map[string]any{"manager": "kubectl", "operation": "Apply",
			"fieldsV1": fromServer(t, `{"f:spec": {"f:clusterIP": {}}}`)},
	}, "metadata", "managedFields")
}

// serviceFields is what an apply of serviceFromHook owns.
const serviceFields = `{
  "f:metadata": {
    "f:labels": {"f:app": {}, "f:app.kubernetes.io/managed-by": {}},
    "f:annotations": {"f:example.com/owner": {}},
    "f:ownerReferences": {"k:{\"uid\":\"0b4f1d9e-6c1a-4c55-9a70-3f8f5c1e2a10\"}": {}}
  },
  "f:spec": {
    "f:type": {},
    "f:selector": {},
    "f:ports": {
      "k:{\"port\":80,\"protocol\":\"TCP\"}": {".": {}, "f:name": {}, "f:port": {}},
      "k:{\"port\":9090,\"protocol\":\"TCP\"}": {".": {}, "f:name": {}, "f:port": {}, "f:targetPort": {}},
      "k:{\"port\":8443,\"protocol\":\"TCP\"}": {".": {}, "f:name": {}, "f:port": {}, "f:targetPort": {}}
    }
  }
}`

func TestRemovedManaged(t *testing.T) {
	tests := []struct {
		name     string
		desired  map[string]any
		observed map[string]any
		want     []string
	}{{
		name:     "steady state",
		desired:  fromHook(t, serviceFromHook),
		observed: managed(t, serviceFields),
	}, {
		name:     "annotation dropped by the hook",
		desired:  remove(t, fromHook(t, serviceFromHook), "metadata", "annotations"),
		observed: managed(t, serviceFields),
		want:     []string{`metadata.annotations["example.com/owner"]`},
	}, {
		name:     "label dropped by the hook",
		desired:  remove(t, fromHook(t, serviceFromHook), "metadata", "labels", "app.kubernetes.io/managed-by"),
		observed: managed(t, serviceFields),
		want:     []string{`metadata.labels["app.kubernetes.io/managed-by"]`},
	}, {
		name:     "port dropped by the hook, at its observed index",
		desired:  edit(t, fromHook(t, serviceFromHook), func(v any) any { return v.([]any)[:2] }, "spec", "ports"),
		observed: managed(t, serviceFields),
		want:     []string{"spec.ports[2]"},
	}, {
		name:     "field dropped inside a port",
		desired:  remove(t, fromHook(t, serviceFromHook), "spec", "ports", 1, "targetPort"),
		observed: managed(t, serviceFields),
		want:     []string{"spec.ports[1].targetPort"},
	}, {
		name:     "a port moved from TCP to UDP",
		desired:  set(t, fromHook(t, serviceFromHook), "UDP", "spec", "ports", 0, "protocol"),
		observed: managed(t, serviceFields),
		want:     []string{"spec.ports[0]"},
	}, {
		name:     "owner reference dropped",
		desired:  remove(t, fromHook(t, serviceFromHook), "metadata", "ownerReferences"),
		observed: managed(t, serviceFields),
		want:     []string{"metadata.ownerReferences[0]"},
	}, {
		name:     "another manager's fields are not ours",
		desired:  fromHook(t, serviceFromHook),
		observed: managed(t, `{"f:spec": {"f:type": {}}}`),
	}, {
		name:     "set items and indexes",
		desired:  fromHook(t, `{"metadata": {"finalizers": ["a"]}, "spec": {"args": ["x"]}}`),
		observed: managed(t, `{"f:metadata": {"f:finalizers": {".": {}, "v:\"a\"": {}, "v:\"b\"": {}}}, "f:spec": {"f:args": {"i:0": {}, "i:1": {}}}}`),
		want:     nil, // observed has neither the finalizers nor the args
	}, {
		name:     "unreadable entries are skipped",
		desired:  fromHook(t, `{}`),
		observed: managed(t, `{"f:metadata": {"f:ownerReferences": {"k:{oops": {}, "v:nope": {}, "i:x": {}, "z:what": {}}}}`),
	}}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			got := RemovedManaged(tc.desired, tc.observed, "metalambda")
			if diff := cmp.Diff(tc.want, got); diff != "" {
				t.Errorf("RemovedManaged() mismatch (-want +got):\n%s", diff)
			}
		})
	}
}

func TestRemovedManagedSetsAndIndexes(t *testing.T) {
	observed := fromServer(t, `{
	  "metadata": {"finalizers": ["b", "a"], "managedFields": [
	    {"manager": "m", "operation": "Apply", "fieldsV1": {"f:metadata": {"f:finalizers": {"v:\"a\"": {}, "v:\"b\"": {}}}}},
	    {"manager": "m", "operation": "Apply", "apiVersion": "v2", "fieldsV1": {"f:spec": {"f:args": {"i:0": {}, "i:1": {}}},
	      "f:metadata": {"f:finalizers": {"v:\"b\"": {}}}}}]},
	  "spec": {"args": ["x", "y"]}}`)
	desired := fromHook(t, `{"metadata": {"finalizers": ["a"]}, "spec": {"args": ["x"]}}`)
	want := []string{"metadata.finalizers[0]", "spec.args[1]"}
	if diff := cmp.Diff(want, RemovedManaged(desired, observed, "m")); diff != "" {
		t.Errorf("RemovedManaged() mismatch (-want +got):\n%s", diff)
	}
}

func TestSameValue(t *testing.T) {
	tests := []struct {
		a, b any
		want bool
	}{
		{int64(1), 1.0, true},
		{int64(1), "1", false},
		{"a", "a", true},
		{map[string]any{"port": int64(80), "protocol": "TCP"}, map[string]any{"port": 80.0, "protocol": "TCP"}, true},
		{map[string]any{"port": int64(80)}, map[string]any{"port": 80.0, "protocol": "TCP"}, false},
		{map[string]any{"port": int64(80)}, map[string]any{"name": 80.0}, false},
		{map[string]any{"a": "b"}, "a", false},
		{[]any{int64(1), "x"}, []any{1.0, "x"}, true},
		{[]any{int64(1)}, []any{1.0, "x"}, false},
		{nil, nil, true},
	}
	for _, tc := range tests {
		if got := sameValue(tc.a, tc.b); got != tc.want {
			t.Errorf("sameValue(%#v, %#v) = %v, want %v", tc.a, tc.b, got, tc.want)
		}
	}
}
