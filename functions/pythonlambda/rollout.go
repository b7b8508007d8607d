package pythonlambda

import (
	"slices"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// The engine rolls the pods (RollingRecreate with a Ready status check: one pod at a
// time, the next only once the replaced one is Ready). The hook adds what keeps every
// request served while it does:
//
//   - a surge pod, created with the new spec while any pod still runs an older one,
//     and kept until every pod is current and Ready: with it, replacing a pod never
//     leaves fewer Ready pods than spec.replicas (one replica included);
//   - the ConfigMaps of older code, kept while a pod mounts them, so a pod keeps
//     serving the code it started with until it is replaced.

// rolloutPlan is what the hook adds to the children during a rollout.
type rolloutPlan struct {
	surge bool
	kept  []*corev1.ConfigMap
}

func planRollout(l *lambda, n names, hash string, obs *observed) rolloutPlan {
	return rolloutPlan{surge: wantSurge(l, n, hash, obs), kept: keptConfigMaps(l, n, obs)}
}

// wantSurge reports whether the surge pod is needed: some pod runs an older spec or
// is going away, or, once the surge pod exists, some pod is not yet current and Ready.
func wantSurge(l *lambda, n names, hash string, obs *observed) bool {
	if l.replicas() == 0 {
		return false
	}
	surging := obs.pods[n.Surge] != nil && obs.pods[n.Surge].DeletionTimestamp == nil
	for _, name := range n.Pods {
		p := obs.pods[name]
		switch {
		case p == nil:
			if surging {
				return true
			}
		case p.DeletionTimestamp != nil || p.Annotations[SpecHashAnnotation] != hash:
			return true
		case surging && !isReady(p):
			return true
		}
	}
	return false
}

// keptConfigMaps are the observed ConfigMaps, other than the current one, that an
// observed pod mounts, as they are.
func keptConfigMaps(l *lambda, n names, obs *observed) []*corev1.ConfigMap {
	var names []string
	for _, p := range obs.pods {
		for _, v := range p.Spec.Volumes {
			if v.Name != volumeName || v.ConfigMap == nil || v.ConfigMap.Name == n.ConfigMap {
				continue
			}
			if _, ok := obs.configMapData[v.ConfigMap.Name]; ok {
				names = append(names, v.ConfigMap.Name)
			}
		}
	}
	slices.Sort(names)
	var out []*corev1.ConfigMap
	for _, name := range slices.Compact(names) {
		out = append(out, &corev1.ConfigMap{
			TypeMeta:   metav1.TypeMeta{APIVersion: "v1", Kind: "ConfigMap"},
			ObjectMeta: meta(l, name),
			Data:       obs.configMapData[name],
		})
	}
	return out
}

// rolloutStatus is the rollout part of the parent's status.
type rolloutStatus struct {
	// UpdatedReplicas counts the pods that run the current spec (the surge pod
	// included), UpdatedReadyReplicas those of them that are Ready.
	UpdatedReplicas      int32 `json:"updatedReplicas"`
	UpdatedReadyReplicas int32 `json:"updatedReadyReplicas"`
	// UpdateRevision is the spec-hash of the current spec; ServedRevisions the
	// spec-hashes that Ready pods serve now, sorted.
	UpdateRevision  string   `json:"updateRevision"`
	ServedRevisions []string `json:"servedRevisions"`
}

func makeRolloutStatus(hash string, obs *observed) rolloutStatus {
	st := rolloutStatus{UpdateRevision: hash, ServedRevisions: []string{}}
	for _, p := range obs.pods {
		current := p.DeletionTimestamp == nil && p.Annotations[SpecHashAnnotation] == hash
		if current {
			st.UpdatedReplicas++
		}
		if !isReady(p) {
			continue
		}
		if current {
			st.UpdatedReadyReplicas++
		}
		if rev := p.Annotations[SpecHashAnnotation]; !slices.Contains(st.ServedRevisions, rev) {
			st.ServedRevisions = append(st.ServedRevisions, rev)
		}
	}
	slices.Sort(st.ServedRevisions)
	return st
}
