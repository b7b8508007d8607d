package main

import (
	"context"
	"fmt"
	"io"
	"maps"
	"net/http"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/kubernetes"

	"github.com/metalambda/metalambda/internal/local/ingress"
	"github.com/metalambda/metalambda/internal/manifest"
)

// coldLambda scales to zero after the smallest idle time the CRD allows.
const coldLambda = `
apiVersion: v1
kind: Namespace
metadata: {name: bench-cold}
---
apiVersion: example.com/v1
kind: PythonLambda
metadata: {name: cold, namespace: bench-cold}
spec:
  host: cold.example.com
  scaleToZero: {idleSeconds: 5}
  code: |
    output = "warm"
`

// Stages of a cold start, each the first time the bench saw it through a watch after
// sending the request.
const (
	coldDemand    = "last-demand annotation written"
	coldCreated   = "pod created"
	coldScheduled = "pod scheduled"
	coldRunning   = "container running"
	coldReady     = "pod Ready"
	coldEndpoint  = "EndpointSlice ready"
	coldAnswer    = "answer received"
)

var coldStages = []string{coldDemand, coldCreated, coldScheduled, coldRunning, coldReady, coldEndpoint, coldAnswer}

// coldStart measures runs cold starts: each waits until the lambda runs no pod, sends
// one request through the ingress and times its answer, watching the pod and its
// EndpointSlice meanwhile.
func coldStart(ctx context.Context, kube kubernetes.Interface, dyn dynamic.Interface, applier *manifest.Applier, ingressAddr string, runs int) (map[string][]time.Duration, error) {
	if _, err := applier.Apply(ctx, []byte(coldLambda)); err != nil {
		return nil, err
	}
	defer kube.CoreV1().Namespaces().Delete(context.Background(), "bench-cold", metav1.DeleteOptions{})
	if err := askCold(ingressAddr, 2*time.Minute); err != nil {
		return nil, err
	}
	out := map[string][]time.Duration{}
	for range runs {
		if err := waitNoPods(ctx, kube, time.Minute); err != nil {
			return nil, err
		}
		seen, err := oneColdStart(ctx, kube, dyn, ingressAddr)
		if err != nil {
			return nil, err
		}
		for stage, d := range seen {
			out[stage] = append(out[stage], d)
		}
	}
	return out, nil
}

func oneColdStart(ctx context.Context, kube kubernetes.Interface, dyn dynamic.Interface, ingressAddr string) (map[string]time.Duration, error) {
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	pods, err := kube.CoreV1().Pods("bench-cold").Watch(ctx, metav1.ListOptions{})
	if err != nil {
		return nil, err
	}
	slices, err := kube.DiscoveryV1().EndpointSlices("bench-cold").Watch(ctx, metav1.ListOptions{})
	if err != nil {
		return nil, err
	}
	lambdas := dyn.Resource(schema.GroupVersionResource{Group: "example.com", Version: "v1", Resource: "pythonlambdas"}).Namespace("bench-cold")
	before, err := lambdas.Get(ctx, "cold", metav1.GetOptions{})
	if err != nil {
		return nil, err
	}
	demands, err := lambdas.Watch(ctx, metav1.ListOptions{FieldSelector: "metadata.name=cold", ResourceVersion: before.GetResourceVersion()})
	if err != nil {
		return nil, err
	}
	var mu sync.Mutex
	seen := map[string]time.Duration{}
	start := time.Now()
	mark := func(stage string) {
		mu.Lock()
		defer mu.Unlock()
		if _, ok := seen[stage]; !ok {
			seen[stage] = time.Since(start)
		}
	}
	go follow(pods, func(obj any) { podStages(obj, mark) })
	go follow(slices, func(obj any) {
		if s, ok := obj.(*discoveryv1.EndpointSlice); ok && sliceReady(s) {
			mark(coldEndpoint)
		}
	})
	go follow(demands, func(obj any) {
		if u, ok := obj.(*unstructured.Unstructured); ok && u.GetAnnotations()[ingress.LastDemandAnnotation] != before.GetAnnotations()[ingress.LastDemandAnnotation] {
			mark(coldDemand)
		}
	})
	mu.Lock()
	start = time.Now()
	mu.Unlock()
	if err := askCold(ingressAddr, 0); err != nil { // one request: a failed hold is a failed run
		return nil, err
	}
	mark(coldAnswer)
	mu.Lock()
	defer mu.Unlock()
	return maps.Clone(seen), nil // the watchers may still mark
}

func follow(w watch.Interface, f func(any)) {
	defer w.Stop()
	for ev := range w.ResultChan() {
		f(ev.Object)
	}
}

func podStages(obj any, mark func(string)) {
	pod, ok := obj.(*corev1.Pod)
	if !ok || pod.DeletionTimestamp != nil {
		return
	}
	mark(coldCreated)
	if pod.Spec.NodeName != "" {
		mark(coldScheduled)
	}
	for _, cs := range pod.Status.ContainerStatuses {
		if cs.State.Running != nil {
			mark(coldRunning)
		}
	}
	for _, c := range pod.Status.Conditions {
		if c.Type == corev1.PodReady && c.Status == corev1.ConditionTrue {
			mark(coldReady)
		}
	}
}

func sliceReady(s *discoveryv1.EndpointSlice) bool {
	for _, e := range s.Endpoints {
		if e.Conditions.Ready != nil && *e.Conditions.Ready {
			return true
		}
	}
	return false
}

// askCold asks the lambda once (the ingress holds the request while it scales up),
// retrying only when the request cannot be sent.
func askCold(ingressAddr string, timeout time.Duration) error {
	deadline := time.Now().Add(timeout)
	for {
		req, _ := http.NewRequest(http.MethodGet, "http://"+ingressAddr+"/", nil)
		req.Host = "cold.example.com"
		resp, err := http.DefaultClient.Do(req)
		if err == nil {
			body, _ := io.ReadAll(resp.Body)
			resp.Body.Close()
			if resp.StatusCode == http.StatusOK && string(body) == "warm" {
				return nil
			}
			err = fmt.Errorf("answered %d %q", resp.StatusCode, body)
		}
		if time.Now().After(deadline) {
			return err
		}
		time.Sleep(50 * time.Millisecond)
	}
}

func waitNoPods(ctx context.Context, kube kubernetes.Interface, timeout time.Duration) error {
	deadline := time.Now().Add(timeout)
	for time.Now().Before(deadline) {
		list, err := kube.CoreV1().Pods("bench-cold").List(ctx, metav1.ListOptions{})
		if err == nil && len(list.Items) == 0 {
			return nil
		}
		time.Sleep(100 * time.Millisecond)
	}
	return fmt.Errorf("the lambda still runs pods %s after its idle time", timeout)
}
