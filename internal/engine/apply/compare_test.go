package apply

import (
	"encoding/json"
	"fmt"
	"math"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
)

func TestInSyncRealObjects(t *testing.T) {
	tests := []struct {
		name     string
		desired  map[string]any
		observed map[string]any
		want     []string
	}{{
		name:     "service with server defaults",
		desired:  fromHook(t, serviceFromHook),
		observed: fromServer(t, serviceFromServer),
	}, {
		name:     "pod with defaulted containers and normalised quantities",
		desired:  fromHook(t, podFromHook),
		observed: fromServer(t, podFromServer),
	}, {
		name:     "deployment, replicas float64 from the hook, int64 from the server",
		desired:  fromHook(t, deploymentFromHook),
		observed: fromServer(t, deploymentFromServer),
	}, {
		name:     "deployment, replicas json.Number from the hook",
		desired:  set(t, fromHook(t, deploymentFromHook), json.Number("3"), "spec", "replicas"),
		observed: fromServer(t, deploymentFromServer),
	}, {
		name:     "hook sets server-owned metadata and status: ignored",
		desired:  set(t, set(t, fromHook(t, serviceFromHook), "1", "metadata", "resourceVersion"), map[string]any{"x": 1.0}, "status"),
		observed: fromServer(t, serviceFromServer),
	}, {
		name: "hook carries a stale last-applied annotation: ignored",
		desired: set(t, fromHook(t, serviceFromHook), map[string]any{
			"example.com/owner": "team-a", LastAppliedAnnotation: `{"old":true}`}, "metadata", "annotations"),
		observed: fromServer(t, serviceFromServer),
	}, {
		name:     "changed image",
		desired:  set(t, fromHook(t, podFromHook), "example.com/app:1.2.4", "spec", "containers", 0, "image"),
		observed: fromServer(t, podFromServer),
		want:     []string{"spec.containers[0].image"},
	}, {
		name:     "container removed by the hook: extra observed items are left to Removed",
		desired:  edit(t, fromHook(t, podFromHook), func(v any) any { return v.([]any)[:2] }, "spec", "containers"),
		observed: fromServer(t, podFromServer),
	}, {
		name:     "service port removed by the hook: extra observed items are left to Removed",
		desired:  edit(t, fromHook(t, serviceFromHook), func(v any) any { return v.([]any)[1:] }, "spec", "ports"),
		observed: fromServer(t, serviceFromServer),
	}, {
		name:     "pod with the service-account volume and mount and the default tolerations appended",
		desired:  fromHook(t, podWithVolumesFromHook),
		observed: fromServer(t, podWithVolumesFromServer),
	}, {
		name:     "pvc with the pvc-protection finalizer added",
		desired:  fromHook(t, pvcFromHook),
		observed: fromServer(t, pvcFromServer),
	}, {
		name:     "list-map items in another order",
		desired:  fromHook(t, podWithVolumesFromHook),
		observed: edit(t, fromServer(t, podWithVolumesFromServer), reverse, "spec", "volumes"),
	}, {
		name:     "tolerations and finalizers in another order",
		desired:  set(t, fromHook(t, podWithVolumesFromHook), []any{"a", "b"}, "metadata", "finalizers"),
		observed: set(t, edit(t, fromServer(t, podWithVolumesFromServer), reverse, "spec", "tolerations"), []any{"c", "b", "a"}, "metadata", "finalizers"),
	}, {
		name:     "changed volume, at its observed index",
		desired:  set(t, fromHook(t, podWithVolumesFromHook), "other-config", "spec", "volumes", 0, "configMap", "name"),
		observed: edit(t, fromServer(t, podWithVolumesFromServer), reverse, "spec", "volumes"),
		want:     []string{"spec.volumes[2].configMap.name"},
	}, {
		name:     "changed volume mount",
		desired:  set(t, fromHook(t, podWithVolumesFromHook), true, "spec", "containers", 0, "volumeMounts", 1, "readOnly"),
		observed: fromServer(t, podWithVolumesFromServer),
		want:     []string{"spec.containers[0].volumeMounts[1].readOnly"},
	}, {
		name: "items missing from observed are named by their key",
		desired: edit(t, edit(t, fromHook(t, podWithVolumesFromHook),
			appendItem(map[string]any{"name": "data", "emptyDir": map[string]any{}}), "spec", "volumes"),
			appendItem(map[string]any{"name": "data", "mountPath": "/data"}), "spec", "containers", 0, "volumeMounts"),
		observed: fromServer(t, podWithVolumesFromServer),
		want:     []string{"spec.containers[0].volumeMounts[mountPath=/data]", "spec.volumes[name=data]"},
	}, {
		name:     "container missing from observed",
		desired:  edit(t, fromHook(t, podWithVolumesFromHook), appendItem(map[string]any{"name": "proxy", "image": "p"}), "spec", "containers"),
		observed: fromServer(t, podWithVolumesFromServer),
		want:     []string{"spec.containers[name=proxy]"},
	}, {
		name:     "list-map missing from observed",
		desired:  fromHook(t, podWithVolumesFromHook),
		observed: remove(t, fromServer(t, podWithVolumesFromServer), "spec", "volumes"),
		want:     []string{"spec.volumes[name=config]", "spec.volumes[name=cache]"}, // in desired order
	}, {
		name:     "changed toleration",
		desired:  set(t, fromHook(t, podWithVolumesFromHook), "api", "spec", "tolerations", 0, "value"),
		observed: fromServer(t, podWithVolumesFromServer),
		want:     []string{"spec.tolerations"},
	}, {
		name:     "finalizer missing from observed",
		desired:  set(t, fromHook(t, pvcFromHook), []any{"example.com/backup", "example.com/audit"}, "metadata", "finalizers"),
		observed: fromServer(t, pvcFromServer),
		want:     []string{"metadata.finalizers"},
	}, {
		name:     "args in another order differ: their order matters",
		desired:  fromHook(t, podWithVolumesFromHook),
		observed: edit(t, fromServer(t, podWithVolumesFromServer), reverse, "spec", "containers", 0, "args"),
		want:     []string{"spec.containers[0].args[0]", "spec.containers[0].args[1]"},
	}, {
		name:     "an extra arg differs",
		desired:  fromHook(t, podWithVolumesFromHook),
		observed: edit(t, fromServer(t, podWithVolumesFromServer), appendItem("--debug"), "spec", "containers", 0, "args"),
		want:     []string{"spec.containers[0].args"},
	}, {
		name:     "added label",
		desired:  set(t, fromHook(t, serviceFromHook), "frontend", "metadata", "labels", "tier"),
		observed: fromServer(t, serviceFromServer),
		want:     []string{"metadata.labels.tier"},
	}, {
		name:     "added label with an empty value: the server keeps it",
		desired:  set(t, fromHook(t, serviceFromHook), "", "metadata", "labels", "canary"),
		observed: fromServer(t, serviceFromServer),
		want:     []string{"metadata.labels.canary"},
	}, {
		name:     "changed port: the port is the key, so that item is missing",
		desired:  set(t, fromHook(t, serviceFromHook), 8080.0, "spec", "ports", 0, "port"),
		observed: fromServer(t, serviceFromServer),
		want:     []string{"spec.ports[port=8080]"},
	}, {
		name:     "changed port name",
		desired:  set(t, fromHook(t, serviceFromHook), "web", "spec", "ports", 0, "name"),
		observed: fromServer(t, serviceFromServer),
		want:     []string{"spec.ports[0].name"},
	}, {
		name:     "annotation removed from the live object",
		desired:  fromHook(t, serviceFromHook),
		observed: remove(t, fromServer(t, serviceFromServer), "metadata", "annotations", "example.com/owner"),
		want:     []string{`metadata.annotations["example.com/owner"]`},
	}, {
		name:     "targetPort number against the same number as a string",
		desired:  fromHook(t, serviceFromHook),
		observed: set(t, fromServer(t, serviceFromServer), "8443", "spec", "ports", 2, "targetPort"),
		want:     []string{"spec.ports[2].targetPort"},
	}, {
		name:     "memory limit changed",
		desired:  set(t, fromHook(t, podFromHook), "256Mi", "spec", "containers", 0, "resources", "limits", "memory"),
		observed: fromServer(t, podFromServer),
		want:     []string{"spec.containers[0].resources.limits.memory"},
	}, {
		name:     "replicas scaled",
		desired:  set(t, fromHook(t, deploymentFromHook), 5.0, "spec", "replicas"),
		observed: fromServer(t, deploymentFromServer),
		want:     []string{"spec.replicas"},
	}, {
		name:     "replicas scaled to zero: a zero against a present value differs",
		desired:  set(t, fromHook(t, deploymentFromHook), 0.0, "spec", "replicas"),
		observed: fromServer(t, deploymentFromServer),
		want:     []string{"spec.replicas"},
	}, {
		name: "several changes, in key order",
		desired: set(t, set(t, set(t, fromHook(t, podFromHook),
			"x:2", "spec", "containers", 2, "image"),
			"debug", "spec", "containers", 0, "env", 0, "value"),
			"OnFailure", "spec", "restartPolicy"),
		observed: fromServer(t, podFromServer),
		want: []string{
			"spec.containers[0].env[0].value",
			"spec.containers[2].image",
			"spec.restartPolicy",
		},
	}, {
		name:     "observed is gone",
		desired:  fromHook(t, `{"kind": "ConfigMap", "metadata": {"name": "c"}, "data": {"k": "v"}}`),
		observed: nil,
		want:     []string{"data.k", "kind", "metadata.name"},
	}}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			got := Diff(tc.desired, tc.observed)
			if diff := cmp.Diff(tc.want, got); diff != "" {
				t.Errorf("Diff() mismatch (-want +got):\n%s", diff)
			}
			if in := InSync(tc.desired, tc.observed); in != (len(tc.want) == 0) {
				t.Errorf("InSync() = %v, want %v", in, len(tc.want) == 0)
			}
		})
	}
}

// TestDiffRules covers each comparison rule on a single field: desired {"spec":
// {field: d}} against observed {"spec": {field: o}}, o omitted when missing.
func TestDiffRules(t *testing.T) {
	const missing = "<missing>"
	tests := []struct {
		name   string
		field  string
		d, o   any
		differ bool
	}{
		{"equal strings", "image", "nginx", "nginx", false},
		{"different strings", "image", "nginx", "httpd", true},
		{"int64 and float64", "replicas", int64(3), 3.0, false},
		{"int and int64", "replicas", 3, int64(3), false},
		{"uint8 and float64", "replicas", uint8(3), 3.0, false},
		{"json.Number and int64", "replicas", json.Number("3"), int64(3), false},
		{"json.Number 3.0 and int64", "replicas", json.Number("3.0"), int64(3), false},
		{"fraction and int", "ratio", 0.5, int64(0), true},
		{"large int64 against a nearby float", "big", int64(1<<53 + 1), float64(1 << 53), true},
		{"uint64 above int64", "big", uint64(1 << 63), float64(1 << 63), false},
		{"uint64 above int64 against int64", "big", uint64(1 << 63), int64(-1 << 63), true},
		{"different numbers", "replicas", 3.0, int64(4), true},
		{"cpu 500m and 0.5", "cpu", "0.5", "500m", false},
		{"memory 1Gi and bytes", "memory", "1Gi", "1073741824", false},
		{"memory bytes and 1Gi", "memory", "1073741824", "1Gi", false},
		{"different quantities", "memory", "1Gi", "1G", true},
		{"exponent quantities", "memory", "1e3", "1k", false},
		{"huge exponents compare as text, without parsing for seconds", "value", "1e40000000", "1e+40000000", true},
		{"long numeric text compares as text", "value", "1" + strings.Repeat("0", 70), "1" + strings.Repeat("0", 70), false},
		{"cpu number and quantity string", "cpu", 2.0, "2", false},
		{"cpu quantity string and number", "cpu", "2", int64(2), false},
		{"cpu fraction and millis", "cpu", 0.25, "250m", false},
		{"cpu number and other quantity", "cpu", 2.0, "3", true},
		{"a string and a number that is no quantity", "name", "x", 1.0, true},
		{"targetPort numbers", "targetPort", 8080.0, int64(8080), false},
		{"targetPort names", "targetPort", "http", "http", false},
		{"targetPort number against string", "targetPort", 8080.0, "8080", true},
		{"targetPort string against number", "targetPort", "8080", int64(8080), true},
		{"maxSurge number against string", "maxSurge", 1.0, "1", true},
		{"bool equal", "paused", true, true, false},
		{"bool different", "paused", true, false, true},
		{"bool against string", "paused", true, "true", true},
		{"empty string matches missing", "hostname", "", missing, false},
		{"false matches missing", "paused", false, missing, false},
		{"zero matches missing", "priority", 0.0, missing, false},
		{"zero json.Number matches missing", "priority", json.Number("0"), missing, false},
		{"null matches missing", "nodeName", nil, missing, false},
		{"null matches null", "nodeName", nil, nil, false},
		{"null matches an empty value", "nodeName", nil, "", false},
		{"null against a value", "nodeName", nil, "node-1", true},
		{"empty map matches missing", "securityContext", map[string]any{}, missing, false},
		{"empty list matches missing", "volumes", []any{}, missing, false},
		{"empty string against a value", "hostname", "", "web-0", true},
		{"non-empty against missing", "hostname", "web-0", missing, true},
		{"map of empties matches missing", "securityContext", map[string]any{"runAsNonRoot": false}, missing, false},
		{"map against scalar", "selector", map[string]any{"a": "b"}, "a=b", true},
		{"list against scalar", "args", []any{"a"}, "a", true},
		{"scalar against map", "selector", "a=b", map[string]any{"a": "b"}, true},
		{"empty list against items", "args", []any{}, []any{"a"}, true},
		{"lists equal", "args", []any{"a", 1.0}, []any{"a", int64(1)}, false},
		{"list longer than observed", "args", []any{"a", "b"}, []any{"a"}, true},
		{"subset inside list items", "ports", []any{map[string]any{"port": 80.0}},
			[]any{map[string]any{"port": int64(80), "protocol": "TCP"}}, false},
		{"list-map with extra observed items, in another order", "ports", []any{map[string]any{"port": 80.0}},
			[]any{map[string]any{"port": int64(443)}, map[string]any{"port": int64(80), "protocol": "TCP"}}, false},
		{"empty list against list-map items", "volumes", []any{},
			[]any{map[string]any{"name": "kube-api-access-x", "projected": map[string]any{}}}, false},
		{"a port without protocol matches the observed port", "ports", []any{map[string]any{"port": 53.0}},
			[]any{map[string]any{"port": int64(53), "protocol": "UDP"}}, false},
		{"several observed items with the key: any may hold the desired one", "ports",
			[]any{map[string]any{"port": 53.0, "name": "dns"}},
			[]any{map[string]any{"port": int64(53), "protocol": "UDP", "name": "dns-udp"},
				map[string]any{"port": int64(53), "protocol": "TCP", "name": "dns"}}, false},
		{"key values compare as numbers", "ports", []any{map[string]any{"containerPort": json.Number("8080")}},
			[]any{map[string]any{"containerPort": int64(8080)}}, false},
		{"objects without a key compare by index", "rules", []any{map[string]any{"host": "a"}},
			[]any{map[string]any{"host": "b"}, map[string]any{"host": "a"}}, true},
		{"objects with a duplicate key compare by index", "env",
			[]any{map[string]any{"name": "A", "value": "1"}, map[string]any{"name": "A", "value": "2"}},
			[]any{map[string]any{"name": "A", "value": "1"}, map[string]any{"name": "A", "value": "2"}, map[string]any{"name": "B"}}, true},
		{"tolerations are a set", "tolerations", []any{map[string]any{"key": "a", "operator": "Exists"}},
			[]any{map[string]any{"key": "b", "operator": "Exists"}, map[string]any{"key": "a", "operator": "Exists", "effect": "NoExecute"}}, false},
		{"empty tolerations against tolerations", "tolerations", []any{},
			[]any{map[string]any{"key": "b", "operator": "Exists"}}, false},
		{"a toleration no observed one holds", "tolerations", []any{map[string]any{"key": "a", "value": "x"}},
			[]any{map[string]any{"key": "a", "value": "y"}}, true},
		{"scalar lists other than finalizers are ordered", "args", []any{"a", "b"}, []any{"a", "b", "c"}, true},
		{"finalizers outside metadata are an ordered list", "finalizers", []any{"a"}, []any{"b", "a"}, true},
		{"non-JSON types compare deeply", "x", []string{"a"}, []string{"a"}, false},
		{"invalid json.Number compares as text", "x", json.Number("1e999"), json.Number("1e999"), false},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			desired := map[string]any{"spec": map[string]any{tc.field: tc.d}}
			observed := map[string]any{"spec": map[string]any{}}
			if tc.o != missing {
				observed["spec"].(map[string]any)[tc.field] = tc.o
			}
			var want []string
			if tc.differ {
				want = []string{"spec." + tc.field}
			}
			if diff := cmp.Diff(want, Diff(desired, observed)); diff != "" {
				t.Errorf("Diff(%#v, %#v) mismatch (-want +got):\n%s", tc.d, tc.o, diff)
			}
			if got := InSync(desired, observed); got == tc.differ {
				t.Errorf("InSync(%#v, %#v) = %v, want %v", tc.d, tc.o, got, !tc.differ)
			}
		})
	}
}

func TestDiffPlaces(t *testing.T) {
	tests := []struct {
		name     string
		desired  string
		observed string
		want     []string
	}{{
		name:     "status is ignored at the top only",
		desired:  `{"status": {"phase": "x"}, "spec": {"status": "on"}}`,
		observed: `{"spec": {"status": "off"}}`,
		want:     []string{"spec.status"},
	}, {
		name:     "server-owned metadata is ignored at the top only",
		desired:  `{"metadata": {"uid": "a", "generation": 2, "managedFields": [{}]}, "spec": {"metadata": {"uid": "b"}}}`,
		observed: `{"metadata": {"uid": "z"}, "spec": {"metadata": {"uid": "c"}}}`,
		want:     []string{"spec.metadata.uid"},
	}, {
		name:     "an empty annotation value must be present",
		desired:  `{"metadata": {"annotations": {"a": ""}}}`,
		observed: `{"metadata": {}}`,
		want:     []string{"metadata.annotations.a"},
	}, {
		name:     "an empty template label value must be present",
		desired:  `{"spec": {"template": {"metadata": {"labels": {"a": ""}}}}}`,
		observed: `{"spec": {"template": {"metadata": {}}}}`,
		want:     []string{"spec.template.metadata.labels.a"},
	}, {
		name:     "an empty ConfigMap value must be present",
		desired:  `{"kind": "ConfigMap", "data": {"empty": "", "x": "1"}}`,
		observed: `{"kind": "ConfigMap", "data": {"x": "1"}}`,
		want:     []string{"data.empty"},
	}, {
		name:     "quoted keys",
		desired:  `{"metadata": {"labels": {"app.kubernetes.io/name": "web", "9lives": "x", "": "y"}}}`,
		observed: `{"metadata": {"labels": {}}}`,
		want:     []string{`metadata.labels[""]`, `metadata.labels["9lives"]`, `metadata.labels["app.kubernetes.io/name"]`},
	}, {
		name:     "reordered list items differ in place",
		desired:  `{"spec": {"args": ["a", "b", "c"]}}`,
		observed: `{"spec": {"args": ["b", "a", "c"]}}`,
		want:     []string{"spec.args[0]", "spec.args[1]"},
	}, {
		name:     "finalizers are a set",
		desired:  `{"metadata": {"finalizers": ["a", "b"]}}`,
		observed: `{"metadata": {"finalizers": ["b", "x", "a"]}}`,
	}, {
		name:     "a set is reported once",
		desired:  `{"metadata": {"finalizers": ["a", "b", "c"]}}`,
		observed: `{"metadata": {"finalizers": ["b"]}}`,
		want:     []string{"metadata.finalizers"},
	}, {
		name:     "missing items are named by their key, quoted when needed",
		desired:  `{"spec": {"items": [{"name": "a"}, {"name": ""}, {"name": "a b"}, {"name": "80"}, {"name": 80}, {"name": "x=y,z"}]}}`,
		observed: `{"spec": {"items": [{"name": "a"}]}}`,
		want:     []string{`spec.items[name=""]`, `spec.items[name="a b"]`, `spec.items[name="80"]`, `spec.items[name=80]`, `spec.items[name="x=y,z"]`},
	}, {
		name:     "a port is named with its protocol when a desired port has one",
		desired:  `{"spec": {"ports": [{"port": 53, "protocol": "UDP"}, {"port": 53}, {"port": 54}]}}`,
		observed: `{"spec": {"ports": [{"port": 53, "protocol": "TCP"}]}}`,
		want:     []string{"spec.ports[port=53,protocol=UDP]", "spec.ports[port=54,protocol=TCP]"},
	}, {
		name:     "several observed items with the key, none holding the desired one: the first is compared",
		desired:  `{"spec": {"ports": [{"port": 53, "name": "dns"}]}}`,
		observed: `{"spec": {"ports": [{"port": 99}, {"port": 53, "name": "a"}, {"port": 53, "name": "b"}]}}`,
		want:     []string{"spec.ports[1].name"},
	}, {
		name:    "a long list-map, with a changed, a duplicated and a missing item",
		desired: `{"spec": {"env": [` + envItems(1, 20, "v") + `]}}`,
		observed: `{"spec": {"env": [` + envItems(0, 6, "v") + `, {"name": "E7", "value": "other"}, ` +
			envItems(8, 19, "v") + `, {"name": "E4", "value": "other"}]}}`,
		want: []string{"spec.env[7].value", "spec.env[name=E20]"},
	}, {
		name:     "quoted top-level key",
		desired:  `{"a.b": 1}`,
		observed: `{}`,
		want:     []string{`["a.b"]`},
	}, {
		name:     "secret stringData compares against data",
		desired:  `{"apiVersion": "v1", "kind": "Secret", "stringData": {"password": "s3cret"}, "data": {"user": "YWRtaW4="}}`,
		observed: `{"apiVersion": "v1", "kind": "Secret", "data": {"user": "YWRtaW4=", "password": "czNjcmV0"}, "type": "Opaque"}`,
	}, {
		name:     "secret stringData changed",
		desired:  `{"apiVersion": "v1", "kind": "Secret", "stringData": {"password": "changed"}}`,
		observed: `{"apiVersion": "v1", "kind": "Secret", "data": {"password": "czNjcmV0"}}`,
		want:     []string{"data.password"},
	}, {
		name:     "stringData of other kinds is compared as it is",
		desired:  `{"apiVersion": "example.com/v1", "kind": "Secret", "stringData": {"a": "b"}}`,
		observed: `{"apiVersion": "example.com/v1", "kind": "Secret", "data": {"a": "Yg=="}}`,
		want:     []string{"stringData.a"},
	}}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			got := Diff(fromHook(t, tc.desired), fromServer(t, tc.observed))
			if diff := cmp.Diff(tc.want, got); diff != "" {
				t.Errorf("Diff() mismatch (-want +got):\n%s", diff)
			}
		})
	}
}

// envItems renders env items E<from>..E<to> with the given value.
func envItems(from, to int, value string) string {
	var items []string
	for i := from; i <= to; i++ {
		items = append(items, fmt.Sprintf(`{"name": "E%d", "value": %q}`, i, value))
	}
	return strings.Join(items, ", ")
}

func TestDiffDoesNotModifyArguments(t *testing.T) {
	desired := fromHook(t, `{"apiVersion": "v1", "kind": "Secret", "stringData": {"a": "b"}, "data": {"c": "ZA=="}}`)
	observed := fromServer(t, `{"apiVersion": "v1", "kind": "Secret", "data": {"a": "Yg=="}}`)
	wantDesired, wantObserved := DeepCopy(desired), DeepCopy(observed)
	Diff(desired, observed)
	InSync(desired, observed)
	if diff := cmp.Diff(wantDesired, desired); diff != "" {
		t.Errorf("desired modified (-before +after):\n%s", diff)
	}
	if diff := cmp.Diff(wantObserved, observed); diff != "" {
		t.Errorf("observed modified (-before +after):\n%s", diff)
	}
}

func TestNumberEqual(t *testing.T) {
	tests := []struct {
		a, b any
		want bool
	}{
		{int64(3), 3.0, true},
		{float32(0.5), 0.5, true},
		{math.NaN(), math.NaN(), true},
		{math.NaN(), 0.0, false},
		{math.Inf(1), math.Inf(1), true},
		{math.Inf(1), int64(math.MaxInt64), false},
		{0.0, math.Copysign(0, -1), true},
		{float64(1 << 63), int64(math.MinInt64), false},
		{float64(-1 << 63), int64(math.MinInt64), true},
		{json.Number("18446744073709551615"), uint64(math.MaxUint64), true},
		{json.Number("18446744073709551615"), float64(1 << 64), false},
		{json.Number("1e2"), int64(100), true},
		{3.5, int64(3), false},
	}
	for _, tc := range tests {
		a, okA := toNumber(tc.a)
		b, okB := toNumber(tc.b)
		if !okA || !okB {
			t.Fatalf("toNumber(%#v), toNumber(%#v): not numbers", tc.a, tc.b)
		}
		if got := a.equal(b); got != tc.want {
			t.Errorf("equal(%#v, %#v) = %v, want %v", tc.a, tc.b, got, tc.want)
		}
		if got := b.equal(a); got != tc.want {
			t.Errorf("equal(%#v, %#v) = %v, want %v", tc.b, tc.a, got, tc.want)
		}
	}
}

func TestScalarID(t *testing.T) {
	tests := []struct {
		v    any
		want string
	}{
		{int64(80), "n:80"},
		{80.0, "n:80"},
		{json.Number("80"), "n:80"},
		{float64(1 << 63), "n:9223372036854775808"},
		{uint64(1 << 63), "n:9223372036854775808"},
		{0.5, "n:0.5"},
		{"80", "s:80"},
		{true, "bool:true"},
	}
	for _, tc := range tests {
		if got := scalarID(tc.v); got != tc.want {
			t.Errorf("scalarID(%#v) = %q, want %q", tc.v, got, tc.want)
		}
	}
}
