package storage

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/klog/v2"
	"sigs.k8s.io/sig-storage-lib-external-provisioner/v13/controller"
)

// hostnameLabel is the node label a volume's node affinity names.
const hostnameLabel = "kubernetes.io/hostname"

// Provisioner backs claims with directories under one root. It implements the
// library's controller.Provisioner.
type Provisioner struct {
	root string
}

// New returns a provisioner that keeps volumes under root, an absolute path it
// creates if needed.
func New(root string) (*Provisioner, error) {
	if !filepath.IsAbs(root) {
		return nil, fmt.Errorf("volume root %q must be an absolute path", root)
	}
	if err := os.MkdirAll(root, 0o755); err != nil {
		return nil, fmt.Errorf("volume root: %w", err)
	}
	return &Provisioner{root: filepath.Clean(root)}, nil
}

// Run provisions volumes for the claims of ProvisionerName's classes, and deletes
// them, until ctx ends.
func (p *Provisioner) Run(ctx context.Context, kube kubernetes.Interface) {
	klog.FromContext(ctx).Info("Starting the local volume provisioner", "provisioner", ProvisionerName, "root", p.root)
	controller.NewProvisionController(ctx, kube, ProvisionerName, p,
		controller.LeaderElection(false),
		// The volume keeps a finalizer until its directory is gone, even when
		// someone deletes the PersistentVolume object first.
		controller.AddFinalizer(true),
	).Run(ctx)
}

// Provision makes the claim's directory and returns the volume that points at it.
func (p *Provisioner) Provision(_ context.Context, opts controller.ProvisionOptions) (*corev1.PersistentVolume, controller.ProvisioningState, error) {
	if err := checkClaim(opts); err != nil {
		return nil, controller.ProvisioningFinished, err
	}
	dir := filepath.Join(p.root, volumeDirName(opts))
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return nil, controller.ProvisioningFinished, fmt.Errorf("make the volume directory: %w", err)
	}
	// Open to every user, as a fresh emptyDir is: a pod's processes may run as any
	// user.
	if err := os.Chmod(dir, 0o777); err != nil {
		return nil, controller.ProvisioningFinished, err
	}
	return volumeFor(opts, dir), controller.ProvisioningFinished, nil
}

// checkClaim refuses claims a directory cannot honour.
func checkClaim(opts controller.ProvisionOptions) error {
	pvc := opts.PVC
	switch {
	case opts.SelectedNodeName == "":
		return fmt.Errorf("claim %s/%s has no selected node: StorageClass %s must have volumeBindingMode WaitForFirstConsumer",
			pvc.Namespace, pvc.Name, opts.StorageClass.Name)
	case pvc.Spec.Selector != nil:
		return fmt.Errorf("claim %s/%s has a selector: %s provisions only claims without one", pvc.Namespace, pvc.Name, ProvisionerName)
	case pvc.Spec.DataSource != nil || pvc.Spec.DataSourceRef != nil:
		return fmt.Errorf("claim %s/%s has a data source: %s makes only empty volumes (no snapshots or clones)", pvc.Namespace, pvc.Name, ProvisionerName)
	}
	return nil
}

// volumeDirName names a volume's directory after the volume and its claim, so a
// person can tell whose data it holds.
func volumeDirName(opts controller.ProvisionOptions) string {
	return opts.PVName + "_" + opts.PVC.Namespace + "_" + opts.PVC.Name
}

// volumeFor is the PersistentVolume of a claim's directory: a local volume on the
// selected node, of the size and access modes asked for (the size is not enforced).
func volumeFor(opts controller.ProvisionOptions, dir string) *corev1.PersistentVolume {
	reclaim := corev1.PersistentVolumeReclaimDelete
	if opts.StorageClass.ReclaimPolicy != nil {
		reclaim = *opts.StorageClass.ReclaimPolicy
	}
	filesystem := corev1.PersistentVolumeFilesystem
	return &corev1.PersistentVolume{
		ObjectMeta: metav1.ObjectMeta{Name: opts.PVName},
		Spec: corev1.PersistentVolumeSpec{
			Capacity:                      corev1.ResourceList{corev1.ResourceStorage: opts.PVC.Spec.Resources.Requests[corev1.ResourceStorage]},
			AccessModes:                   opts.PVC.Spec.AccessModes,
			PersistentVolumeReclaimPolicy: reclaim,
			StorageClassName:              opts.StorageClass.Name,
			MountOptions:                  opts.StorageClass.MountOptions,
			VolumeMode:                    &filesystem,
			PersistentVolumeSource:        corev1.PersistentVolumeSource{Local: &corev1.LocalVolumeSource{Path: dir}},
			NodeAffinity: &corev1.VolumeNodeAffinity{Required: &corev1.NodeSelector{NodeSelectorTerms: []corev1.NodeSelectorTerm{{
				MatchExpressions: []corev1.NodeSelectorRequirement{{
					Key: hostnameLabel, Operator: corev1.NodeSelectorOpIn, Values: []string{opts.SelectedNodeName},
				}},
			}}}},
		},
	}
}

// Delete removes the directory of a volume this provisioner made. A volume whose
// path is not one of its directories is ignored, never removed.
func (p *Provisioner) Delete(_ context.Context, pv *corev1.PersistentVolume) error {
	dir, err := p.dirOf(pv)
	if err != nil {
		return &controller.IgnoredError{Reason: err.Error()}
	}
	if err := os.RemoveAll(dir); err != nil {
		return fmt.Errorf("remove the directory of volume %s: %w", pv.Name, err)
	}
	return nil
}

// dirOf returns the volume's directory if it is one this provisioner makes: directly
// under the root and named after the volume.
func (p *Provisioner) dirOf(pv *corev1.PersistentVolume) (string, error) {
	if pv.Spec.Local == nil {
		return "", errors.New("the volume is not a local volume")
	}
	dir := filepath.Clean(pv.Spec.Local.Path)
	if filepath.Dir(dir) != p.root || !strings.HasPrefix(filepath.Base(dir), pv.Name+"_") {
		return "", fmt.Errorf("the volume's path %s is not a volume directory under %s", dir, p.root)
	}
	return dir, nil
}
