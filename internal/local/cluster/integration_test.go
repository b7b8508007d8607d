//go:build integration

package cluster_test

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/kubernetes"

	"github.com/metalambda/metalambda/internal/kubetest"
	"github.com/metalambda/metalambda/internal/local/cluster"
)

var env *kubetest.Env

func TestMain(m *testing.M) { kubetest.Main(m, &env, cluster.Defaults()) }

var widgets = schema.GroupVersionResource{Group: "test.metalambda.dev", Version: "v1", Resource: "widgets"}

func widgetCRD() *apiextensionsv1.CustomResourceDefinition {
	preserve := true
	return &apiextensionsv1.CustomResourceDefinition{
		ObjectMeta: metav1.ObjectMeta{Name: "widgets.test.metalambda.dev"},
		Spec: apiextensionsv1.CustomResourceDefinitionSpec{
			Group: widgets.Group,
			Names: apiextensionsv1.CustomResourceDefinitionNames{Plural: "widgets", Singular: "widget", Kind: "Widget", ListKind: "WidgetList"},
			Scope: apiextensionsv1.NamespaceScoped,
			Versions: []apiextensionsv1.CustomResourceDefinitionVersion{{
				Name: "v1", Served: true, Storage: true,
				Subresources: &apiextensionsv1.CustomResourceSubresources{Status: &apiextensionsv1.CustomResourceSubresourceStatus{}},
				Schema: &apiextensionsv1.CustomResourceValidation{OpenAPIV3Schema: &apiextensionsv1.JSONSchemaProps{
					Type: "object",
					Properties: map[string]apiextensionsv1.JSONSchemaProps{
						"spec":   {Type: "object", XPreserveUnknownFields: &preserve},
						"status": {Type: "object", XPreserveUnknownFields: &preserve},
					},
				}},
			}},
		},
	}
}

func TestCRDWithStatusSubresourceRoundTrips(t *testing.T) {
	ctx := kubetest.Context(t)
	ns := env.Namespace(t)
	crds := env.Extensions.ApiextensionsV1().CustomResourceDefinitions()
	if _, err := crds.Create(ctx, widgetCRD(), metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = crds.Delete(context.Background(), widgetCRD().Name, metav1.DeleteOptions{}) })
	kubetest.Eventually(t, 30*time.Second, "the Widget CRD is established", func(ctx context.Context) (bool, error) {
		crd, err := crds.Get(ctx, widgetCRD().Name, metav1.GetOptions{})
		if err != nil {
			return false, err
		}
		for _, c := range crd.Status.Conditions {
			if c.Type == apiextensionsv1.Established && c.Status == apiextensionsv1.ConditionTrue {
				return true, nil
			}
		}
		return false, nil
	})

	client := env.Dynamic.Resource(widgets).Namespace(ns)
	obj := &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": "test.metalambda.dev/v1", "kind": "Widget",
		"metadata": map[string]any{"name": "w"},
		"spec":     map[string]any{"size": int64(3)},
		"status":   map[string]any{"phase": "ignored-on-create"},
	}}
	var created *unstructured.Unstructured
	kubetest.Eventually(t, 30*time.Second, "a Widget can be created", func(ctx context.Context) (bool, error) {
		var err error
		created, err = client.Create(ctx, obj, metav1.CreateOptions{})
		return err == nil, err
	})
	if _, found, _ := unstructured.NestedMap(created.Object, "status"); found {
		t.Errorf("status was stored on create although it is a subresource: %v", created.Object["status"])
	}

	if err := unstructured.SetNestedField(created.Object, "Ready", "status", "phase"); err != nil {
		t.Fatal(err)
	}
	updated, err := client.UpdateStatus(ctx, created, metav1.UpdateOptions{})
	if err != nil {
		t.Fatalf("update status: %v", err)
	}
	if updated.GetGeneration() != created.GetGeneration() {
		t.Errorf("a status update bumped metadata.generation from %d to %d", created.GetGeneration(), updated.GetGeneration())
	}

	got, err := client.Get(ctx, "w", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	phase, _, _ := unstructured.NestedString(got.Object, "status", "phase")
	size, _, _ := unstructured.NestedInt64(got.Object, "spec", "size")
	if phase != "Ready" || size != 3 {
		t.Fatalf("round trip: status.phase=%q spec.size=%d, want Ready and 3", phase, size)
	}

	// A main-resource update must not touch status.
	_ = unstructured.SetNestedField(got.Object, "Broken", "status", "phase")
	_ = unstructured.SetNestedField(got.Object, int64(4), "spec", "size")
	got, err = client.Update(ctx, got, metav1.UpdateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if phase, _, _ := unstructured.NestedString(got.Object, "status", "phase"); phase != "Ready" {
		t.Errorf("a main-resource update changed status.phase to %q", phase)
	}
	if got.GetGeneration() != created.GetGeneration()+1 {
		t.Errorf("a spec update left generation at %d", got.GetGeneration())
	}
}

func TestGarbageCollectorRemovesOwnedConfigMap(t *testing.T) {
	ctx := kubetest.Context(t)
	ns := env.Namespace(t)
	cms := env.Kube.CoreV1().ConfigMaps(ns)
	owner, err := cms.Create(ctx, &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "owner"}}, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	child := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{
		Name: "child",
		OwnerReferences: []metav1.OwnerReference{{
			APIVersion: "v1", Kind: "ConfigMap", Name: owner.Name, UID: owner.UID,
		}},
	}}
	if _, err := cms.Create(ctx, child, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	if err := cms.Delete(ctx, owner.Name, metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	kubetest.Eventually(t, 60*time.Second, "the garbage collector deletes the owned ConfigMap", func(ctx context.Context) (bool, error) {
		return gone(cms.Get(ctx, "child", metav1.GetOptions{}))
	})
}

func TestNamespaceDeletionCompletes(t *testing.T) {
	ctx := kubetest.Context(t)
	name := env.Namespace(t)
	if _, err := env.Kube.CoreV1().ConfigMaps(name).Create(ctx, &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "content"}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	if err := env.Kube.CoreV1().Namespaces().Delete(ctx, name, metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	kubetest.Eventually(t, 60*time.Second, "namespace "+name+" is finalized and removed", func(ctx context.Context) (bool, error) {
		return gone(env.Kube.CoreV1().Namespaces().Get(ctx, name, metav1.GetOptions{}))
	})
}

func TestServiceAccountTokensAreIssued(t *testing.T) {
	ns := env.Namespace(t)
	kubetest.Eventually(t, 30*time.Second, "the serviceaccount controller creates the default ServiceAccount", func(ctx context.Context) (bool, error) {
		_, err := env.Kube.CoreV1().ServiceAccounts(ns).Get(ctx, "default", metav1.GetOptions{})
		return err == nil, err
	})
}

// TestStopLeavesNothingAndDataDirSurvivesRestart runs a second, minimal control plane in
// a data directory of its own.
func TestStopLeavesNothingAndDataDirSurvivesRestart(t *testing.T) {
	ctx := kubetest.Context(t)
	dataDir := filepath.Join(t.TempDir(), "data")
	opts := cluster.Defaults()
	opts.DataDir, opts.Components, opts.EtcdNoFsync = dataDir, nil, true

	first, err := cluster.Start(ctx, opts)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = first.Stop() })
	kube := kubernetes.NewForConfigOrDie(first.Config)
	cm := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "kept"}, Data: map[string]string{"k": "v"}}
	if _, err := kube.CoreV1().ConfigMaps("default").Create(ctx, cm, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	pids := componentPIDs(t, dataDir)
	if len(pids) != 2 {
		t.Fatalf("found %d processes using %s, want etcd and kube-apiserver", len(pids), dataDir)
	}
	if err := first.Stop(); err != nil {
		t.Fatal(err)
	}
	if left := componentPIDs(t, dataDir); len(left) != 0 {
		t.Fatalf("processes still running after Stop: %v", left)
	}

	second, err := cluster.Start(ctx, opts)
	if err != nil {
		t.Fatal(err)
	}
	defer second.Stop()
	got, err := kubernetes.NewForConfigOrDie(second.Config).CoreV1().ConfigMaps("default").Get(ctx, "kept", metav1.GetOptions{})
	if err != nil {
		t.Fatalf("the ConfigMap did not survive a restart on the same data directory: %v", err)
	}
	if got.Data["k"] != "v" {
		t.Fatalf("restarted ConfigMap data = %v", got.Data)
	}
	if err := second.Stop(); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(dataDir); err != nil {
		t.Fatalf("Stop removed a data directory it did not create: %v", err)
	}
}

// componentPIDs lists running processes whose command line mentions dir.
func componentPIDs(t *testing.T, dir string) []string {
	t.Helper()
	entries, err := os.ReadDir("/proc")
	if err != nil {
		t.Fatal(err)
	}
	var pids []string
	for _, e := range entries {
		cmdline, err := os.ReadFile(filepath.Join("/proc", e.Name(), "cmdline"))
		if err != nil {
			continue
		}
		if strings.Contains(string(cmdline), dir) {
			pids = append(pids, e.Name())
		}
	}
	return pids
}

func gone(_ any, err error) (bool, error) {
	if apierrors.IsNotFound(err) {
		return true, nil
	}
	if err != nil {
		return false, err
	}
	return false, errStillThere
}

var errStillThere = errors.New("the object still exists")

// TestRestartAPIServerKeepsPortAndData: the API server alone restarts, on the same
// address, and an existing client goes on working with the data it wrote before.
func TestRestartAPIServerKeepsPortAndData(t *testing.T) {
	ctx := kubetest.Context(t)
	dataDir := filepath.Join(t.TempDir(), "data")
	opts := cluster.Defaults()
	opts.DataDir, opts.Components, opts.EtcdNoFsync = dataDir, nil, true
	cluster, err := cluster.Start(ctx, opts)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = cluster.Stop() })
	kube := kubernetes.NewForConfigOrDie(cluster.Config)
	cm := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "kept"}, Data: map[string]string{"k": "v"}}
	if _, err := kube.CoreV1().ConfigMaps("default").Create(ctx, cm, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	before := componentPIDs(t, dataDir)
	if err := cluster.RestartAPIServer(ctx, 15*time.Second); err != nil {
		t.Fatalf("restart: %v\n%s", err, cluster.LogTails(30))
	}
	after := componentPIDs(t, dataDir)
	if len(before) != 2 || len(after) != 2 {
		t.Fatalf("component processes before %v, after %v; want etcd and kube-apiserver each time", before, after)
	}
	kept := 0
	for _, pid := range after {
		if slices.Contains(before, pid) {
			kept++
		}
	}
	if kept != 1 {
		t.Errorf("processes before %v, after %v: want etcd kept and kube-apiserver replaced", before, after)
	}
	got, err := kube.CoreV1().ConfigMaps("default").Get(ctx, "kept", metav1.GetOptions{})
	if err != nil {
		t.Fatalf("the client from before the restart fails: %v", err)
	}
	if got.Data["k"] != "v" {
		t.Errorf("ConfigMap data after the restart = %v", got.Data)
	}
	if err := cluster.Stop(); err != nil {
		t.Fatal(err)
	}
	if left := componentPIDs(t, dataDir); len(left) != 0 {
		t.Fatalf("processes still running after Stop: %v", left)
	}
}
