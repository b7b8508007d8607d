package storage

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	corev1 "k8s.io/api/core/v1"
	storagev1 "k8s.io/api/storage/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/sig-storage-lib-external-provisioner/v13/controller"
)

func provisionOptions(mod ...func(*controller.ProvisionOptions)) controller.ProvisionOptions {
	opts := controller.ProvisionOptions{
		StorageClass: StorageClass(),
		PVName:       "pvc-1234",
		PVC: &corev1.PersistentVolumeClaim{
			ObjectMeta: metav1.ObjectMeta{Name: "data-cat-0", Namespace: "shop"},
			Spec: corev1.PersistentVolumeClaimSpec{
				AccessModes: []corev1.PersistentVolumeAccessMode{corev1.ReadWriteOnce},
				Resources: corev1.VolumeResourceRequirements{Requests: corev1.ResourceList{
					corev1.ResourceStorage: resource.MustParse("1Gi")}},
			},
		},
		SelectedNodeName: "metalambda-local",
	}
	for _, m := range mod {
		m(&opts)
	}
	return opts
}

func TestProvisionAndDelete(t *testing.T) {
	root := t.TempDir()
	p, err := New(root)
	if err != nil {
		t.Fatal(err)
	}
	pv, state, err := p.Provision(context.Background(), provisionOptions())
	if err != nil || state != controller.ProvisioningFinished {
		t.Fatalf("Provision: %v, %s", err, state)
	}
	dir := filepath.Join(root, "pvc-1234_shop_data-cat-0")
	filesystem := corev1.PersistentVolumeFilesystem
	want := &corev1.PersistentVolume{
		ObjectMeta: metav1.ObjectMeta{Name: "pvc-1234"},
		Spec: corev1.PersistentVolumeSpec{
			Capacity:                      corev1.ResourceList{corev1.ResourceStorage: resource.MustParse("1Gi")},
			AccessModes:                   []corev1.PersistentVolumeAccessMode{corev1.ReadWriteOnce},
			PersistentVolumeReclaimPolicy: corev1.PersistentVolumeReclaimDelete,
			StorageClassName:              ClassName,
			VolumeMode:                    &filesystem,
			PersistentVolumeSource:        corev1.PersistentVolumeSource{Local: &corev1.LocalVolumeSource{Path: dir}},
			NodeAffinity: &corev1.VolumeNodeAffinity{Required: &corev1.NodeSelector{NodeSelectorTerms: []corev1.NodeSelectorTerm{{
				MatchExpressions: []corev1.NodeSelectorRequirement{{Key: "kubernetes.io/hostname", Operator: corev1.NodeSelectorOpIn, Values: []string{"metalambda-local"}}},
			}}}},
		},
	}
	if diff := cmp.Diff(want, pv); diff != "" {
		t.Errorf("volume (-want +got):\n%s", diff)
	}
	info, err := os.Stat(dir)
	if err != nil || !info.IsDir() || info.Mode().Perm() != 0o777 {
		t.Fatalf("volume directory: %v %v", info, err)
	}
	if err := os.WriteFile(filepath.Join(dir, "data"), []byte("x"), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := p.Delete(context.Background(), pv); err != nil {
		t.Fatalf("Delete: %v", err)
	}
	if _, err := os.Stat(dir); !os.IsNotExist(err) {
		t.Errorf("the volume directory survived Delete: %v", err)
	}
	if err := p.Delete(context.Background(), pv); err != nil {
		t.Errorf("a second Delete: %v", err)
	}
}

func TestProvisionKeepsTheClassReclaimPolicy(t *testing.T) {
	p, err := New(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	pv, _, err := p.Provision(context.Background(), provisionOptions(func(o *controller.ProvisionOptions) {
		o.StorageClass = &storagev1.StorageClass{ObjectMeta: metav1.ObjectMeta{Name: "keep"}, Provisioner: ProvisionerName,
			ReclaimPolicy: ptr.To(corev1.PersistentVolumeReclaimRetain), MountOptions: []string{"noatime"}}
	}))
	if err != nil {
		t.Fatal(err)
	}
	if pv.Spec.PersistentVolumeReclaimPolicy != corev1.PersistentVolumeReclaimRetain || pv.Spec.StorageClassName != "keep" {
		t.Errorf("reclaim policy %s, class %s; want Retain, keep", pv.Spec.PersistentVolumeReclaimPolicy, pv.Spec.StorageClassName)
	}
}

func TestProvisionRefuses(t *testing.T) {
	cases := []struct {
		name string
		mod  func(*controller.ProvisionOptions)
		want string
	}{
		{"no selected node", func(o *controller.ProvisionOptions) { o.SelectedNodeName = "" }, "must have volumeBindingMode WaitForFirstConsumer"},
		{"selector", func(o *controller.ProvisionOptions) { o.PVC.Spec.Selector = &metav1.LabelSelector{} }, "has a selector"},
		{"snapshot", func(o *controller.ProvisionOptions) {
			o.PVC.Spec.DataSource = &corev1.TypedLocalObjectReference{Kind: "VolumeSnapshot", Name: "snap"}
		}, "no snapshots or clones"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			root := t.TempDir()
			p, err := New(root)
			if err != nil {
				t.Fatal(err)
			}
			_, state, err := p.Provision(context.Background(), provisionOptions(c.mod))
			if err == nil || !strings.Contains(err.Error(), c.want) || state != controller.ProvisioningFinished {
				t.Errorf("Provision = %v, %s; want an error saying %q", err, state, c.want)
			}
			if entries, _ := os.ReadDir(root); len(entries) != 0 {
				t.Errorf("a refused claim left %v", entries)
			}
		})
	}
}

func TestDeleteIgnoresForeignPaths(t *testing.T) {
	root := t.TempDir()
	p, err := New(root)
	if err != nil {
		t.Fatal(err)
	}
	outside := t.TempDir()
	for _, path := range []string{outside, root, filepath.Join(root, "other_ns_claim"), filepath.Join(root, "pvc-1_ns_c", "..", "..")} {
		pv := &corev1.PersistentVolume{ObjectMeta: metav1.ObjectMeta{Name: "pvc-1"},
			Spec: corev1.PersistentVolumeSpec{PersistentVolumeSource: corev1.PersistentVolumeSource{Local: &corev1.LocalVolumeSource{Path: path}}}}
		var ignored *controller.IgnoredError
		if err := p.Delete(context.Background(), pv); !errors.As(err, &ignored) {
			t.Errorf("Delete of a volume at %s = %v, want it ignored", path, err)
		}
	}
	hostPath := &corev1.PersistentVolume{ObjectMeta: metav1.ObjectMeta{Name: "pvc-1"},
		Spec: corev1.PersistentVolumeSpec{PersistentVolumeSource: corev1.PersistentVolumeSource{HostPath: &corev1.HostPathVolumeSource{Path: outside}}}}
	var ignored *controller.IgnoredError
	if err := p.Delete(context.Background(), hostPath); !errors.As(err, &ignored) {
		t.Errorf("Delete of a hostPath volume = %v, want it ignored", err)
	}
	if _, err := os.Stat(outside); err != nil {
		t.Errorf("a foreign directory was removed: %v", err)
	}
}

func TestNewNeedsAnAbsoluteRoot(t *testing.T) {
	if _, err := New("relative/volumes"); err == nil || !strings.Contains(err.Error(), "absolute") {
		t.Errorf("New(relative) = %v, want an error about an absolute path", err)
	}
}

func TestStorageClassIsTheDefault(t *testing.T) {
	sc := StorageClass()
	if sc.Annotations["storageclass.kubernetes.io/is-default-class"] != "true" || sc.Provisioner != ProvisionerName ||
		*sc.VolumeBindingMode != storagev1.VolumeBindingWaitForFirstConsumer || *sc.ReclaimPolicy != corev1.PersistentVolumeReclaimDelete {
		t.Errorf("StorageClass %+v", sc)
	}
}
