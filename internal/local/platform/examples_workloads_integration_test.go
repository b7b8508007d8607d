//go:build integration

package platform

import (
	"context"
	"encoding/json"
	"fmt"
	"slices"
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"

	"github.com/metalambda/metalambda/internal/kubetest"
)

var (
	servicesGVR    = schema.GroupVersionResource{Version: "v1", Resource: "services"}
	podsGVR        = schema.GroupVersionResource{Version: "v1", Resource: "pods"}
	replicaSetsGVR = schema.GroupVersionResource{Group: "apps", Version: "v1", Resource: "replicasets"}
	statefulSetGVR = schema.GroupVersionResource{Group: "apps", Version: "v1", Resource: "statefulsets"}
)

// servicePerPodHook gives a StatefulSet one Service per pod, selecting the pod by the
// label its service-per-pod-label annotation names, on the ports of its
// service-per-pod-ports annotation ("port:targetPort,...").
const servicePerPodHook = `
function(request)
  local set = request.object;
  local key = set.metadata.annotations['service-per-pod-label'];
  local ports = [
    {local pair = std.split(p, ':'), name: 'port-' + pair[0], port: std.parseInt(pair[0]), targetPort: std.parseInt(pair[1])}
    for p in std.split(set.metadata.annotations['service-per-pod-ports'], ',')
  ];
  {
    attachments: [
      {
        apiVersion: 'v1',
        kind: 'Service',
        metadata: {name: set.metadata.name + '-' + i, labels: {app: 'service-per-pod'}},
        spec: {selector: {[key]: set.metadata.name + '-' + i}, ports: ports},
      }
      for i in std.range(0, set.spec.replicas - 1)
    ],
  }
`

// servicePerPodFinalizer removes the Services, and is done once none is left.
const servicePerPodFinalizer = `
function(request) {
  attachments: [],
  finalized: std.length(request.attachments['Service.v1']) == 0,
}
`

// podNameLabelHook labels a pod with its own name, under the key its pod-name-label
// annotation names.
const podNameLabelHook = `
function(request) {
  labels: {[request.object.metadata.annotations['pod-name-label']]: request.object.metadata.name},
}
`

// testServicePerPod mirrors examples/service-per-pod: two DecoratorControllers with
// Jsonnet hooks give a StatefulSet's pods a name label and a Service each; taking the
// annotation away runs the finalize hook (Services gone, finalizer removed), putting
// it back brings the Services back, and deleting the StatefulSet finalizes again.
func testServicePerPod(t *testing.T, e *examples) {
	const ns = "service-per-pod"
	const finalizer = "metacontroller.io/decoratorcontroller-service-per-pod"
	e.function(t, ns, "sync-service-per-pod", "jsonnet", "", servicePerPodHook)
	e.function(t, ns, "finalize-service-per-pod", "jsonnet", "", servicePerPodFinalizer)
	e.function(t, ns, "sync-pod-name-label", "jsonnet", "", podNameLabelHook)
	e.applyf(t, `apiVersion: metacontroller.k8s.io/v1alpha1
kind: DecoratorController
metadata: {name: service-per-pod}
spec:
  resources:
  - apiVersion: apps/v1
    resource: statefulsets
    annotationSelector:
      matchExpressions:
      - {key: service-per-pod-label, operator: Exists}
      - {key: service-per-pod-ports, operator: Exists}
  attachments:
  - {apiVersion: v1, resource: services}
  hooks:
    sync:
      webhook: %s
    finalize:
      webhook: %s
---
apiVersion: metacontroller.k8s.io/v1alpha1
kind: DecoratorController
metadata: {name: pod-name-label}
spec:
  resources:
  - apiVersion: v1
    resource: pods
    labelSelector:
      matchExpressions: [{key: pod-name, operator: DoesNotExist}]
    annotationSelector:
      matchExpressions: [{key: pod-name-label, operator: Exists}]
  hooks:
    sync:
      webhook: %s
`, hookRef(ns, "sync-service-per-pod"), hookRef(ns, "finalize-service-per-pod"), hookRef(ns, "sync-pod-name-label"))
	e.applyf(t, `apiVersion: v1
kind: Service
metadata: {name: nginx, namespace: %[1]s, labels: {app: nginx}}
spec:
  clusterIP: None
  selector: {app: nginx}
  ports: [{port: 80, name: web}]
---
apiVersion: apps/v1
kind: StatefulSet
metadata:
  name: nginx
  namespace: %[1]s
  annotations: {service-per-pod-label: pod-name, service-per-pod-ports: "80:80,8080:8080"}
spec:
  selector: {matchLabels: {app: nginx}}
  serviceName: nginx
  replicas: 3
  template:
    metadata:
      labels: {app: nginx}
      annotations: {pod-name-label: pod-name}
    spec:
      terminationGracePeriodSeconds: 1
      containers:
      - name: nginx
        image: nginx:1.26.2
        ports: [{containerPort: 80, name: web}]
`, ns)
	e.waitField(t, servicesGVR, ns, "nginx-2", "nginx-2", "spec", "selector", "pod-name")
	e.waitField(t, podsGVR, ns, "nginx-2", "nginx-2", "metadata", "labels", "pod-name")

	sets := e.Kube.AppsV1().StatefulSets(ns)
	ctx := kubetest.Context(t)
	patch := func(pt types.PatchType, body string) {
		t.Helper()
		if _, err := sets.Patch(ctx, "nginx", pt, []byte(body), metav1.PatchOptions{}); err != nil {
			t.Fatalf("patch the StatefulSet with %s: %v", body, err)
		}
	}
	finalized := func(what string) {
		t.Helper()
		e.waitGone(t, what+": the finalize hook deletes the per-pod Service", servicesGVR, ns, "nginx-2")
		e.waitFor(t, what+": the decorator's finalizer is removed", statefulSetGVR, ns, "nginx", func(o *unstructured.Unstructured) error {
			if slices.Contains(o.GetFinalizers(), finalizer) {
				return fmt.Errorf("finalizers %v", o.GetFinalizers())
			}
			return nil
		})
	}
	patch(types.MergePatchType, `{"metadata":{"annotations":{"service-per-pod-label":null}}}`)
	finalized("opted out")
	patch(types.MergePatchType, `{"metadata":{"annotations":{"service-per-pod-label":"pod-name"}}}`)
	e.waitField(t, servicesGVR, ns, "nginx-2", "nginx-2", "spec", "selector", "pod-name")

	const ours = "metalambda.dev/service-per-pod-test"
	patch(types.JSONPatchType, `[{"op":"add","path":"/metadata/finalizers/-","value":"`+ours+`"}]`)
	t.Cleanup(func() {
		_, _ = sets.Patch(context.Background(), "nginx", types.MergePatchType, []byte(`{"metadata":{"finalizers":[]}}`), metav1.PatchOptions{})
	})
	if err := sets.Delete(ctx, "nginx", metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	finalized("deleted")
}

// blueGreenHook is a blue-green deployment in the fission style of JavaScript hooks:
// two ReplicaSets, <name>-blue and <name>-green, and a Service that selects the
// active colour. A new pod template goes to the inactive ReplicaSet, which is scaled
// up; once all its replicas are available the Service switches to it and the other
// is scaled down. Each ReplicaSet keeps the template it runs in an annotation.
const blueGreenHook = `
const templateKey = 'bluegreendeployments.examples.metalambda.dev/pod-template-json';

function sameJSON(a, b) {
  if (a === null || b === null || typeof a !== 'object' || typeof b !== 'object') return a === b;
  const ka = Object.keys(a), kb = Object.keys(b);
  return ka.length === kb.length && ka.every(k => k in b && sameJSON(a[k], b[k]));
}

function runs(rs, template) {
  return !!rs && sameJSON(JSON.parse(rs.metadata.annotations[templateKey]), template);
}

function replicaSet(bgd, color, replicas, template) {
  const t = JSON.parse(JSON.stringify(template));
  t.metadata.labels.color = color;
  const selector = JSON.parse(JSON.stringify(bgd.spec.selector));
  selector.matchLabels = Object.assign({}, selector.matchLabels, {color: color});
  return {
    apiVersion: 'apps/v1', kind: 'ReplicaSet',
    metadata: {
      name: bgd.metadata.name + '-' + color,
      labels: Object.assign({}, template.metadata.labels, {color: color}),
      annotations: {[templateKey]: JSON.stringify(template)},
    },
    spec: {replicas: replicas, minReadySeconds: bgd.spec.minReadySeconds, selector: selector, template: t},
  };
}

function service(bgd, color) {
  const s = JSON.parse(JSON.stringify(bgd.spec.service));
  s.apiVersion = 'v1';
  s.kind = 'Service';
  s.spec.selector.color = color;
  return s;
}

function sync(observed) {
  const bgd = observed.parent;
  const sets = observed.children['ReplicaSet.apps/v1'];
  const svc = observed.children['Service.v1'][bgd.spec.service.metadata.name];
  let color = svc ? svc.spec.selector.color : 'blue';
  let other = color === 'blue' ? 'green' : 'blue';
  const active = sets[bgd.metadata.name + '-' + color], inactive = sets[bgd.metadata.name + '-' + other];
  const status = {activeColor: color, active: active ? active.status : {}, inactive: inactive ? inactive.status : {}};

  let a = {replicas: active ? active.spec.replicas : bgd.spec.replicas, template: active ? JSON.parse(active.metadata.annotations[templateKey]) : bgd.spec.template};
  let b = {replicas: inactive ? inactive.spec.replicas : 0, template: inactive ? JSON.parse(inactive.metadata.annotations[templateKey]) : bgd.spec.template};
  if (runs(active, bgd.spec.template)) {
    b.replicas = 0;
  } else if (runs(inactive, bgd.spec.template)) {
    b.replicas = bgd.spec.replicas;
    if (inactive.status && inactive.status.availableReplicas === bgd.spec.replicas) {
      [color, other, a, b] = [other, color, b, a];
    }
  } else if (inactive && inactive.spec.replicas === 0 && inactive.status && inactive.status.replicas === 0) {
    b = {replicas: bgd.spec.replicas, template: bgd.spec.template};
  } else {
    b.replicas = 0;
  }
  return {status: status, children: [service(bgd, color), replicaSet(bgd, color, a.replicas, a.template), replicaSet(bgd, other, b.replicas, b.template)]};
}

module.exports = async function(context) {
  return {status: 200, body: sync(context.request.body)};
};
`

// testBlueGreen mirrors examples/bluegreen: blue serves first; a new pod template
// rolls to green, and another one back to blue, each time with all replicas ready
// before the switch and the old colour scaled to zero after it.
func testBlueGreen(t *testing.T, e *examples) {
	const ns = "bluegreen"
	e.function(t, ns, "sync", "javascript", "", blueGreenHook)
	e.apply(t, exampleCRD(examplesGroup, "BlueGreenDeployment", "bluegreendeployments", "Namespaced"))
	e.applyf(t, `apiVersion: metacontroller.k8s.io/v1alpha1
kind: CompositeController
metadata: {name: bluegreen-controller}
spec:
  parentResource: {apiVersion: %s/v1, resource: bluegreendeployments}
  childResources:
  - {apiVersion: v1, resource: services, updateStrategy: {method: InPlace}}
  - {apiVersion: apps/v1, resource: replicasets, updateStrategy: {method: InPlace}}
  hooks:
    sync:
      webhook: %s
`, examplesGroup, hookRef(ns, "sync"))
	e.applyf(t, `apiVersion: %s/v1
kind: BlueGreenDeployment
metadata: {name: nginx, namespace: %s, labels: {app: nginx}}
spec:
  replicas: 3
  minReadySeconds: 2
  selector: {matchLabels: {app: nginx, component: frontend}}
  template:
    metadata:
      labels: {app: nginx, component: frontend}
    spec:
      terminationGracePeriodSeconds: 1
      containers:
      - name: nginx
        image: nginx:1.26.2
        ports: [{containerPort: 80}]
  service:
    metadata:
      name: nginx-frontend
      labels: {app: nginx, component: frontend}
    spec:
      selector: {app: nginx, component: frontend}
      ports: [{port: 80}]
`, examplesGroup, ns)
	deployments := schema.GroupVersionResource{Group: examplesGroup, Version: "v1", Resource: "bluegreendeployments"}
	active := func(color, other string) {
		t.Helper()
		e.waitField(t, replicaSetsGVR, ns, "nginx-"+color, "3", "status", "readyReplicas")
		e.waitField(t, replicaSetsGVR, ns, "nginx-"+other, "0", "status", "replicas")
		e.waitField(t, deployments, ns, "nginx", color, "status", "activeColor")
		e.waitField(t, deployments, ns, "nginx", "3", "status", "active", "availableReplicas")
		e.waitFor(t, "the status observes the latest generation", deployments, ns, "nginx", func(o *unstructured.Unstructured) error {
			if got := fieldString(o.Object, "status", "observedGeneration"); got != fmt.Sprint(o.GetGeneration()) {
				return fmt.Errorf("status.observedGeneration %s, generation %d", got, o.GetGeneration())
			}
			return nil
		})
	}
	rollout := func(label string) {
		t.Helper()
		body := fmt.Sprintf(`{"spec":{"template":{"metadata":{"labels":{%s}}}}}`, label)
		if _, err := e.Dynamic.Resource(deployments).Namespace(ns).Patch(kubetest.Context(t), "nginx", types.MergePatchType, []byte(body), metav1.PatchOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	active("blue", "green")
	rollout(`"new":"label"`)
	active("green", "blue")
	rollout(`"new2":"label2"`)
	active("blue", "green")
}

// catSetHook is a StatefulSet in the fission style of JavaScript hooks: pods
// <name>-<ordinal> started one at a time, each once the ones below are Ready, and
// removed from the highest ordinal down; a claim per pod and claim template. While
// the CatSet is deleted the same hook is the finalize hook: it scales to zero and is
// done once no pod is left.
const catSetHook = `
function ready(pod) {
  return !!pod && pod.status && pod.status.phase === 'Running' && !pod.metadata.deletionTimestamp &&
    (pod.status.conditions || []).some(c => c.type === 'Ready' && c.status === 'True');
}

function ordinal(base, name) {
  const m = /^(.*)-(\d+)$/.exec(name);
  return m && m[1] === base ? Number(m[2]) : -1;
}

function pod(cs, i) {
  const p = JSON.parse(JSON.stringify(cs.spec.template));
  const name = cs.metadata.name + '-' + i;
  Object.assign(p, {apiVersion: 'v1', kind: 'Pod'});
  p.metadata.name = name;
  p.spec.hostname = name;
  p.spec.subdomain = cs.spec.serviceName;
  p.spec.volumes = (p.spec.volumes || []).concat((cs.spec.volumeClaimTemplates || []).map(c =>
    ({name: c.metadata.name, persistentVolumeClaim: {claimName: c.metadata.name + '-' + name}})));
  return p;
}

function claim(template, name) {
  const c = JSON.parse(JSON.stringify(template));
  Object.assign(c, {apiVersion: 'v1', kind: 'PersistentVolumeClaim'});
  c.metadata.name = name;
  return c;
}

function sync(observed) {
  const cs = observed.parent;
  const replicas = observed.finalizing ? 0 : cs.spec.replicas;
  const pods = {};
  for (const p of Object.values(observed.children['Pod.v1'])) {
    const i = ordinal(cs.metadata.name, p.metadata.name);
    if (i >= 0) pods[i] = p;
  }
  let up = 0;
  while (up < replicas && ready(pods[up])) up++;
  const want = new Set(Object.keys(pods).map(Number));
  if (up < replicas) want.add(up);
  if (up === replicas && want.size > 0 && Math.max(...want) >= replicas) want.delete(Math.max(...want));
  const children = [...want].sort((a, b) => b - a).map(i => pod(cs, i));
  for (const t of cs.spec.volumeClaimTemplates || []) {
    const base = t.metadata.name + '-' + cs.metadata.name;
    for (let i = 0; i < replicas; i++) children.push(claim(t, base + '-' + i));
    for (const c of Object.values(observed.children['PersistentVolumeClaim.v1'])) {
      if (ordinal(base, c.metadata.name) >= replicas) children.push(claim(t, c.metadata.name));
    }
  }
  const response = {status: {replicas: Object.keys(pods).length, readyReplicas: up}, children: children};
  if (observed.finalizing) response.finalized = Object.keys(pods).length === 0;
  return response;
}

module.exports = async function(context) {
  return {status: 200, body: sync(context.request.body)};
};
`

// testCatSet mirrors examples/catset: three pods Ready, scaled to four and to two,
// and on deletion the finalize hook scales to zero before the finalizer goes. The
// claim is mounted at /data rather than the example's /usr/share/nginx/html: the
// local node runs an image it does not have as a placeholder on the host's
// read-only system directories, where a mount point must already exist.
func testCatSet(t *testing.T, e *examples) {
	const ns = "catset"
	e.function(t, ns, "sync", "javascript", "", catSetHook)
	e.apply(t, exampleCRD(examplesGroup, "CatSet", "catsets", "Namespaced"))
	e.applyf(t, `apiVersion: metacontroller.k8s.io/v1alpha1
kind: CompositeController
metadata: {name: catset-controller}
spec:
  parentResource:
    apiVersion: %s/v1
    resource: catsets
    revisionHistory: {fieldPaths: [spec.template]}
  childResources:
  - apiVersion: v1
    resource: pods
    updateStrategy:
      method: RollingRecreate
      statusChecks: {conditions: [{type: Ready, status: "True"}]}
  - {apiVersion: v1, resource: persistentvolumeclaims}
  hooks:
    sync:
      webhook: %s
    finalize:
      webhook: %s
`, examplesGroup, hookRef(ns, "sync"), hookRef(ns, "sync"))
	e.applyf(t, `apiVersion: v1
kind: Service
metadata: {name: nginx-backend, namespace: %[2]s}
spec:
  clusterIP: None
  selector: {app: nginx}
  ports: [{port: 80, name: web}]
---
apiVersion: %[1]s/v1
kind: CatSet
metadata: {name: nginx-backend, namespace: %[2]s}
spec:
  serviceName: nginx-backend
  replicas: 3
  selector: {matchLabels: {app: nginx}}
  template:
    metadata:
      labels: {app: nginx, component: backend}
    spec:
      terminationGracePeriodSeconds: 1
      volumes:
      - name: pod-info
        downwardAPI:
          items: [{path: pod_name, fieldRef: {fieldPath: metadata.name}}]
      containers:
      - name: nginx
        image: nginx:1.26.2
        ports: [{containerPort: 80, name: web}]
        volumeMounts: [{name: www, mountPath: /data}]
  volumeClaimTemplates:
  - metadata:
      name: www
      labels: {app: nginx, component: backend}
    spec:
      accessModes: [ReadWriteOnce]
      resources: {requests: {storage: 1Gi}}
`, examplesGroup, ns)
	catsetsGVR := schema.GroupVersionResource{Group: examplesGroup, Version: "v1", Resource: "catsets"}
	catsets := e.Dynamic.Resource(catsetsGVR).Namespace(ns)
	ctx := kubetest.Context(t)
	t.Cleanup(func() {
		if cs, err := catsets.Get(context.Background(), "nginx-backend", metav1.GetOptions{}); err == nil && t.Failed() {
			t.Logf("CatSet status %v", cs.Object["status"])
		}
	})
	patch := func(pt types.PatchType, body string) {
		t.Helper()
		if _, err := catsets.Patch(ctx, "nginx-backend", pt, []byte(body), metav1.PatchOptions{}); err != nil {
			t.Fatalf("patch the CatSet with %s: %v", body, err)
		}
	}
	e.waitField(t, catsetsGVR, ns, "nginx-backend", "3", "status", "readyReplicas")
	patch(types.MergePatchType, `{"spec":{"replicas":4}}`)
	e.waitField(t, catsetsGVR, ns, "nginx-backend", "4", "status", "readyReplicas")
	patch(types.MergePatchType, `{"spec":{"replicas":2}}`)
	e.waitField(t, catsetsGVR, ns, "nginx-backend", "2", "status", "readyReplicas")

	const ours = "metalambda.dev/catset-test"
	patch(types.JSONPatchType, `[{"op":"add","path":"/metadata/finalizers/-","value":"`+ours+`"}]`)
	t.Cleanup(func() {
		_, _ = catsets.Patch(context.Background(), "nginx-backend", types.MergePatchType, []byte(`{"metadata":{"finalizers":[]}}`), metav1.PatchOptions{})
	})
	if err := catsets.Delete(ctx, "nginx-backend", metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	e.waitField(t, catsetsGVR, ns, "nginx-backend", "0", "status", "replicas")
	e.waitFor(t, "only our finalizer is left", catsetsGVR, ns, "nginx-backend", func(o *unstructured.Unstructured) error {
		got, _ := json.Marshal(o.GetFinalizers())
		if string(got) != `["`+ours+`"]` {
			return fmt.Errorf("finalizers %s", got)
		}
		return nil
	})
	patch(types.MergePatchType, `{"metadata":{"finalizers":[]}}`)
	e.waitGone(t, "the CatSet is deleted", catsetsGVR, ns, "nginx-backend")
}
