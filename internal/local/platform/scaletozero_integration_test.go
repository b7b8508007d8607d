//go:build integration

package platform

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"

	"github.com/metalambda/metalambda/internal/kubetest"
	"github.com/metalambda/metalambda/internal/local/ingress"
)

// scaleLambdas are three PythonLambdas: "sleepy" scales to zero after 5 idle seconds
// and its code sleeps for ?sleep= seconds, then answers; "broken" scales to zero too
// but its code has a syntax error, so its pod never becomes Ready; "steady" has no
// scaleToZero.
const scaleLambdas = `
apiVersion: v1
kind: Namespace
metadata: {name: scale}
---
apiVersion: example.com/v1
kind: PythonLambda
metadata: {name: sleepy, namespace: scale}
spec:
  host: sleepy.example.com
  scaleToZero: {idleSeconds: 5}
  code: |
    import time
    time.sleep(float(query_params.get("sleep", ["0"])[0]))
    output = "awake after %s" % query_params.get("sleep", ["0"])[0]
---
apiVersion: example.com/v1
kind: PythonLambda
metadata: {name: broken, namespace: scale}
spec:
  host: broken.example.com
  scaleToZero: {idleSeconds: 5}
  code: |
    output = (
---
apiVersion: example.com/v1
kind: PythonLambda
metadata: {name: steady, namespace: scale}
spec:
  host: steady.example.com
  code: |
    output = "always here"
`

// TestScaleToZero: a lambda with scaleToZero drops to zero pods when idle; a request
// through the ingress is then held while it scales up, and answered; a request longer
// than idleSeconds is not cut; it goes back to zero afterwards. A request held longer
// than the ingress's bound (30 s) answers 503 with Retry-After. A lambda without
// scaleToZero keeps its pod and its Ingress names no wake target.
func TestScaleToZero(t *testing.T) {
	p, ctx := startWithNode(t, nodeOptions("mls2z0", "10.244.227.0/24"))
	defer p.Stop()
	env := connect(t, p.Kubeconfig)
	kube := env.Kube
	if _, err := env.Apply(ctx, []byte(scaleLambdas)); err != nil {
		t.Fatal(err)
	}
	lambdas := env.Dynamic.Resource(schema.GroupVersionResource{Group: "example.com", Version: "v1", Resource: "pythonlambdas"}).Namespace("scale")
	base := "http://" + p.opts.IngressAddress
	pods := func(ctx context.Context, name string) (int, error) {
		list, err := kube.CoreV1().Pods("scale").List(ctx, metav1.ListOptions{LabelSelector: "app.kubernetes.io/instance=" + name})
		if err != nil {
			return 0, err
		}
		return len(list.Items), nil
	}
	atZero := func(name, what string) {
		kubetest.Eventually(t, 2*time.Minute, what, func(ctx context.Context) (bool, error) {
			n, err := pods(ctx, name)
			if err != nil || n > 0 {
				return false, fmt.Errorf("%d pods (%v)", n, err)
			}
			obj, err := lambdas.Get(ctx, name, metav1.GetOptions{})
			if err != nil {
				return false, err
			}
			conds, _, _ := unstructured.NestedSlice(obj.Object, "status", "conditions")
			reason := ""
			for _, c := range conds {
				if c, ok := c.(map[string]any); ok && c["type"] == "Ready" {
					reason, _ = c["reason"].(string)
				}
			}
			return reason == "ScaledToZero", fmt.Errorf("conditions %v", conds)
		})
	}

	// A new lambda starts with its pod and answers; with no request it drops to zero.
	kubetest.Eventually(t, 3*time.Minute, "both lambdas answer", func(context.Context) (bool, error) {
		c1, b1 := get(t, base+"/", "sleepy.example.com")
		c2, b2 := get(t, base+"/", "steady.example.com")
		return c1 == 200 && b1 == "awake after 0" && c2 == 200 && b2 == "always here", fmt.Errorf("%d %q, %d %q", c1, b1, c2, b2)
	})
	atZero("sleepy", "the idle lambda has no pod")
	atZero("broken", "the idle broken lambda has no pod")

	// A request for the broken lambda is held until the bound, meanwhile.
	type answer struct {
		code        int
		retry, body string
	}
	brokenDone := make(chan answer, 1)
	go func() {
		req, _ := http.NewRequestWithContext(ctx, http.MethodGet, base+"/", nil)
		req.Host = "broken.example.com"
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			brokenDone <- answer{body: err.Error()}
			return
		}
		defer resp.Body.Close()
		body, _ := io.ReadAll(resp.Body)
		brokenDone <- answer{resp.StatusCode, resp.Header.Get("Retry-After"), string(body)}
	}()

	// A request is held while the lambda scales up, and answered.
	start := time.Now()
	if code, body := get(t, base+"/?sleep=0", "sleepy.example.com"); code != http.StatusOK || body != "awake after 0" {
		t.Fatalf("the held request answered %d %q", code, body)
	}
	t.Logf("cold start: request sent -> answer in %s", time.Since(start).Round(time.Millisecond))
	obj, err := lambdas.Get(ctx, "sleepy", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if at, err := time.Parse(time.RFC3339Nano, obj.GetAnnotations()[ingress.LastDemandAnnotation]); err != nil || at.Before(start.Add(-time.Second)) {
		t.Errorf("annotation %s = %q (%v), want a time after the request", ingress.LastDemandAnnotation, obj.GetAnnotations()[ingress.LastDemandAnnotation], err)
	}

	// A request in flight for longer than idleSeconds keeps its pod: it is answered
	// in full.
	if code, body := get(t, base+"/?sleep=8", "sleepy.example.com"); code != http.StatusOK || body != "awake after 8" {
		t.Fatalf("the long request answered %d %q", code, body)
	}
	atZero("sleepy", "the lambda is back to zero after the requests")

	got := <-brokenDone
	wantBody := "backend scale/broken-svc:80 of Ingress scale/broken-ingress: scale/pythonlambdas.v1.example.com/broken is scaled to zero and waking it failed: no endpoint became ready in time (waited 30s, Options.HoldTimeout)\n"
	if got.code != http.StatusServiceUnavailable || got.retry != "1" || got.body != wantBody {
		t.Errorf("the request held past the bound answered %d, Retry-After %q, %q; want 503, 1, %q", got.code, got.retry, got.body, wantBody)
	}

	// The lambda without scaleToZero kept its pod through all this.
	if n, err := pods(ctx, "steady"); err != nil || n != 1 {
		t.Errorf("steady has %d pods (%v), want 1", n, err)
	}
	ing, err := kube.NetworkingV1().Ingresses("scale").Get(ctx, "steady-ingress", metav1.GetOptions{})
	if err != nil || ing.Annotations[ingress.WakeTargetAnnotation] != "" {
		t.Errorf("steady's Ingress annotations %v (%v), want no wake target", ing.GetAnnotations(), err)
	}
	if code, body := get(t, base+"/", "steady.example.com"); code != 200 || body != "always here" {
		t.Errorf("steady answered %d %q", code, body)
	}
}
