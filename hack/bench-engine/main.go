// Command bench-engine measures the engine on a real control plane: N parents of a
// test CRD, each with 3 ConfigMap children returned by an in-process hook. It runs the
// engine binary as a separate process and prints a table: seconds until every child
// exists and every parent status is written, the API requests the engine issues during
// one full resync of the converged state, and the engine's peak RSS.
//
//	go run ./hack/bench-engine -engine bin/engine -n 100,1000
package main

import (
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync/atomic"
	"syscall"
	"text/tabwriter"
	"time"

	corev1 "k8s.io/api/core/v1"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	apiextensionsclient "k8s.io/apiextensions-apiserver/pkg/client/clientset/clientset"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/kubernetes"

	"github.com/metalambda/metalambda/crds"
	"github.com/metalambda/metalambda/internal/kubetest"
	"github.com/metalambda/metalambda/internal/localcluster"
)

var gvr = schema.GroupVersionResource{Group: "bench.metalambda.dev", Version: "v1", Resource: "benchparents"}

func main() {
	engineBin := flag.String("engine", "bin/engine", "engine binary to measure")
	sizes := flag.String("n", "100,1000", "comma-separated parent counts")
	resync := flag.Int("resync-seconds", 20, "resyncPeriodSeconds of the benchmark controller")
	engineArgs := flag.String("engine-args", "", "extra engine flags, space-separated (e.g. \"--client-go-qps=400 --workers=10\")")
	flag.Parse()
	if err := run(*engineBin, *sizes, *resync, strings.Fields(*engineArgs)); err != nil {
		fmt.Fprintln(os.Stderr, "bench-engine:", err)
		os.Exit(1)
	}
}

type result struct {
	n                   int
	converge            time.Duration
	resyncCalls         int64
	writes, gets, lists float64
	rssMiB              float64
}

func run(engineBin string, sizes string, resync int, extra []string) error {
	var results []result
	for _, s := range strings.Split(sizes, ",") {
		n, err := strconv.Atoi(strings.TrimSpace(s))
		if err != nil {
			return fmt.Errorf("bad -n %q", s)
		}
		r, err := measure(engineBin, n, resync, extra)
		if err != nil {
			return fmt.Errorf("with %d parents: %w", n, err)
		}
		results = append(results, r)
	}
	fmt.Printf("engine %s %s\n", engineBin, strings.Join(extra, " "))
	w := tabwriter.NewWriter(os.Stdout, 0, 0, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintln(w, "parents\tchildren\tconverge (s)\tresync hook calls\tresync writes\tresync uncached GETs\tresync LISTs\tengine peak RSS (MiB)\t")
	for _, r := range results {
		fmt.Fprintf(w, "%d\t%d\t%.1f\t%d\t%.0f\t%.0f\t%.0f\t%.0f\t\n", r.n, 3*r.n, r.converge.Seconds(), r.resyncCalls, r.writes, r.gets, r.lists, r.rssMiB)
	}
	return w.Flush()
}

func measure(engineBin string, n, resync int, extra []string) (result, error) {
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Minute)
	defer cancel()
	cluster, err := localcluster.Start(ctx, localcluster.Options{EtcdNoFsync: true, Components: []localcluster.Component{localcluster.ControllerManager}})
	if err != nil {
		return result{}, err
	}
	defer cluster.Stop()
	cfg := cluster.Config
	kube := kubernetes.NewForConfigOrDie(cfg)
	dyn := dynamic.NewForConfigOrDie(cfg)
	if err := installCRDs(ctx, cluster); err != nil {
		return result{}, err
	}

	var calls atomic.Int64
	hook := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		calls.Add(1)
		var req struct {
			Parent map[string]any `json:"parent"`
		}
		_ = json.NewDecoder(r.Body).Decode(&req)
		name := req.Parent["metadata"].(map[string]any)["name"].(string)
		var children []any
		for i := range 3 {
			children = append(children, map[string]any{
				"apiVersion": "v1", "kind": "ConfigMap",
				"metadata": map[string]any{"name": fmt.Sprintf("%s-%d", name, i)},
				"data":     map[string]any{"index": strconv.Itoa(i)},
			})
		}
		_ = json.NewEncoder(w).Encode(map[string]any{"status": map[string]any{"children": 3}, "children": children})
	}))
	defer hook.Close()

	metricsAddr, err := freeAddr()
	if err != nil {
		return result{}, err
	}
	args := append([]string{"--kubeconfig", cluster.KubeconfigPath, "--metrics-address", metricsAddr, "--health-probe-bind-address", "0"}, extra...)
	engine := exec.Command(engineBin, args...)
	logFile, err := os.Create(filepath.Join(cluster.DataDir, "logs", "engine.log"))
	if err != nil {
		return result{}, err
	}
	engine.Stdout, engine.Stderr = logFile, logFile
	engine.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	if err := engine.Start(); err != nil {
		return result{}, err
	}
	defer func() { _ = engine.Process.Signal(syscall.SIGTERM); _ = engine.Wait() }()

	ns := "bench"
	if _, err := kube.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}, metav1.CreateOptions{}); err != nil {
		return result{}, err
	}
	cc := &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": "metacontroller.k8s.io/v1alpha1", "kind": "CompositeController",
		"metadata": map[string]any{"name": "bench"},
		"spec": map[string]any{
			"generateSelector":    true,
			"resyncPeriodSeconds": int64(resync),
			"parentResource":      map[string]any{"apiVersion": "bench.metalambda.dev/v1", "resource": "benchparents"},
			"childResources":      []any{map[string]any{"apiVersion": "v1", "resource": "configmaps", "updateStrategy": map[string]any{"method": "InPlace"}}},
			"hooks":               map[string]any{"sync": map[string]any{"webhook": map[string]any{"url": hook.URL}}},
		},
	}}
	if _, err := dyn.Resource(schema.GroupVersionResource{Group: "metacontroller.k8s.io", Version: "v1alpha1", Resource: "compositecontrollers"}).Create(ctx, cc, metav1.CreateOptions{}); err != nil {
		return result{}, err
	}

	start := time.Now()
	for i := range n {
		p := &unstructured.Unstructured{Object: map[string]any{
			"apiVersion": "bench.metalambda.dev/v1", "kind": "BenchParent",
			"metadata": map[string]any{"name": fmt.Sprintf("p%04d", i)}, "spec": map[string]any{"i": int64(i)},
		}}
		if _, err := dyn.Resource(gvr).Namespace(ns).Create(ctx, p, metav1.CreateOptions{}); err != nil {
			return result{}, err
		}
	}
	if err := kubetest.Wait(ctx, 15*time.Minute, func(ctx context.Context) (bool, error) {
		return converged(ctx, kube, dyn, ns, n)
	}); err != nil {
		return result{}, fmt.Errorf("not converged: %w", err)
	}
	r := result{n: n, converge: time.Since(start)}

	// One full resync: every parent's hook is called once more.
	time.Sleep(2 * time.Second)
	before, err := scrape(metricsAddr)
	if err != nil {
		return result{}, err
	}
	base := calls.Load()
	if err := kubetest.Wait(ctx, time.Duration(resync)*3*time.Second, func(context.Context) (bool, error) {
		return calls.Load() >= base+int64(n), nil
	}); err != nil {
		return result{}, fmt.Errorf("no full resync: %w", err)
	}
	time.Sleep(time.Second)
	after, err := scrape(metricsAddr)
	if err != nil {
		return result{}, err
	}
	r.resyncCalls = calls.Load() - base
	for key, v := range after {
		d := v - before[key]
		switch verb := key.verb; {
		case key.resource == "events" || key.resource == "discovery" || d == 0:
		case verb == "get":
			r.gets += d
		case verb == "list" || verb == "watch":
			r.lists += d
		default:
			r.writes += d
		}
	}
	r.rssMiB = peakRSS(engine.Process.Pid)
	return r, nil
}

func converged(ctx context.Context, kube kubernetes.Interface, dyn dynamic.Interface, ns string, n int) (bool, error) {
	cms, err := kube.CoreV1().ConfigMaps(ns).List(ctx, metav1.ListOptions{LabelSelector: "controller-uid"})
	if err != nil {
		return false, err
	}
	if len(cms.Items) < 3*n {
		return false, fmt.Errorf("%d of %d children", len(cms.Items), 3*n)
	}
	parents, err := dyn.Resource(gvr).Namespace(ns).List(ctx, metav1.ListOptions{})
	if err != nil {
		return false, err
	}
	done := 0
	for _, p := range parents.Items {
		if c, _, _ := unstructured.NestedInt64(p.Object, "status", "children"); c == 3 {
			done++
		}
	}
	return done == n, fmt.Errorf("%d of %d statuses", done, n)
}

type series struct{ verb, resource string }

// scrape sums metalambda_engine_api_requests_total by verb and resource.
func scrape(addr string) (map[series]float64, error) {
	resp, err := http.Get("http://" + addr + "/metrics")
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	if err != nil {
		return nil, err
	}
	out := map[series]float64{}
	for line := range strings.Lines(string(body)) {
		if !strings.HasPrefix(line, "metalambda_engine_api_requests_total{") {
			continue
		}
		labels, value, _ := strings.Cut(strings.TrimPrefix(line, "metalambda_engine_api_requests_total{"), "} ")
		v, _ := strconv.ParseFloat(strings.TrimSpace(value), 64)
		out[series{verb: labelOf(labels, "verb"), resource: labelOf(labels, "resource")}] += v
	}
	return out, nil
}

func labelOf(labels, name string) string {
	for part := range strings.SplitSeq(labels, ",") {
		k, v, _ := strings.Cut(part, "=")
		if k == name {
			return strings.Trim(v, `"`)
		}
	}
	return ""
}

func peakRSS(pid int) float64 {
	data, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		return 0
	}
	for line := range strings.Lines(string(data)) {
		if f := strings.Fields(line); len(f) >= 2 && f[0] == "VmHWM:" {
			kb, _ := strconv.ParseFloat(f[1], 64)
			return kb / 1024
		}
	}
	return 0
}

func freeAddr() (string, error) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return "", err
	}
	defer l.Close()
	return l.Addr().String(), nil
}

func installCRDs(ctx context.Context, cluster *localcluster.Cluster) error {
	all, err := crds.All()
	if err != nil {
		return err
	}
	preserve := true
	all = append(all, &apiextensionsv1.CustomResourceDefinition{
		ObjectMeta: metav1.ObjectMeta{Name: "benchparents.bench.metalambda.dev"},
		Spec: apiextensionsv1.CustomResourceDefinitionSpec{
			Group: "bench.metalambda.dev", Scope: apiextensionsv1.NamespaceScoped,
			Names: apiextensionsv1.CustomResourceDefinitionNames{Plural: "benchparents", Kind: "BenchParent", ListKind: "BenchParentList", Singular: "benchparent"},
			Versions: []apiextensionsv1.CustomResourceDefinitionVersion{{
				Name: "v1", Served: true, Storage: true,
				Subresources: &apiextensionsv1.CustomResourceSubresources{Status: &apiextensionsv1.CustomResourceSubresourceStatus{}},
				Schema: &apiextensionsv1.CustomResourceValidation{OpenAPIV3Schema: &apiextensionsv1.JSONSchemaProps{
					Type: "object", Properties: map[string]apiextensionsv1.JSONSchemaProps{
						"spec": {Type: "object", XPreserveUnknownFields: &preserve}, "status": {Type: "object", XPreserveUnknownFields: &preserve},
					},
				}},
			}},
		},
	})
	client, err := apiextensionsclient.NewForConfig(cluster.Config)
	if err != nil {
		return err
	}
	return crds.Install(ctx, client, all...)
}
