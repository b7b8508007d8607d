//go:build integration

package platform

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"

	"github.com/metalambda/metalambda/internal/kubetest"
)

const examplesGroup = "examples.metalambda.dev"

var daemonSetsGVR = schema.GroupVersionResource{Group: "apps", Version: "v1", Resource: "daemonsets"}

// daemonJobHook runs a DaemonJob's pod template once on every node: the template's
// containers become the init containers of a DaemonSet whose one container only
// pauses, so that a pod is Ready once its work is done. When every scheduled pod is
// Ready the job is complete; once its own status says so (the status was stored),
// the hook keeps that status and asks for no children, which deletes the DaemonSet.
const daemonJobHook = `
import copy


def rolled_out(status):
    want = status.get('desiredNumberScheduled', 0)
    return want > 0 and status.get('numberReady', 0) == want


def daemon_set(job):
    labels = job['spec']['template']['metadata']['labels']
    template = copy.deepcopy(job['spec']['template'])
    pod = template['spec']
    pod['initContainers'] = pod['containers']
    pod['containers'] = [{'name': 'pause', 'image': job['spec'].get('pauseImage', 'registry.k8s.io/pause:3.10'),
                          'resources': {'requests': {'cpu': '10m'}}}]
    return {
        'apiVersion': 'apps/v1', 'kind': 'DaemonSet',
        'metadata': {'name': job['metadata']['name'] + '-dj', 'labels': dict(labels)},
        'spec': {'selector': {'matchLabels': dict(labels)}, 'template': template},
    }


def sync(request):
    job = request['parent']
    if rolled_out(job.get('status', {})):
        status = copy.deepcopy(job['status'])
        status['conditions'] = [{'type': 'Complete', 'status': 'True'}]
        return {'status': status, 'children': []}
    name = job['metadata']['name'] + '-dj'
    observed = request['children'].get('DaemonSet.apps/v1', {}).get(name, {}).get('status', {})
    status = copy.deepcopy(observed)
    status['conditions'] = [{'type': 'Complete', 'status': str(rolled_out(observed))}]
    return {'status': status, 'children': [daemon_set(job)]}
`

// testDaemonJob mirrors examples/daemonjob: the job's pods run on the node, the job
// reports Complete, and the DaemonSet is deleted afterwards. The deletion needs the
// engine to call the hook again once the Complete status is stored, as upstream's
// does.
func testDaemonJob(t *testing.T, e *examples) {
	const ns = "daemonjob"
	e.function(t, ns, "sync", "python", "", daemonJobHook)
	e.apply(t, exampleCRD(examplesGroup, "DaemonJob", "daemonjobs", "Namespaced"))
	e.applyf(t, `apiVersion: metacontroller.k8s.io/v1alpha1
kind: CompositeController
metadata: {name: daemonjob-controller}
spec:
  generateSelector: true
  parentResource: {apiVersion: %s/v1, resource: daemonjobs}
  childResources:
  - {apiVersion: apps/v1, resource: daemonsets}
  hooks:
    sync:
      webhook: %s
`, examplesGroup, hookRef(ns, "sync"))
	e.applyf(t, `apiVersion: %s/v1
kind: DaemonJob
metadata: {name: hello-world, namespace: %s}
spec:
  template:
    metadata:
      labels: {app: hello-world}
    spec:
      terminationGracePeriodSeconds: 10
      containers:
      - name: hello-world
        image: busybox
        command: ["sh", "-c", "echo 'Hello world' && sleep 2"]
        resources:
          requests: {cpu: 10m}
`, examplesGroup, ns)
	daemonJobs := schema.GroupVersionResource{Group: examplesGroup, Version: "v1", Resource: "daemonjobs"}
	e.waitField(t, daemonJobs, ns, "hello-world", "True", "status", "conditions", "0", "status")
	e.waitGone(t, "the finished job's DaemonSet is deleted", daemonSetsGVR, ns, "hello-world-dj")
}

// indexedJobHook runs spec.completions pods named <job>-<index>, at most
// spec.parallelism at a time, each told its index in $JOB_INDEX; once the job's
// status says Complete (or Failed) it starts no more pods.
const indexedJobHook = `
import copy
import re


def finished(job):
    return any(c.get('type') in ('Complete', 'Failed') and c.get('status') == 'True'
               for c in job.get('status', {}).get('conditions', []))


def index_of(job_name, pod_name):
    m = re.fullmatch(r'(.*)-(\d+)', pod_name)
    return int(m.group(2)) if m and m.group(1) == job_name else None


def pod_for(job, index):
    pod = copy.deepcopy(job['spec']['template'])
    pod['apiVersion'], pod['kind'] = 'v1', 'Pod'
    pod.setdefault('metadata', {})['name'] = '%s-%d' % (job['metadata']['name'], index)
    for c in pod['spec']['containers']:
        c['env'] = c.get('env', []) + [{'name': 'JOB_INDEX', 'value': str(index)}]
    return pod


def sync(request):
    job = request['parent']
    observed = {}
    counts = {'active': 0, 'succeeded': 0, 'failed': 0}
    for name, pod in request['children'].get('Pod.v1', {}).items():
        index = index_of(job['metadata']['name'], name)
        if index is None:
            continue
        observed[index] = pod
        phase = pod.get('status', {}).get('phase')
        counts['succeeded' if phase == 'Succeeded' else 'failed' if phase == 'Failed' else 'active'] += 1
    if finished(job):
        return {'status': job['status'], 'children': [pod_for(job, i) for i in observed]}
    completions = job['spec'].get('completions', 1)
    status = dict(counts, conditions=[{'type': 'Complete', 'status': str(counts['succeeded'] == completions)}])
    pods = {i: pod_for(job, i) for i in observed}
    active = counts['active']
    for i in range(completions):
        if i not in pods and active < job['spec'].get('parallelism', 1):
            pods[i] = pod_for(job, i)
            active += 1
    return {'status': status, 'children': list(pods.values())}
`

// testIndexedJob mirrors examples/indexedjob: ten pods, two at a time, all succeed,
// and the last one printed its index.
func testIndexedJob(t *testing.T, e *examples) {
	const ns = "indexedjob"
	e.function(t, ns, "sync", "python", "", indexedJobHook)
	e.apply(t, exampleCRD(examplesGroup, "IndexedJob", "indexedjobs", "Namespaced"))
	e.applyf(t, `apiVersion: metacontroller.k8s.io/v1alpha1
kind: CompositeController
metadata: {name: indexedjob-controller}
spec:
  generateSelector: true
  parentResource: {apiVersion: %s/v1, resource: indexedjobs}
  childResources:
  - {apiVersion: v1, resource: pods}
  hooks:
    sync:
      webhook: %s
`, examplesGroup, hookRef(ns, "sync"))
	e.applyf(t, `apiVersion: %s/v1
kind: IndexedJob
metadata: {name: print-index, namespace: %s}
spec:
  completions: 10
  parallelism: 2
  template:
    metadata:
      labels: {app: print-index}
    spec:
      restartPolicy: OnFailure
      containers:
      - name: print-index
        image: busybox
        command: ["sh", "-c", "echo ${JOB_INDEX}"]
`, examplesGroup, ns)
	indexedJobs := schema.GroupVersionResource{Group: examplesGroup, Version: "v1", Resource: "indexedjobs"}
	e.waitField(t, indexedJobs, ns, "print-index", "10", "status", "succeeded")
	kubetest.Eventually(t, 30*time.Second, "pod print-index-9 printed its index", func(ctx context.Context) (bool, error) {
		logs, err := e.Kube.CoreV1().Pods(ns).GetLogs("print-index-9", &corev1.PodLogOptions{}).DoRaw(ctx)
		if err != nil {
			return false, err
		}
		return strings.TrimSpace(string(logs)) == "9", fmt.Errorf("logs %q", logs)
	})
}
