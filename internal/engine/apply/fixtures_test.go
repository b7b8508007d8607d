package apply

import (
	"encoding/json"
	"slices"
	"testing"

	utiljson "k8s.io/apimachinery/pkg/util/json"
)

// fromHook decodes JSON as the engine decodes a hook response: numbers are float64.
func fromHook(t testing.TB, text string) map[string]any {
	t.Helper()
	var out map[string]any
	if err := json.Unmarshal([]byte(text), &out); err != nil {
		t.Fatalf("decode fixture: %v", err)
	}
	return out
}

// fromServer decodes JSON as unstructured does: integers are int64.
func fromServer(t testing.TB, text string) map[string]any {
	t.Helper()
	var out map[string]any
	if err := utiljson.Unmarshal([]byte(text), &out); err != nil {
		t.Fatalf("decode fixture: %v", err)
	}
	return out
}

// edit changes obj in place at path (map keys as strings, list indexes as ints) and
// returns it: a nil-returning fn deletes the field, otherwise its result is stored.
func edit(t testing.TB, obj map[string]any, fn func(old any) any, path ...any) map[string]any {
	t.Helper()
	var parent any = obj
	for _, step := range path[:len(path)-1] {
		parent = child(t, parent, step)
	}
	switch p := parent.(type) {
	case map[string]any:
		k := path[len(path)-1].(string)
		if v := fn(p[k]); v != nil {
			p[k] = v
		} else {
			delete(p, k)
		}
	case []any:
		i := path[len(path)-1].(int)
		p[i] = fn(p[i])
	default:
		t.Fatalf("edit %v: parent is a %T", path, parent)
	}
	return obj
}

func child(t testing.TB, parent, step any) any {
	t.Helper()
	switch p := parent.(type) {
	case map[string]any:
		return p[step.(string)]
	case []any:
		return p[step.(int)]
	}
	t.Fatalf("step %v: parent is a %T", step, parent)
	return nil
}

// set stores value at path; remove deletes the field at path.
func set(t testing.TB, obj map[string]any, value any, path ...any) map[string]any {
	t.Helper()
	return edit(t, obj, func(any) any { return value }, path...)
}

func remove(t testing.TB, obj map[string]any, path ...any) map[string]any {
	t.Helper()
	return edit(t, obj, func(any) any { return nil }, path...)
}

// reverse and appendItem are edits of lists: reverse returns a reversed copy,
// appendItem a copy with item appended.
func reverse(v any) any {
	out := slices.Clone(v.([]any))
	slices.Reverse(out)
	return out
}

func appendItem(item any) func(any) any {
	return func(v any) any { return append(slices.Clone(v.([]any)), item) }
}

// A Service as a hook writes it.
const serviceFromHook = `{
  "apiVersion": "v1",
  "kind": "Service",
  "metadata": {
    "name": "web",
    "namespace": "shop",
    "labels": {"app": "web", "app.kubernetes.io/managed-by": "metalambda"},
    "annotations": {"example.com/owner": "team-a"},
    "ownerReferences": [{"apiVersion": "example.com/v1", "kind": "Shop", "name": "shop",
      "uid": "0b4f1d9e-6c1a-4c55-9a70-3f8f5c1e2a10", "controller": true, "blockOwnerDeletion": true}]
  },
  "spec": {
    "type": "ClusterIP",
    "selector": {"app": "web"},
    "ports": [
      {"name": "http", "port": 80},
      {"name": "metrics", "port": 9090, "targetPort": "metrics"},
      {"name": "admin", "port": 8443, "targetPort": 8443}
    ]
  },
  "status": {}
}`

// The same Service as the API server returns it: defaults filled in, server-owned
// metadata, managedFields, status.
const serviceFromServer = `{
  "apiVersion": "v1",
  "kind": "Service",
  "metadata": {
    "name": "web",
    "namespace": "shop",
    "uid": "5e0f4d0c-2b7a-4a53-8f0e-2f4f0d5c9b11",
    "resourceVersion": "48213",
    "creationTimestamp": "2025-06-01T10:00:00Z",
    "labels": {"app": "web", "app.kubernetes.io/managed-by": "metalambda"},
    "annotations": {"example.com/owner": "team-a", "other.example.com/seen": "yes"},
    "ownerReferences": [{"apiVersion": "example.com/v1", "kind": "Shop", "name": "shop",
      "uid": "0b4f1d9e-6c1a-4c55-9a70-3f8f5c1e2a10", "controller": true, "blockOwnerDeletion": true}],
    "managedFields": [{"manager": "metalambda", "operation": "Apply", "apiVersion": "v1",
      "time": "2025-06-01T10:00:00Z", "fieldsType": "FieldsV1", "fieldsV1": {}}]
  },
  "spec": {
    "type": "ClusterIP",
    "selector": {"app": "web"},
    "clusterIP": "10.96.12.34",
    "clusterIPs": ["10.96.12.34"],
    "ipFamilies": ["IPv4"],
    "ipFamilyPolicy": "SingleStack",
    "internalTrafficPolicy": "Cluster",
    "sessionAffinity": "None",
    "ports": [
      {"name": "http", "port": 80, "protocol": "TCP", "targetPort": 80},
      {"name": "metrics", "port": 9090, "protocol": "TCP", "targetPort": "metrics"},
      {"name": "admin", "port": 8443, "protocol": "TCP", "targetPort": 8443}
    ]
  },
  "status": {"loadBalancer": {}}
}`

// A Pod with three containers as a hook writes it: quantities in the hook's own
// spelling, no defaults.
const podFromHook = `{
  "apiVersion": "v1",
  "kind": "Pod",
  "metadata": {"name": "worker", "namespace": "shop", "labels": {"app": "worker"}, "creationTimestamp": null},
  "spec": {
    "restartPolicy": "Always",
    "containers": [
      {"name": "app", "image": "example.com/app:1.2.3", "args": ["--port=8080", "--verbose"],
       "ports": [{"name": "http", "containerPort": 8080}],
       "env": [{"name": "MODE", "value": "prod"}, {"name": "EMPTY", "value": ""}],
       "resources": {"requests": {"cpu": "0.5", "memory": "128Mi"}, "limits": {"cpu": 1, "memory": "134217728"}}},
      {"name": "sidecar", "image": "example.com/proxy:0.9", "resources": {"requests": {"cpu": "100m", "memory": "64Mi"}}},
      {"name": "metrics", "image": "example.com/exporter:2.0", "ports": [{"containerPort": 9100}],
       "resources": {"limits": {"cpu": "250m", "memory": "0.0625Gi"}}}
    ]
  },
  "status": {}
}`

const podFromServer = `{
  "apiVersion": "v1",
  "kind": "Pod",
  "metadata": {"name": "worker", "namespace": "shop", "labels": {"app": "worker"},
    "uid": "9a4c7b1e-5f0d-4c3e-8a2b-1d6e7f8a9b0c", "resourceVersion": "77120", "creationTimestamp": "2025-06-01T10:00:05Z"},
  "spec": {
    "restartPolicy": "Always",
    "dnsPolicy": "ClusterFirst",
    "schedulerName": "default-scheduler",
    "securityContext": {},
    "serviceAccountName": "default",
    "terminationGracePeriodSeconds": 30,
    "enableServiceLinks": true,
    "preemptionPolicy": "PreemptLowerPriority",
    "priority": 0,
    "containers": [
      {"name": "app", "image": "example.com/app:1.2.3", "args": ["--port=8080", "--verbose"],
       "ports": [{"name": "http", "containerPort": 8080, "protocol": "TCP"}],
       "env": [{"name": "MODE", "value": "prod"}, {"name": "EMPTY"}],
       "resources": {"requests": {"cpu": "500m", "memory": "128Mi"}, "limits": {"cpu": "1", "memory": "128Mi"}},
       "imagePullPolicy": "IfNotPresent", "terminationMessagePath": "/dev/termination-log",
       "terminationMessagePolicy": "File"},
      {"name": "sidecar", "image": "example.com/proxy:0.9", "resources": {"requests": {"cpu": "100m", "memory": "64Mi"}},
       "imagePullPolicy": "IfNotPresent", "terminationMessagePath": "/dev/termination-log",
       "terminationMessagePolicy": "File"},
      {"name": "metrics", "image": "example.com/exporter:2.0", "ports": [{"containerPort": 9100, "protocol": "TCP"}],
       "resources": {"limits": {"cpu": "250m", "memory": "64Mi"}, "requests": {"cpu": "250m", "memory": "64Mi"}},
       "imagePullPolicy": "IfNotPresent", "terminationMessagePath": "/dev/termination-log",
       "terminationMessagePolicy": "File"}
    ]
  },
  "status": {"phase": "Running", "qosClass": "Burstable"}
}`

// A Deployment as a hook writes it (a typed Go object marshalled, so with the
// usual creationTimestamp: null and empty strategy/resources).
const deploymentFromHook = `{
  "apiVersion": "apps/v1",
  "kind": "Deployment",
  "metadata": {"name": "api", "namespace": "shop", "creationTimestamp": null},
  "spec": {
    "replicas": 3,
    "selector": {"matchLabels": {"app": "api"}},
    "strategy": {},
    "template": {
      "metadata": {"labels": {"app": "api"}, "creationTimestamp": null},
      "spec": {"containers": [{"name": "api", "image": "example.com/api:4.1", "resources": {}}]}
    }
  },
  "status": {}
}`

const deploymentFromServer = `{
  "apiVersion": "apps/v1",
  "kind": "Deployment",
  "metadata": {"name": "api", "namespace": "shop", "generation": 4, "uid": "3c2b1a09-8f7e-4d6c-5b4a-392817160504",
    "resourceVersion": "99001", "creationTimestamp": "2025-06-01T10:00:00Z",
    "annotations": {"deployment.kubernetes.io/revision": "2"}},
  "spec": {
    "replicas": 3,
    "selector": {"matchLabels": {"app": "api"}},
    "strategy": {"type": "RollingUpdate", "rollingUpdate": {"maxSurge": "25%", "maxUnavailable": "25%"}},
    "revisionHistoryLimit": 10,
    "progressDeadlineSeconds": 600,
    "template": {
      "metadata": {"labels": {"app": "api"}},
      "spec": {
        "containers": [{"name": "api", "image": "example.com/api:4.1", "resources": {},
          "imagePullPolicy": "IfNotPresent", "terminationMessagePath": "/dev/termination-log",
          "terminationMessagePolicy": "File"}],
        "restartPolicy": "Always", "dnsPolicy": "ClusterFirst", "schedulerName": "default-scheduler",
        "securityContext": {}, "terminationGracePeriodSeconds": 30
      }
    }
  },
  "status": {"observedGeneration": 4, "replicas": 3, "readyReplicas": 3}
}`

// A Pod with a configMap and an emptyDir volume, mounted in its one container,
// and a toleration, as a hook writes it.
const podWithVolumesFromHook = `{
  "apiVersion": "v1",
  "kind": "Pod",
  "metadata": {"name": "web", "namespace": "shop", "labels": {"app": "web"}},
  "spec": {
    "containers": [
      {"name": "web", "image": "example.com/web:2.0", "args": ["--config=/etc/web/config.yaml", "--verbose"],
       "ports": [{"name": "http", "containerPort": 8080}],
       "volumeMounts": [{"name": "config", "mountPath": "/etc/web", "readOnly": true},
                        {"name": "cache", "mountPath": "/var/cache/web"}]}
    ],
    "volumes": [
      {"name": "config", "configMap": {"name": "web-config"}},
      {"name": "cache", "emptyDir": {}}
    ],
    "tolerations": [{"key": "dedicated", "operator": "Equal", "value": "web", "effect": "NoSchedule"}]
  }
}`

// The same Pod as the API server returns it: the ServiceAccount admission plugin
// appended the kube-api-access projected volume and its mount, the
// DefaultTolerationSeconds plugin the not-ready and unreachable tolerations.
const podWithVolumesFromServer = `{
  "apiVersion": "v1",
  "kind": "Pod",
  "metadata": {"name": "web", "namespace": "shop", "labels": {"app": "web"},
    "uid": "1f2e3d4c-5b6a-4978-8695-a4b3c2d1e0f9", "resourceVersion": "80211", "creationTimestamp": "2025-06-01T10:00:05Z"},
  "spec": {
    "containers": [
      {"name": "web", "image": "example.com/web:2.0", "args": ["--config=/etc/web/config.yaml", "--verbose"],
       "ports": [{"name": "http", "containerPort": 8080, "protocol": "TCP"}],
       "resources": {},
       "volumeMounts": [{"name": "config", "mountPath": "/etc/web", "readOnly": true},
                        {"name": "cache", "mountPath": "/var/cache/web"},
                        {"name": "kube-api-access-7xk2p", "mountPath": "/var/run/secrets/kubernetes.io/serviceaccount", "readOnly": true}],
       "imagePullPolicy": "IfNotPresent", "terminationMessagePath": "/dev/termination-log",
       "terminationMessagePolicy": "File"}
    ],
    "volumes": [
      {"name": "config", "configMap": {"name": "web-config", "defaultMode": 420}},
      {"name": "cache", "emptyDir": {}},
      {"name": "kube-api-access-7xk2p", "projected": {"defaultMode": 420, "sources": [
        {"serviceAccountToken": {"expirationSeconds": 3607, "path": "token"}},
        {"configMap": {"name": "kube-root-ca.crt", "items": [{"key": "ca.crt", "path": "ca.crt"}]}},
        {"downwardAPI": {"items": [{"path": "namespace", "fieldRef": {"apiVersion": "v1", "fieldPath": "metadata.namespace"}}]}}]}}
    ],
    "tolerations": [
      {"key": "dedicated", "operator": "Equal", "value": "web", "effect": "NoSchedule"},
      {"key": "node.kubernetes.io/not-ready", "operator": "Exists", "effect": "NoExecute", "tolerationSeconds": 300},
      {"key": "node.kubernetes.io/unreachable", "operator": "Exists", "effect": "NoExecute", "tolerationSeconds": 300}
    ],
    "restartPolicy": "Always",
    "dnsPolicy": "ClusterFirst",
    "serviceAccountName": "default",
    "serviceAccount": "default",
    "securityContext": {},
    "schedulerName": "default-scheduler",
    "terminationGracePeriodSeconds": 30,
    "enableServiceLinks": true,
    "preemptionPolicy": "PreemptLowerPriority",
    "priority": 0
  },
  "status": {"phase": "Pending", "qosClass": "BestEffort"}
}`

// A PersistentVolumeClaim with a finalizer of the hook's, as the hook writes it and
// as the server returns it (with the pvc-protection finalizer added first).
const pvcFromHook = `{
  "apiVersion": "v1",
  "kind": "PersistentVolumeClaim",
  "metadata": {"name": "data", "namespace": "shop", "finalizers": ["example.com/backup"]},
  "spec": {"accessModes": ["ReadWriteOnce"], "resources": {"requests": {"storage": "1Gi"}}}
}`

const pvcFromServer = `{
  "apiVersion": "v1",
  "kind": "PersistentVolumeClaim",
  "metadata": {"name": "data", "namespace": "shop", "uid": "7d6c5b4a-3928-4716-9504-a3b2c1d0e9f8",
    "resourceVersion": "80342", "creationTimestamp": "2025-06-01T10:00:05Z",
    "finalizers": ["kubernetes.io/pvc-protection", "example.com/backup"]},
  "spec": {"accessModes": ["ReadWriteOnce"], "resources": {"requests": {"storage": "1Gi"}},
    "storageClassName": "standard", "volumeMode": "Filesystem"},
  "status": {"phase": "Pending"}
}`
