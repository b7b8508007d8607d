package immortalcontainer

import (
	"errors"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/metalambda/metalambda/functions/internal/golden"
	"github.com/metalambda/metalambda/internal/hookapi"
)

type parentOpt func(hookapi.Object)

// immortal is the article's example as the API server stores it, changed by opts.
func immortal(opts ...parentOpt) hookapi.Object {
	obj := hookapi.Object{
		"apiVersion": "example.com/v1alpha1",
		"kind":       "ImmortalContainer",
		"metadata": map[string]any{
			"name": "example-immortal-container", "namespace": "default",
			"uid": "0b8a3c8e-7a0f-4c55-8f51-2f3c6b9d1a10", "generation": 1, "resourceVersion": "10",
		},
		"spec": map[string]any{"image": "nginx:latest"},
	}
	for _, opt := range opts {
		opt(obj)
	}
	return obj
}

func withImage(image any) parentOpt {
	return func(obj hookapi.Object) { obj["spec"] = map[string]any{"image": image} }
}

func withName(name string) parentOpt {
	return func(obj hookapi.Object) { obj["metadata"].(map[string]any)["name"] = name }
}

// observedPod is a running child pod as the engine observes it.
func observedPod(name string) hookapi.Object {
	return hookapi.Object{
		"apiVersion": "v1", "kind": "Pod",
		"metadata": map[string]any{
			"name": name, "namespace": "default", "uid": "uid-" + name,
			"labels": map[string]any{NameLabel: "immortalcontainer", InstanceLabel: "example-immortal-container"},
		},
		"spec": map[string]any{
			"restartPolicy": "OnFailure",
			"containers":    []any{map[string]any{"name": ContainerName, "image": "nginx:latest"}},
		},
		"status": map[string]any{"phase": "Running"},
	}
}

func pods(keys ...string) hookapi.Objects {
	m := hookapi.ObjectMap{}
	for _, key := range keys {
		m[key] = observedPod(key[strings.LastIndex(key, "/")+1:])
	}
	return hookapi.Objects{podKey: m}
}

func TestSync(t *testing.T) {
	const podName = "example-immortal-container-immortalpod"
	tests := []struct {
		name           string
		req            *hookapi.CompositeRequest
		wantPod        string
		wantCurrentPod string
	}{
		{"no-pod", &hookapi.CompositeRequest{Parent: immortal(), Children: pods()}, podName, ""},
		{"one-pod", &hookapi.CompositeRequest{Parent: immortal(), Children: pods(podName)}, podName, podName},
		{"one-pod-hook-v2", &hookapi.CompositeRequest{Parent: immortal(), Children: pods("default/" + podName)}, podName, podName},
		{"two-pods", &hookapi.CompositeRequest{Parent: immortal(), Children: pods(podName, "example-immortal-container-other")}, podName, ""},
		{"image-change", &hookapi.CompositeRequest{Parent: immortal(withImage("nginx:1.27")), Children: pods(podName)}, podName, podName},
		{"long-name", &hookapi.CompositeRequest{Parent: immortal(withName("an-immortal-container-with-a-name-longer-than-fits-in-a-label"))},
			"an-immortal-contain6d0187203a8f11e656d39ad2efe89fc8-immortalpod", ""},
		{"finalizing", &hookapi.CompositeRequest{Parent: immortal(), Children: pods(podName), Finalizing: true}, podName, podName},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			req := golden.Request(t, tt.name+".request.json", tt.req)
			resp, err := Sync(req)
			if err != nil {
				t.Fatalf("Sync: %v", err)
			}
			golden.Compare(t, tt.name+".response.json", resp)
			got := struct{ Pod, CurrentPod string }{resp.Children[0]["metadata"].(map[string]any)["name"].(string), resp.Status["currentPod"].(string)}
			want := struct{ Pod, CurrentPod string }{tt.wantPod, tt.wantCurrentPod}
			if diff := cmp.Diff(want, got); diff != "" || len(resp.Children) != 1 {
				t.Errorf("%d children; pod and currentPod (-want +got):\n%s", len(resp.Children), diff)
			}
			if spec := resp.Children[0]["spec"].(map[string]any); spec["restartPolicy"] != "OnFailure" {
				t.Errorf("restartPolicy = %v, want OnFailure", spec["restartPolicy"])
			}
		})
	}
}

func TestSyncInvalidParent(t *testing.T) {
	tests := []struct {
		name string
		opt  parentOpt
		want string
	}{
		{"no image", func(obj hookapi.Object) { obj["spec"] = map[string]any{} }, "spec.image is empty"},
		{"no spec", func(obj hookapi.Object) { delete(obj, "spec") }, "spec.image is empty"},
		{"empty image", withImage(""), "spec.image is empty"},
		{"blank image", withImage("  "), "spec.image is empty"},
		{"image with spaces", withImage(" nginx"), "surrounding spaces"},
		{"image not a string", withImage(7), "cannot unmarshal number"},
		{"no name", withName(""), "metadata.name is empty"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			resp, err := Sync(&hookapi.CompositeRequest{Parent: immortal(tt.opt)})
			if !errors.Is(err, ErrInvalidParent) || !strings.Contains(err.Error(), tt.want) {
				t.Fatalf("Sync = %v, %v; want an ErrInvalidParent containing %q", resp, err, tt.want)
			}
		})
	}
}
