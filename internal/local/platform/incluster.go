package platform

import (
	"context"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/kubernetes"

	"github.com/metalambda/metalambda/deploy"
	"github.com/metalambda/metalambda/internal/local/node"
	"github.com/metalambda/metalambda/internal/manifest"
)

// Component images: the chart's engine and gateway images, which the local node runs
// as this machine's own binaries (ComponentImages).
const (
	EngineImage  = "ghcr.io/metalambda/engine"
	GatewayImage = "ghcr.io/metalambda/gateway"
)

// ReleaseName is the name the in-cluster mode installs the chart under.
const ReleaseName = "metalambda"

// InCluster runs the engine and the gateway as pods of the cluster, installed from
// the Helm chart, instead of in the platform's own process.
type InCluster struct {
	// ChartDir is the chart. Default: the repository's deploy/helm/metalambda.
	ChartDir string
	// BinDir holds the engine and gateway binaries the local node runs for the
	// chart's images (see ComponentImages).
	BinDir string
}

// ComponentImages are the local node's image rules that run the chart's engine and
// gateway images as the binaries in binDir (`make build` puts them in bin/); the
// gateway's pod also sees the metalambda-launcher and the worker executables beside it,
// as in its image.
func ComponentImages(binDir string) []node.ImageRule {
	return []node.ImageRule{
		{Image: EngineImage, Kind: "host", Entrypoint: []string{filepath.Join(binDir, "engine")}},
		{Image: GatewayImage, Kind: "host", Entrypoint: []string{filepath.Join(binDir, "gateway")}},
	}
}

func (c *InCluster) check() error {
	if dir, err := filepath.Abs(c.BinDir); err == nil && (dir == "/tmp" || strings.HasPrefix(dir, "/tmp/")) {
		return fmt.Errorf("the in-cluster mode runs the binaries in %s, under /tmp, which the chart's gateway pod mounts an emptyDir over: build them elsewhere (a checkout outside /tmp)", c.BinDir)
	}
	for _, name := range []string{"engine", "gateway"} {
		path := filepath.Join(c.BinDir, name)
		if st, err := os.Stat(path); err != nil || st.IsDir() || st.Mode()&0o111 == 0 {
			return fmt.Errorf("the in-cluster mode runs %s as the %s image, and it is not an executable: run `make build`", path, name)
		}
	}
	return nil
}

// chartValues are the chart's values on the local platform: the CRDs are the
// platform's own (it installs them before anything else), the hook token is the
// platform's (hookTokenSecret), the rest is the chart's defaults.
func chartValues() map[string]any {
	return map[string]any{
		"crds":    map[string]any{"install": false},
		"gateway": map[string]any{"hookToken": map[string]any{"existingSecret": deploy.HookTokenSecret}},
	}
}

// hookTokenSecret writes the platform's hook token (<data dir>/hook-token) as the
// Secret the chart's engine and gateway read it from: the chart, rendered without a
// cluster, would make a new token at every start, and `metalambda fn` and the
// printed hook token would not match it.
func (p *Platform) hookTokenSecret(ctx context.Context, kube kubernetes.Interface) error {
	token, err := hookToken(p.opts.DataDir)
	if err != nil {
		return err
	}
	want := &corev1.Secret{
		ObjectMeta: metav1.ObjectMeta{Name: deploy.HookTokenSecret, Namespace: GatewayNamespace},
		Data:       map[string][]byte{"token": []byte(token)},
	}
	secrets := kube.CoreV1().Secrets(GatewayNamespace)
	_, err = secrets.Create(ctx, want, metav1.CreateOptions{})
	if apierrors.IsAlreadyExists(err) {
		_, err = secrets.Update(ctx, want, metav1.UpdateOptions{})
	}
	if err != nil {
		return fmt.Errorf("hook token Secret: %w", err)
	}
	return nil
}

// installChart renders the chart for GatewayNamespace and applies it server-side,
// as a GitOps controller installs a chart (`helm template | kubectl apply
// --server-side`): an upgrade is the same call, and nothing but the objects is
// stored in the cluster.
func (p *Platform) installChart(ctx context.Context) error {
	c := p.opts.InCluster
	kube, err := kubernetes.NewForConfig(p.cluster.Config)
	if err != nil {
		return err
	}
	ns := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: GatewayNamespace}}
	if _, err := kube.CoreV1().Namespaces().Create(ctx, ns, metav1.CreateOptions{}); err != nil && !apierrors.IsAlreadyExists(err) {
		return err
	}
	if err := p.hookTokenSecret(ctx, kube); err != nil {
		return err
	}
	rendered, err := deploy.RenderChart(deploy.Variant{Namespace: GatewayNamespace, Chart: c.ChartDir, Values: chartValues(), Release: ReleaseName})
	if err != nil {
		return err
	}
	var objs []*unstructured.Unstructured
	templates := make([]string, 0, len(rendered))
	for name := range rendered {
		templates = append(templates, name)
	}
	slices.Sort(templates) // crds, engine, gateway, metrics, operators: what others need comes first
	for _, name := range templates {
		objs = append(objs, rendered[name]...)
	}
	data, err := deploy.Encode(objs)
	if err != nil {
		return err
	}
	applier, err := manifest.NewApplier(p.cluster.Config, "metalambda")
	if err != nil {
		return err
	}
	if _, err := applier.Apply(ctx, data); err != nil {
		return fmt.Errorf("install the chart: %w", err)
	}
	return nil
}

// waitInCluster waits for the chart's engine and gateway Deployments to be
// available, and writes the gateway's ClusterIP address for `metalambda fn`.
func (p *Platform) waitInCluster(ctx context.Context, kube kubernetes.Interface, timeout time.Duration) error {
	for _, name := range []string{"metalambda-engine", GatewayService} {
		var last string
		err := wait.PollUntilContextTimeout(ctx, 250*time.Millisecond, timeout, true, func(ctx context.Context) (bool, error) {
			d, err := kube.AppsV1().Deployments(GatewayNamespace).Get(ctx, name, metav1.GetOptions{})
			if err != nil {
				last = err.Error()
				return false, nil
			}
			last = fmt.Sprintf("%d of %d replicas available", d.Status.AvailableReplicas, *d.Spec.Replicas)
			return deploymentAvailable(d), nil
		})
		if err != nil {
			return fmt.Errorf("the %s pods are not available after %s: %s%s (see `kubectl -n %s describe pods`)",
				name, timeout, last, podProblems(ctx, kube, name), GatewayNamespace)
		}
	}
	svc, err := kube.CoreV1().Services(GatewayNamespace).Get(ctx, GatewayService, metav1.GetOptions{})
	if err != nil {
		return err
	}
	p.gatewayURL = "http://" + net.JoinHostPort(svc.Spec.ClusterIP, "8080")
	return os.WriteFile(GatewayURLFile(p.opts.DataDir), []byte(p.gatewayURL+"\n"), 0o644)
}

func deploymentAvailable(d *appsv1.Deployment) bool {
	return d.Status.ObservedGeneration >= d.Generation && d.Spec.Replicas != nil &&
		d.Status.UpdatedReplicas == *d.Spec.Replicas && d.Status.AvailableReplicas == *d.Spec.Replicas
}

// podProblems describes why a Deployment's pods are not ready: each waiting or
// terminated container's reason and message, or each pod's phase.
func podProblems(ctx context.Context, kube kubernetes.Interface, deployment string) string {
	d, err := kube.AppsV1().Deployments(GatewayNamespace).Get(ctx, deployment, metav1.GetOptions{})
	if err != nil || d.Spec.Selector == nil {
		return ""
	}
	pods, err := kube.CoreV1().Pods(GatewayNamespace).List(ctx, metav1.ListOptions{LabelSelector: metav1.FormatLabelSelector(d.Spec.Selector)})
	if err != nil {
		return ""
	}
	var out []string
	for _, pod := range pods.Items {
		problem := "phase " + string(pod.Status.Phase)
		for _, cs := range pod.Status.ContainerStatuses {
			switch {
			case cs.State.Waiting != nil:
				problem = fmt.Sprintf("container %s waiting: %s %s", cs.Name, cs.State.Waiting.Reason, cs.State.Waiting.Message)
				if last := cs.LastTerminationState.Terminated; last != nil {
					problem += fmt.Sprintf("; its last run exited %d: %s", last.ExitCode, strings.TrimSpace(last.Message))
				}
			case cs.State.Terminated != nil:
				problem = fmt.Sprintf("container %s exited %d: %s", cs.Name, cs.State.Terminated.ExitCode, cs.State.Terminated.Message)
			case !cs.Ready:
				problem = fmt.Sprintf("container %s running, not ready", cs.Name)
			default:
				continue
			}
		}
		out = append(out, pod.Name+": "+problem)
	}
	if len(out) == 0 {
		return ""
	}
	return "; " + strings.Join(out, "; ")
}

// BuildComponents builds this checkout's engine, gateway, metalambda-launcher and
// the worker executables of the JavaScript and Jsonnet runtimes into a
// new directory under the user's cache directory (not /tmp, which the chart's gateway
// pod mounts an emptyDir over), for InCluster.BinDir and ComponentImages. The caller
// removes the directory; prefix names it.
func BuildComponents(ctx context.Context, prefix string) (string, error) {
	cache, err := os.UserCacheDir()
	if err != nil {
		return "", err
	}
	if err := os.MkdirAll(filepath.Join(cache, "metalambda"), 0o755); err != nil {
		return "", err
	}
	dir, err := os.MkdirTemp(filepath.Join(cache, "metalambda"), prefix)
	if err != nil {
		return "", err
	}
	for _, b := range []struct{ out, cmd, tags string }{
		{"engine", "engine", ""},
		{"gateway", "gateway", ""},
		{"metalambda-launcher", "metalambda-launcher", ""},
		// Each runtime's worker without the other runtime, as make build and
		// the image build them.
		{"metalambda-worker-javascript", "metalambda-worker", "nojsonnet"},
		{"metalambda-worker-jsonnet", "metalambda-worker", "nojavascript"},
	} {
		build := exec.CommandContext(ctx, "go", "build", "-tags", b.tags, "-o", filepath.Join(dir, b.out), "github.com/metalambda/metalambda/cmd/"+b.cmd)
		if out, err := build.CombinedOutput(); err != nil {
			os.RemoveAll(dir)
			return "", fmt.Errorf("build %s: %v\n%s", b.out, err, out)
		}
	}
	return dir, nil
}

// LocalNode is an Options.Node that runs the local node with opts, its state in the
// platform's data directory.
func LocalNode(opts node.Options) func(kube kubernetes.Interface, dataDir string) (NodeRunner, error) {
	return func(kube kubernetes.Interface, dataDir string) (NodeRunner, error) {
		o := opts
		o.StateDir = filepath.Join(dataDir, "node")
		return node.New(kube, o)
	}
}
