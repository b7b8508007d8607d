package storage

import (
	"context"
	"fmt"

	corev1 "k8s.io/api/core/v1"
	storagev1 "k8s.io/api/storage/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/utils/ptr"
)

const (
	// ClassName is the default StorageClass the platform installs.
	ClassName = "local-path"
	// ProvisionerName is the provisioner the StorageClass names.
	ProvisionerName = "metalambda.dev/local-path"

	defaultClassAnnotation = "storageclass.kubernetes.io/is-default-class"
)

// StorageClass is the default StorageClass: volumes are provisioned once the
// scheduler has picked a pod's node (WaitForFirstConsumer), so a volume is made
// on the node that will mount it, and deleted with their claim.
func StorageClass() *storagev1.StorageClass {
	return &storagev1.StorageClass{
		ObjectMeta: metav1.ObjectMeta{
			Name:        ClassName,
			Annotations: map[string]string{defaultClassAnnotation: "true"},
			Labels:      map[string]string{"app.kubernetes.io/managed-by": "metalambda"},
		},
		Provisioner:       ProvisionerName,
		ReclaimPolicy:     ptr.To(corev1.PersistentVolumeReclaimDelete),
		VolumeBindingMode: ptr.To(storagev1.VolumeBindingWaitForFirstConsumer),
	}
}

// InstallClass creates the default StorageClass unless a StorageClass of that name
// exists; an existing one is left as it is (its provisioner and binding mode cannot
// change, and whether it is the default is the operator's choice).
func InstallClass(ctx context.Context, kube kubernetes.Interface) error {
	_, err := kube.StorageV1().StorageClasses().Create(ctx, StorageClass(), metav1.CreateOptions{})
	if err != nil && !apierrors.IsAlreadyExists(err) {
		return fmt.Errorf("install the StorageClass %s: %w", ClassName, err)
	}
	return nil
}
