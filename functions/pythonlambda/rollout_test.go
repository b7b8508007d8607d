package pythonlambda

import (
	"testing"

	"github.com/google/go-cmp/cmp"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

func TestWantSurge(t *testing.T) {
	l := &lambda{Name: "demo", Spec: spec{Replicas: ptr(int32(2))}}
	n := names{Pods: []string{"demo-0", "demo-1"}, Surge: "demo-surge"}
	pod := func(hash string, ready, deleting bool) *corev1.Pod {
		p := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Annotations: map[string]string{SpecHashAnnotation: hash}}}
		if deleting {
			p.DeletionTimestamp = &metav1.Time{}
		}
		status := corev1.ConditionFalse
		if ready {
			status = corev1.ConditionTrue
		}
		p.Status.Conditions = []corev1.PodCondition{{Type: corev1.PodReady, Status: status}}
		return p
	}
	tests := []struct {
		name     string
		replicas int32
		pods     map[string]*corev1.Pod
		want     bool
	}{
		{"fresh", 2, map[string]*corev1.Pod{}, false},
		{"steady", 2, map[string]*corev1.Pod{"demo-0": pod("new", true, false), "demo-1": pod("new", true, false)}, false},
		{"starting without surge", 2, map[string]*corev1.Pod{"demo-0": pod("new", false, false)}, false},
		{"outdated", 2, map[string]*corev1.Pod{"demo-0": pod("old", true, false), "demo-1": pod("old", true, false)}, true},
		{"terminating", 2, map[string]*corev1.Pod{"demo-0": pod("new", true, true), "demo-1": pod("new", true, false)}, true},
		{"replaced pod missing", 2, map[string]*corev1.Pod{"demo-surge": pod("new", true, false), "demo-1": pod("new", true, false)}, true},
		{"replaced pod not ready", 2, map[string]*corev1.Pod{"demo-surge": pod("new", true, false), "demo-0": pod("new", true, false), "demo-1": pod("new", false, false)}, true},
		{"done", 2, map[string]*corev1.Pod{"demo-surge": pod("new", true, false), "demo-0": pod("new", true, false), "demo-1": pod("new", true, false)}, false},
		{"scaled to zero", 0, map[string]*corev1.Pod{"demo-0": pod("old", true, false)}, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			l.Spec.Replicas = &tt.replicas
			if got := wantSurge(l, n, "new", &observed{pods: tt.pods}); got != tt.want {
				t.Errorf("wantSurge = %v, want %v", got, tt.want)
			}
		})
	}
}

func TestKeptConfigMaps(t *testing.T) {
	l := &lambda{Name: "demo", Namespace: "ns"}
	n := names{ConfigMap: "demo-code-new"}
	mounting := func(cm string) *corev1.Pod {
		return &corev1.Pod{Spec: corev1.PodSpec{Volumes: []corev1.Volume{{Name: volumeName, VolumeSource: corev1.VolumeSource{
			ConfigMap: &corev1.ConfigMapVolumeSource{LocalObjectReference: corev1.LocalObjectReference{Name: cm}},
		}}}}}
	}
	obs := &observed{
		pods: map[string]*corev1.Pod{"a": mounting("demo-code-old"), "b": mounting("demo-code-old"), "c": mounting("demo-code-new"), "d": mounting("demo-code-gone")},
		configMapData: map[string]map[string]string{
			"demo-code-old": {codeKey: "old"}, "demo-code-new": {codeKey: "new"}, "demo-code-older": {codeKey: "older"},
		},
	}
	var got []string
	for _, cm := range keptConfigMaps(l, n, obs) {
		got = append(got, cm.Name+"="+cm.Data[codeKey])
	}
	// Kept: the one a pod still mounts. Not kept: the current one (built anew), one no
	// pod mounts (deleted), one that is gone.
	if diff := cmp.Diff([]string{"demo-code-old=old"}, got); diff != "" {
		t.Errorf("kept (-want +got):\n%s", diff)
	}
}

func TestRolloutStatus(t *testing.T) {
	pod := func(hash string, ready bool) *corev1.Pod {
		p := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Annotations: map[string]string{SpecHashAnnotation: hash}}}
		if ready {
			p.Status.Conditions = []corev1.PodCondition{{Type: corev1.PodReady, Status: corev1.ConditionTrue}}
		}
		return p
	}
	obs := &observed{pods: map[string]*corev1.Pod{"s": pod("new", true), "0": pod("new", false), "1": pod("old", true)}}
	want := rolloutStatus{UpdatedReplicas: 2, UpdatedReadyReplicas: 1, UpdateRevision: "new", ServedRevisions: []string{"new", "old"}}
	if diff := cmp.Diff(want, makeRolloutStatus("new", obs), cmp.AllowUnexported(rolloutStatus{})); diff != "" {
		t.Errorf("status (-want +got):\n%s", diff)
	}
}

func ptr[T any](v T) *T { return &v }
