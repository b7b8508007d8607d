// Package storage gives the local platform dynamically provisioned
// PersistentVolumes: the default StorageClass "local-path" and the provisioner behind
// it, which backs every claim with a directory under one root on this machine and
// removes the directory when the claim is gone and the reclaim policy is Delete. The
// provisioning protocol (claims, PersistentVolume objects, retries, finalizers) is
// sigs.k8s.io/sig-storage-lib-external-provisioner's; this package only makes and
// removes directories.
package storage
