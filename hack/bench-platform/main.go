// Command bench-platform measures the local platform as a newcomer meets it: seconds
// from applying the PythonLambda sample to the first right answer at the ingress host,
// from deleting one of its pods to that pod serving again, and the cold start of a
// PythonLambda scaled to zero (request sent to the ingress -> answer), with where its
// time goes. It runs the platform with the local node (root and the CNI plugins
// needed) in a temporary data directory.
//
//	go run ./hack/bench-platform -runs 5 -cold-runs 10
package main

import (
	"context"
	"flag"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"text/tabwriter"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/clientcmd"

	"github.com/metalambda/metalambda/functions"
	"github.com/metalambda/metalambda/internal/gateway/lambda"
	"github.com/metalambda/metalambda/internal/local/cluster"
	"github.com/metalambda/metalambda/internal/local/node"
	"github.com/metalambda/metalambda/internal/local/platform"
	"github.com/metalambda/metalambda/internal/manifest"
)

const want = "Hello Martin! Your name in reverse is nitraM"

func main() {
	// A sandbox starts this executable again as its launcher or a script worker.
	lambda.ServeWorker()
	runs := flag.Int("runs", 5, "how many times to apply and delete the sample")
	coldRuns := flag.Int("cold-runs", 10, "how many cold starts of a PythonLambda scaled to zero to measure (0: none)")
	flag.Parse()
	if err := run(*runs, *coldRuns); err != nil {
		fmt.Fprintln(os.Stderr, "bench-platform:", err)
		os.Exit(1)
	}
}

func run(runs, coldRuns int) error {
	dir, err := os.MkdirTemp("", "metalambda-bench-")
	if err != nil {
		return err
	}
	defer os.RemoveAll(dir)
	ingress, gateway := freeAddr(), freeAddr()
	opts := platform.Defaults()
	opts.DataDir, opts.BinDir, opts.Builtins = filepath.Join(dir, "data"), os.Getenv(cluster.BinDirEnv), functions.Builtins()
	opts.IngressAddress, opts.GatewayAddress = ingress, gateway
	opts.Node = func(kube kubernetes.Interface, d string) (platform.NodeRunner, error) {
		o := node.Defaults()
		o.Bridge, o.PodCIDR, o.StateDir = "mlbench0", "10.244.216.0/24", filepath.Join(d, "node")
		return node.New(kube, o)
	}
	ctx := context.Background()
	p, err := platform.Start(ctx, opts, io.Discard)
	if err != nil {
		return err
	}
	defer p.Stop()
	cfg, err := clientcmd.BuildConfigFromFlags("", p.Kubeconfig)
	if err != nil {
		return err
	}
	kube := kubernetes.NewForConfigOrDie(cfg)
	dyn := dynamic.NewForConfigOrDie(cfg)
	applier, err := manifest.NewApplier(cfg, "bench")
	if err != nil {
		return err
	}
	sample, err := os.ReadFile("operators/pythonlambda/sample.yaml")
	if err != nil {
		return err
	}
	var firstAnswer, recovery []time.Duration
	stages := map[string][]time.Duration{}
	for range runs {
		start := time.Now()
		if _, err := applier.Apply(ctx, sample); err != nil {
			return err
		}
		if err := waitAnswer(ingress, 2*time.Minute); err != nil {
			return err
		}
		firstAnswer = append(firstAnswer, time.Since(start))

		pods, err := kube.CoreV1().Pods("python-lambda-operator").List(ctx, metav1.ListOptions{})
		if err != nil || len(pods.Items) == 0 {
			return fmt.Errorf("no pods: %v", err)
		}
		victim := pods.Items[0]
		start = time.Now()
		if err := kube.CoreV1().Pods(victim.Namespace).Delete(ctx, victim.Name, metav1.DeleteOptions{}); err != nil {
			return err
		}
		seen, err := waitReady(ctx, kube, victim.Namespace, victim.Name, string(victim.UID))
		if err != nil {
			return err
		}
		recovery = append(recovery, time.Since(start))
		for stage, at := range seen {
			stages[stage] = append(stages[stage], at.Sub(start))
		}

		if err := kube.CoreV1().Namespaces().Delete(ctx, "python-lambda-operator", metav1.DeleteOptions{}); err != nil {
			return err
		}
		if err := waitGone(ctx, kube); err != nil {
			return err
		}
	}
	if runs > 0 {
		fmt.Printf("local platform, PythonLambda sample (2 replicas), %d runs\n", runs)
	}
	if err := printTable([]row{
		{"kubectl apply -> first right answer at the ingress", firstAnswer},
		{"pod deleted -> replacement Ready", recovery},
		{"  of which: old pod gone", stages[stageGone]},
		{"  replacement created", stages[stageCreated]},
		{"  replacement scheduled", stages[stageScheduled]},
		{"  replacement's container running", stages[stageRunning]},
		{"  replacement Ready", stages[stageReady]},
	}); err != nil || coldRuns == 0 {
		return err
	}
	cold, err := coldStart(ctx, kube, dyn, applier, ingress, coldRuns)
	if err != nil {
		return fmt.Errorf("cold start: %w", err)
	}
	fmt.Printf("\nlocal platform, PythonLambda scaled to zero (scaleToZero.idleSeconds 5), %d cold starts\n", coldRuns)
	rows := []row{{"request sent -> answer (cold start)", cold[coldAnswer]}}
	for _, stage := range coldStages {
		rows = append(rows, row{"  " + stage, cold[stage]})
	}
	return printTable(rows)
}

// median of sorted samples: the middle one, or the mean of the middle two.
func median(d []time.Duration) time.Duration {
	n := len(d)
	if n%2 == 1 {
		return d[n/2]
	}
	return (d[n/2-1] + d[n/2]) / 2
}

// row is one measure: its samples.
type row struct {
	name string
	d    []time.Duration
}

// printTable prints median, min and max of each row with samples, if any has.
func printTable(rows []row) error {
	if !slices.ContainsFunc(rows, func(r row) bool { return len(r.d) > 0 }) {
		return nil
	}
	w := tabwriter.NewWriter(os.Stdout, 0, 0, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintln(w, "measure\tmedian (s)\tmin (s)\tmax (s)\t")
	for _, m := range rows {
		if len(m.d) == 0 {
			continue
		}
		slices.Sort(m.d)
		fmt.Fprintf(w, "%s\t%.2f\t%.2f\t%.2f\t\n", m.name, median(m.d).Seconds(), m.d[0].Seconds(), m.d[len(m.d)-1].Seconds())
	}
	return w.Flush()
}

func waitAnswer(ingress string, timeout time.Duration) error {
	deadline := time.Now().Add(timeout)
	for time.Now().Before(deadline) {
		req, _ := http.NewRequest(http.MethodGet, "http://"+ingress+"/?name=Martin", nil)
		req.Host = "example.com"
		if resp, err := http.DefaultClient.Do(req); err == nil {
			body, _ := io.ReadAll(resp.Body)
			resp.Body.Close()
			if resp.StatusCode == 200 && string(body) == want {
				return nil
			}
		}
		time.Sleep(20 * time.Millisecond)
	}
	return fmt.Errorf("no right answer within %s", timeout)
}

// Stages of a pod's replacement, as seen by polling every 20 ms.
const (
	stageGone      = "gone"
	stageCreated   = "created"
	stageScheduled = "scheduled"
	stageRunning   = "running"
	stageReady     = "ready"
)

// waitReady waits until the pod named name has a new UID and is Ready, and returns
// when it first saw each stage of the replacement.
func waitReady(ctx context.Context, kube kubernetes.Interface, ns, name, oldUID string) (map[string]time.Time, error) {
	seen := map[string]time.Time{}
	mark := func(stage string) {
		if _, ok := seen[stage]; !ok {
			seen[stage] = time.Now()
		}
	}
	deadline := time.Now().Add(2 * time.Minute)
	for time.Now().Before(deadline) {
		pod, err := kube.CoreV1().Pods(ns).Get(ctx, name, metav1.GetOptions{})
		if err != nil || string(pod.UID) != oldUID {
			mark(stageGone)
		}
		if err == nil && string(pod.UID) != oldUID {
			mark(stageCreated)
			if pod.Spec.NodeName != "" {
				mark(stageScheduled)
			}
			for _, cs := range pod.Status.ContainerStatuses {
				if cs.State.Running != nil {
					mark(stageRunning)
				}
			}
			for _, c := range pod.Status.Conditions {
				if c.Type == "Ready" && c.Status == "True" {
					mark(stageReady)
					return seen, nil
				}
			}
		}
		time.Sleep(20 * time.Millisecond)
	}
	return nil, fmt.Errorf("pod %s/%s not back within 2 minutes", ns, name)
}

func waitGone(ctx context.Context, kube kubernetes.Interface) error {
	deadline := time.Now().Add(3 * time.Minute)
	for time.Now().Before(deadline) {
		if _, err := kube.CoreV1().Namespaces().Get(ctx, "python-lambda-operator", metav1.GetOptions{}); err != nil {
			return nil
		}
		time.Sleep(200 * time.Millisecond)
	}
	return fmt.Errorf("namespace python-lambda-operator not deleted within 3 minutes")
}

func freeAddr() string {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		panic(err)
	}
	defer l.Close()
	return l.Addr().String()
}
