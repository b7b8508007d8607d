package kubetest

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"os"
	"regexp"
	"strings"
	"sync"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	apiextensionsclient "k8s.io/apiextensions-apiserver/pkg/client/clientset/clientset"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"

	"github.com/metalambda/metalambda/internal/local/cluster"
)

// Env is a running control plane with clients for it: one Main started
// (Cluster set), or one that runs apart, such as a local platform (Connect).
type Env struct {
	Cluster    *cluster.Cluster
	Config     *rest.Config
	Kube       kubernetes.Interface
	Dynamic    dynamic.Interface
	Extensions apiextensionsclient.Interface

	crdMu     sync.Mutex
	installed map[string]*apiextensionsv1.CustomResourceDefinitionSpec // by name: what InstallCRDs installed

	stopMu sync.Mutex
	stops  []func() // AtExit's, run last first
}

// AtExit runs stop once the package's tests have run, before the control plane
// stops: for what runs for the whole package (a shared gateway, whose sandbox
// must be closed to leave no cgroup or zygote behind).
func (e *Env) AtExit(stop func()) {
	e.stopMu.Lock()
	defer e.stopMu.Unlock()
	e.stops = append(e.stops, stop)
}

func (e *Env) runStops() {
	e.stopMu.Lock()
	stops := e.stops
	e.stops = nil
	e.stopMu.Unlock()
	for i := len(stops) - 1; i >= 0; i-- {
		stops[i]()
	}
}

// Main starts a control plane, stores it in *env, runs the package's tests, prints the
// components' logs if anything failed, stops the control plane and exits.
func Main(m *testing.M, env **Env, opts cluster.Options) {
	os.Exit(run(m, env, opts))
}

func run(m *testing.M, env **Env, opts cluster.Options) int {
	opts.EtcdNoFsync = true
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	start := time.Now()
	cluster, err := cluster.Start(ctx, opts)
	if err != nil {
		fmt.Fprintf(os.Stderr, "kubetest: cannot start the control plane: %v\n", err)
		return 1
	}
	defer func() {
		if err := cluster.Stop(); err != nil {
			fmt.Fprintf(os.Stderr, "kubetest: stop the control plane: %v\n", err)
		}
	}()
	fmt.Fprintf(os.Stderr, "kubetest: control plane ready in %s at %s\n", time.Since(start).Round(time.Millisecond), cluster.Config.Host)
	e, err := newEnv(&Env{Cluster: cluster, Config: cluster.Config})
	if err != nil {
		fmt.Fprintf(os.Stderr, "kubetest: %v\n", err)
		return 1
	}
	*env = e
	code := m.Run()
	e.runStops()
	if code != 0 {
		fmt.Fprintf(os.Stderr, "kubetest: tests failed; control-plane logs:\n%s", cluster.LogTails(60))
	}
	return code
}

// Connect is an Env for the cluster a kubeconfig file names, one the package
// did not start itself (a local platform); its Cluster is nil.
func Connect(kubeconfig string) (*Env, error) {
	cfg, err := clientcmd.BuildConfigFromFlags("", kubeconfig)
	if err != nil {
		return nil, err
	}
	return newEnv(&Env{Config: cfg})
}

func newEnv(e *Env) (*Env, error) {
	var err error
	if e.Kube, err = kubernetes.NewForConfig(e.Config); err != nil {
		return nil, err
	}
	if e.Dynamic, err = dynamic.NewForConfig(e.Config); err != nil {
		return nil, err
	}
	if e.Extensions, err = apiextensionsclient.NewForConfig(e.Config); err != nil {
		return nil, err
	}
	return e, nil
}

var notDNSLabel = regexp.MustCompile(`[^a-z0-9-]+`)

// Namespace creates a namespace for this test, named after it, and deletes it when the
// test ends.
func (e *Env) Namespace(t testing.TB) string {
	t.Helper()
	base := strings.Trim(notDNSLabel.ReplaceAllString(strings.ToLower(t.Name()), "-"), "-")
	if len(base) > 50 {
		base = strings.TrimRight(base[:50], "-")
	}
	suffix := make([]byte, 3)
	_, _ = rand.Read(suffix)
	name := base + "-" + hex.EncodeToString(suffix)
	ctx := Context(t)
	ns := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: name, Labels: map[string]string{"metalambda.dev/test": "true"}}}
	if _, err := e.Kube.CoreV1().Namespaces().Create(ctx, ns, metav1.CreateOptions{}); err != nil {
		t.Fatalf("create test namespace %s: %v", name, err)
	}
	t.Cleanup(func() {
		err := e.Kube.CoreV1().Namespaces().Delete(context.Background(), name, metav1.DeleteOptions{})
		if err != nil {
			t.Logf("delete test namespace %s: %v", name, err)
		}
	})
	return name
}
