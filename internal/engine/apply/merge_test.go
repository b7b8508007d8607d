package apply

import (
	"errors"
	"testing"

	"github.com/google/go-cmp/cmp"
)

func TestThreeWayMerge(t *testing.T) {
	tests := []struct {
		name        string
		observed    string
		lastApplied string // "" for none
		desired     string
		want        string // without the last-applied annotation, which is checked apart
	}{{
		name:        "a key the hook dropped is removed, one another writer set is kept",
		observed:    `{"metadata": {"name": "web", "labels": {"app": "web", "old": "x", "team": "a"}}}`,
		lastApplied: `{"metadata": {"name": "web", "labels": {"app": "web", "old": "x"}}}`,
		desired:     `{"metadata": {"name": "web", "labels": {"app": "web"}}}`,
		want:        `{"metadata": {"name": "web", "labels": {"app": "web", "team": "a"}}}`,
	}, {
		name:        "a whole object the hook dropped is removed",
		observed:    `{"spec": {"a": 1, "affinity": {"x": 1}}}`,
		lastApplied: `{"spec": {"a": 1, "affinity": {"x": 1}}}`,
		desired:     `{"spec": {"a": 1}}`,
		want:        `{"spec": {"a": 1}}`,
	}, {
		name:        "server defaults and fields never applied are kept",
		observed:    serviceFromServer,
		lastApplied: serviceFromHook,
		desired:     serviceFromHook,
		want:        serviceFromServer,
	}, {
		name:        "scalars take the desired value, new keys are added",
		observed:    `{"spec": {"replicas": 3, "paused": true, "keep": "x"}}`,
		lastApplied: `{"spec": {"replicas": 3, "paused": true}}`,
		desired:     `{"spec": {"replicas": 5, "paused": false, "minReadySeconds": 10}}`,
		want:        `{"spec": {"replicas": 5, "paused": false, "minReadySeconds": 10, "keep": "x"}}`,
	}, {
		name:     "a type change takes the desired value",
		observed: `{"spec": {"a": {"x": 1}, "b": "s", "c": [1]}}`,
		desired:  `{"spec": {"a": "flat", "b": {"y": 2}, "c": {"z": 3}}}`,
		want:     `{"spec": {"a": "flat", "b": {"y": 2}, "c": {"z": 3}}}`,
	}, {
		name:     "null in desired removes the field",
		observed: `{"spec": {"a": 1, "b": 2}}`,
		desired:  `{"spec": {"a": null}}`,
		want:     `{"spec": {"b": 2}}`,
	}, {
		name: "containers merge by name",
		observed: `{"spec": {"containers": [
			{"name": "app", "image": "app:1", "imagePullPolicy": "IfNotPresent", "args": ["--a"]},
			{"name": "istio-proxy", "image": "proxy:1"},
			{"name": "old", "image": "old:1"}]}}`,
		lastApplied: `{"spec": {"containers": [
			{"name": "app", "image": "app:1", "args": ["--a"]},
			{"name": "old", "image": "old:1"}]}}`,
		desired: `{"spec": {"containers": [
			{"name": "metrics", "image": "exporter:1"},
			{"name": "app", "image": "app:2"}]}}`,
		want: `{"spec": {"containers": [
			{"name": "app", "image": "app:2", "imagePullPolicy": "IfNotPresent"},
			{"name": "istio-proxy", "image": "proxy:1"},
			{"name": "metrics", "image": "exporter:1"}]}}`,
	}, {
		name: "ports on one number, TCP and UDP, stay apart",
		observed: `{"spec": {"ports": [
			{"name": "dns-udp", "port": 53, "protocol": "UDP", "targetPort": 53},
			{"name": "dns-tcp", "port": 53, "protocol": "TCP", "targetPort": 53}]}}`,
		lastApplied: `{"spec": {"ports": [
			{"name": "dns-udp", "port": 53, "protocol": "UDP"},
			{"name": "dns-tcp", "port": 53}]}}`,
		desired: `{"spec": {"ports": [
			{"name": "dns-udp", "port": 53, "protocol": "UDP", "targetPort": 5353},
			{"name": "dns-tcp", "port": 53, "targetPort": 5354}]}}`,
		want: `{"spec": {"ports": [
			{"name": "dns-udp", "port": 53, "protocol": "UDP", "targetPort": 5353},
			{"name": "dns-tcp", "port": 53, "protocol": "TCP", "targetPort": 5354}]}}`,
	}, {
		name: "the UDP twin of a port is dropped alone",
		observed: `{"spec": {"ports": [
			{"port": 53, "protocol": "UDP"}, {"port": 53, "protocol": "TCP", "nodePort": 30053}]}}`,
		lastApplied: `{"spec": {"ports": [{"port": 53, "protocol": "UDP"}, {"port": 53}]}}`,
		desired:     `{"spec": {"ports": [{"port": 53}]}}`,
		want:        `{"spec": {"ports": [{"port": 53, "protocol": "TCP", "nodePort": 30053}]}}`,
	}, {
		name: "volume mounts sharing a name merge by mountPath",
		observed: `{"volumeMounts": [
			{"name": "cfg", "mountPath": "/a", "subPath": "a"}, {"name": "cfg", "mountPath": "/b", "subPath": "b"}]}`,
		lastApplied: `{"volumeMounts": [
			{"name": "cfg", "mountPath": "/a", "subPath": "a"}, {"name": "cfg", "mountPath": "/b", "subPath": "b"}]}`,
		desired: `{"volumeMounts": [{"name": "cfg", "mountPath": "/b", "subPath": "b2"}]}`,
		want:    `{"volumeMounts": [{"name": "cfg", "mountPath": "/b", "subPath": "b2"}]}`,
	}, {
		name:        "a key repeated within a list is no key: the list is replaced",
		observed:    `{"items": [{"name": "a", "v": 1}, {"name": "a", "v": 2}, {"name": "x", "v": 0}]}`,
		lastApplied: `{"items": [{"name": "a", "v": 1}]}`,
		desired:     `{"items": [{"name": "a", "v": 3}]}`,
		want:        `{"items": [{"name": "a", "v": 3}]}`,
	}, {
		name:        "plain lists are replaced",
		observed:    `{"spec": {"args": ["--a", "--b"], "finalizers": ["x"]}}`,
		lastApplied: `{"spec": {"args": ["--a", "--b"]}}`,
		desired:     `{"spec": {"args": ["--c"], "finalizers": ["y"]}}`,
		want:        `{"spec": {"args": ["--c"], "finalizers": ["y"]}}`,
	}, {
		name: "lists of objects without a conventional key are replaced",
		observed: `{"spec": {"tolerations": [
			{"key": "a", "operator": "Exists"}, {"key": "node.kubernetes.io/not-ready", "tolerationSeconds": 300}]}}`,
		lastApplied: `{"spec": {"tolerations": [{"key": "a", "operator": "Exists"}]}}`,
		desired:     `{"spec": {"tolerations": [{"key": "b", "operator": "Exists"}]}}`,
		want:        `{"spec": {"tolerations": [{"key": "b", "operator": "Exists"}]}}`,
	}, {
		name:     "status and server-owned metadata keep the observed values",
		observed: `{"metadata": {"name": "a", "uid": "u1", "resourceVersion": "7", "generation": 2}, "status": {"ready": true}}`,
		desired:  `{"metadata": {"name": "a", "uid": "u2", "resourceVersion": "1", "selfLink": "/x"}, "status": {"ready": false}}`,
		want:     `{"metadata": {"name": "a", "uid": "u1", "resourceVersion": "7", "generation": 2}, "status": {"ready": true}}`,
	}, {
		name:     "no status observed: none is sent",
		observed: `{"metadata": {"name": "a"}}`,
		desired:  `{"metadata": {"name": "a"}, "status": {"ready": false}}`,
		want:     `{"metadata": {"name": "a"}}`,
	}, {
		name:     "nothing observed yet",
		observed: `{}`,
		desired:  `{"metadata": {"name": "a"}, "spec": {"ports": [{"port": 80}]}}`,
		want:     `{"metadata": {"name": "a"}, "spec": {"ports": [{"port": 80}]}}`,
	}}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			observed, desired := fromServer(t, tc.observed), fromHook(t, tc.desired)
			var last map[string]any
			if tc.lastApplied != "" {
				last = fromHook(t, tc.lastApplied)
			}
			before := [3]map[string]any{DeepCopy(observed), DeepCopy(last), DeepCopy(desired)}

			got, err := ThreeWayMerge(observed, last, desired)
			if err != nil {
				t.Fatalf("ThreeWayMerge() error: %v", err)
			}
			gotLast, err := LastApplied(got)
			if err != nil {
				t.Fatalf("LastApplied(merged) error: %v", err)
			}
			if diff := cmp.Diff(normalised(t, ForApply(desired)), normalised(t, gotLast)); diff != "" {
				t.Errorf("last-applied annotation is not desired (-want +got):\n%s", diff)
			}
			want := fromServer(t, tc.want)
			withoutLastApplied(got)
			if diff := cmp.Diff(normalised(t, want), normalised(t, got)); diff != "" {
				t.Errorf("ThreeWayMerge() mismatch (-want +got):\n%s", diff)
			}
			after := [3]map[string]any{observed, last, desired}
			if diff := cmp.Diff(before, after); diff != "" {
				t.Errorf("arguments modified (-before +after):\n%s", diff)
			}
		})
	}
}

// withoutLastApplied removes the annotation ThreeWayMerge adds, and annotations
// when that leaves none.
func withoutLastApplied(obj map[string]any) {
	if md, ok := obj["metadata"].(map[string]any); ok {
		removeLastApplied(md)
		if len(md) == 0 {
			delete(obj, "metadata")
		}
	}
}

func TestThreeWayMergeIsInSyncWithDesired(t *testing.T) {
	observed, desired := fromServer(t, podFromServer), fromHook(t, podFromHook)
	desired = set(t, desired, "example.com/app:2.0", "spec", "containers", 0, "image")
	got, err := ThreeWayMerge(observed, fromHook(t, podFromHook), desired)
	if err != nil {
		t.Fatalf("ThreeWayMerge() error: %v", err)
	}
	if diff := Diff(desired, got); len(diff) != 0 {
		t.Errorf("Diff(desired, merged) = %v, want none", diff)
	}
	if diff := cmp.Diff([]string{"spec.containers[0].image"}, Diff(desired, observed)); diff != "" {
		t.Errorf("Diff(desired, observed) mismatch (-want +got):\n%s", diff)
	}
}

func TestThreeWayMergeErrors(t *testing.T) {
	tests := []struct {
		name              string
		observed, desired map[string]any
	}{
		{"desired metadata not an object", map[string]any{}, map[string]any{"metadata": "x"}},
		{"observed metadata not an object", map[string]any{"metadata": []any{}}, map[string]any{}},
		{"annotations not an object", map[string]any{}, map[string]any{"metadata": map[string]any{"annotations": "x"}}},
		{"desired is not JSON", map[string]any{}, map[string]any{"spec": map[string]any{"f": func() {}}}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			_, err := ThreeWayMerge(tc.observed, nil, tc.desired)
			if !errors.Is(err, ErrMalformed) {
				t.Errorf("ThreeWayMerge() error = %v, want ErrMalformed", err)
			}
		})
	}
}
