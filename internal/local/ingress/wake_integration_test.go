//go:build integration

package ingress

import (
	"fmt"
	"net/http"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/watch"

	"github.com/metalambda/metalambda/internal/kubetest"
)

// TestWakesTarget: a request for a backend without endpoints, whose Ingress names a
// wake target, is held; the router writes the target's last-demand annotation on the
// API server; the test, as the target's controller, then publishes an endpoint and
// the held request is answered. A target that does not exist answers 503 at once.
func TestWakesTarget(t *testing.T) {
	ns := env.Namespace(t)
	base := startRouter(t, func(o *Options) {
		o.Dial, o.Targets = startBackends(t, map[string]string{"10.200.0.9:8080": "woken", "10.200.0.8:8080": "plain"}), env.Dynamic
	})
	host := ns + ".sleepy.test"
	ctx := kubetest.Context(t)
	o := objects{t, ns}
	if _, err := env.Kube.CoreV1().ConfigMaps(ns).Create(ctx, &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "sleepy"}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	o.service("sleepy")
	o.service("plain")
	o.service("nowhere")
	o.slice("plain-1", "plain", ready("10.200.0.8"))
	o.ingress(newIngress("sleepy", rule(host, prefix("/", "sleepy")), wakeAnnotated("configmaps.v1/sleepy")))
	o.ingress(newIngress("missing", rule(ns+".missing.test", prefix("/", "nowhere")), wakeAnnotated("configmaps.v1/missing")))
	// Ingresses reach the router in order: once this one answers, the others are known.
	o.ingress(newIngress("probe", rule(host, exact("/probe", "plain"))))
	eventually(t, base, host, "/probe", ok("plain"))

	w, err := env.Kube.CoreV1().ConfigMaps(ns).Watch(ctx, metav1.ListOptions{FieldSelector: "metadata.name=sleepy"})
	if err != nil {
		t.Fatal(err)
	}
	defer w.Stop()
	demand := make(chan string, 1)
	go func() { // the target's controller: an endpoint once demand is written
		for ev := range w.ResultChan() {
			if cm, ok := ev.Object.(*corev1.ConfigMap); ok && ev.Type == watch.Modified && cm.Annotations[LastDemandAnnotation] != "" {
				demand <- cm.Annotations[LastDemandAnnotation]
				s := newSlice("sleepy-1", "sleepy", ready("10.200.0.9"))
				s.Namespace = ns
				s.Labels[discoveryv1.LabelManagedBy] = managedBy
				if _, err := env.Kube.DiscoveryV1().EndpointSlices(ns).Create(ctx, s, metav1.CreateOptions{}); err != nil {
					t.Errorf("create the EndpointSlice: %v", err)
				}
				return
			}
		}
	}()
	start := time.Now()
	got, err := get(ctx, base+"/hello", host)
	if err != nil || got.code != http.StatusOK || got.echo.Backend != "woken" || got.echo.Path != "/hello" {
		t.Fatalf("held request: %+v, %v", got, err)
	}
	select {
	case at := <-demand:
		if ts, err := time.Parse(time.RFC3339Nano, at); err != nil || ts.Before(start.Add(-time.Second)) {
			t.Errorf("%s = %q (%v), want a time after the request", LastDemandAnnotation, at, err)
		}
	default:
		t.Error("answered without a demand write")
	}

	code, retry, body := getWithRetryAfter(t, base+"/", ns+".missing.test")
	if code != http.StatusServiceUnavailable || retry != "1" || !strings.Contains(body, fmt.Sprintf(`%s/configmaps.v1/missing is scaled to zero and waking it failed: write annotation %s: configmaps "missing" not found`, ns, LastDemandAnnotation)) {
		t.Errorf("missing target: %d, Retry-After %q, %q", code, retry, body)
	}
}
