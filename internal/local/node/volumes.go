package node

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path"
	"path/filepath"
	"strings"

	"golang.org/x/sys/unix"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// materializeVolumes writes every volume of a pod into dir/<volume name> and returns
// the directories by volume name; a volume of a claim is the directory of the
// volume bound to it. Unsupported volume types are an error, a claim not bound yet a
// *claimWaitError.
//
// Every volume it writes is handed to owner; an emptyDir is writable by owner's
// group.
func materializeVolumes(ctx context.Context, src refSource, pod *corev1.Pod, dir string, owner volumeOwner) (map[string]string, error) {
	out := map[string]string{}
	for _, v := range pod.Spec.Volumes {
		if claim, ephemeral, ok := claimOf(pod, v); ok {
			path, err := claimDir(ctx, src, pod, claim, ephemeral)
			if err != nil {
				return nil, fmt.Errorf("volume %s: %w", v.Name, err)
			}
			out[v.Name] = path
			continue
		}
		vdir := filepath.Join(dir, v.Name)
		if err := os.MkdirAll(vdir, 0o755); err != nil {
			return nil, err
		}
		files, err := volumeFiles(ctx, src, pod, v)
		if err != nil {
			return nil, fmt.Errorf("volume %s: %w", v.Name, err)
		}
		for _, f := range files {
			if err := writeVolumeFile(vdir, f); err != nil {
				return nil, fmt.Errorf("volume %s: %w", v.Name, err)
			}
		}
		if err := owner.own(vdir, v.EmptyDir != nil); err != nil {
			return nil, fmt.Errorf("volume %s: %w", v.Name, err)
		}
		out[v.Name] = vdir
	}
	return out, nil
}

// volumeFile is one file of a materialised volume.
type volumeFile struct {
	path string
	data []byte
	mode os.FileMode
}

func writeVolumeFile(dir string, f volumeFile) error {
	clean := filepath.Clean(f.path)
	if filepath.IsAbs(clean) || clean == ".." || strings.HasPrefix(clean, "../") {
		return fmt.Errorf("path %q leaves the volume", f.path)
	}
	full := filepath.Join(dir, clean)
	if err := os.MkdirAll(filepath.Dir(full), 0o755); err != nil {
		return err
	}
	if err := os.WriteFile(full, f.data, f.mode); err != nil {
		return err
	}
	return os.Chmod(full, f.mode) // WriteFile's mode is filtered by the umask
}

func volumeFiles(ctx context.Context, src refSource, pod *corev1.Pod, v corev1.Volume) ([]volumeFile, error) {
	switch {
	case v.EmptyDir != nil:
		return nil, nil
	case v.ConfigMap != nil:
		cm, err := src.configMap(ctx, pod.Namespace, v.ConfigMap.Name)
		if err != nil {
			return nil, optionalMissing(err, v.ConfigMap.Optional)
		}
		data := map[string][]byte{}
		for k, s := range cm.Data {
			data[k] = []byte(s)
		}
		for k, b := range cm.BinaryData {
			data[k] = b
		}
		return keyFiles(data, v.ConfigMap.Items, v.ConfigMap.DefaultMode)
	case v.Secret != nil:
		s, err := src.secret(ctx, pod.Namespace, v.Secret.SecretName)
		if err != nil {
			return nil, optionalMissing(err, v.Secret.Optional)
		}
		return keyFiles(s.Data, v.Secret.Items, v.Secret.DefaultMode)
	case v.DownwardAPI != nil:
		return downwardFiles(pod, v.DownwardAPI)
	case v.Projected != nil:
		return projectedFiles(ctx, src, pod, v.Projected)
	}
	return nil, fmt.Errorf("unsupported volume type (the local node supports configMap, secret, emptyDir, downwardAPI, projected, persistentVolumeClaim, ephemeral)")
}

// claimOf names the claim behind a volume: a persistentVolumeClaim's, or the one the
// ephemeral volume controller makes for an ephemeral volume (<pod>-<volume>).
func claimOf(pod *corev1.Pod, v corev1.Volume) (name string, ephemeral, ok bool) {
	switch {
	case v.PersistentVolumeClaim != nil:
		return v.PersistentVolumeClaim.ClaimName, false, true
	case v.Ephemeral != nil:
		return pod.Name + "-" + v.Name, true, true
	}
	return "", false, false
}

// claimWaitError says a pod's claim cannot be mounted yet: missing, not bound yet or
// being deleted. The pod waits (the scheduler normally binds a pod only once its
// claims are bound).
type claimWaitError struct {
	claim, reason string
}

func (e *claimWaitError) Error() string {
	return fmt.Sprintf("persistentVolumeClaim %q %s; the pod waits for it", e.claim, e.reason)
}

// claimDir returns the host directory of the volume bound to the pod's claim.
func claimDir(ctx context.Context, src refSource, pod *corev1.Pod, name string, ephemeral bool) (string, error) {
	pvc, err := src.claim(ctx, pod.Namespace, name)
	switch {
	case apierrors.IsNotFound(err):
		return "", &claimWaitError{claim: name, reason: "does not exist yet"}
	case err != nil:
		return "", err
	case ephemeral && !metav1.IsControlledBy(pvc, pod):
		return "", fmt.Errorf("persistentVolumeClaim %q was not created for this pod's ephemeral volume", name)
	case pvc.DeletionTimestamp != nil:
		return "", &claimWaitError{claim: name, reason: "is being deleted"}
	case pvc.Status.Phase != corev1.ClaimBound || pvc.Spec.VolumeName == "":
		return "", &claimWaitError{claim: name, reason: fmt.Sprintf("is not bound yet (phase %s)", claimPhase(pvc))}
	}
	pv, err := src.volume(ctx, pvc.Spec.VolumeName)
	if err != nil {
		return "", fmt.Errorf("volume %s of persistentVolumeClaim %q: %w", pvc.Spec.VolumeName, name, err)
	}
	if pv.Spec.ClaimRef == nil || pv.Spec.ClaimRef.UID != pvc.UID {
		return "", &claimWaitError{claim: name, reason: fmt.Sprintf("names volume %s, which is not bound to it yet", pv.Name)}
	}
	if pv.Spec.VolumeMode != nil && *pv.Spec.VolumeMode == corev1.PersistentVolumeBlock {
		return "", fmt.Errorf("volume %s is a block volume; the local node mounts only filesystem volumes", pv.Name)
	}
	return volumePath(pv)
}

func claimPhase(pvc *corev1.PersistentVolumeClaim) corev1.PersistentVolumeClaimPhase {
	if pvc.Status.Phase == "" {
		return corev1.ClaimPending
	}
	return pvc.Status.Phase
}

// volumePath is the existing host directory of a local or hostPath volume; a
// hostPath volume of type DirectoryOrCreate is created.
func volumePath(pv *corev1.PersistentVolume) (string, error) {
	var path string
	switch {
	case pv.Spec.Local != nil:
		path = pv.Spec.Local.Path
	case pv.Spec.HostPath != nil:
		path = pv.Spec.HostPath.Path
		if t := pv.Spec.HostPath.Type; t != nil && *t == corev1.HostPathDirectoryOrCreate {
			if err := os.MkdirAll(path, 0o755); err != nil {
				return "", fmt.Errorf("volume %s: %w", pv.Name, err)
			}
		}
	default:
		return "", fmt.Errorf("volume %s is neither a local nor a hostPath volume; the local node mounts only those", pv.Name)
	}
	info, err := os.Stat(path)
	if err != nil {
		return "", fmt.Errorf("volume %s: %w", pv.Name, err)
	}
	if !info.IsDir() {
		return "", fmt.Errorf("volume %s: %s is not a directory", pv.Name, path)
	}
	return path, nil
}

// readOnlyVolumes lists the pod's volumes every mount of which is read-only: claims
// marked readOnly, and the volumes of data the node writes (configMap, secret,
// downwardAPI, projected), which a kubelet mounts read-only too.
func readOnlyVolumes(pod *corev1.Pod) map[string]bool {
	out := map[string]bool{}
	for _, v := range pod.Spec.Volumes {
		claimRO := v.PersistentVolumeClaim != nil && v.PersistentVolumeClaim.ReadOnly
		if claimRO || v.ConfigMap != nil || v.Secret != nil || v.DownwardAPI != nil || v.Projected != nil {
			out[v.Name] = true
		}
	}
	return out
}

// openSubPath opens the subPath of a mount below its volume's directory dir
// (O_PATH, for sandbox.Bind.From), component by component, without following
// a symbolic link or leaving dir, and makes the directories that are missing,
// owned by the pod's volume owner, as a kubelet does. It runs at every start
// of the container: the pod's containers write links into their volumes, and
// what is bound is what was opened here, not what a path leads to later. A
// link on the way is an *invalidSpecError naming it.
func openSubPath(dir, subPath string, owner volumeOwner) (*os.File, error) {
	fd, err := unix.Open(dir, unix.O_PATH|unix.O_DIRECTORY|unix.O_NOFOLLOW|unix.O_CLOEXEC, 0)
	if err != nil {
		return nil, &os.PathError{Op: "open", Path: dir, Err: err}
	}
	walked := ""
	for part := range strings.SplitSeq(subPath, "/") {
		if part == "" || part == "." {
			continue
		}
		walked = path.Join(walked, part)
		how := &unix.OpenHow{
			Flags:   unix.O_PATH | unix.O_CLOEXEC, // not O_NOFOLLOW, which would open a link itself
			Resolve: unix.RESOLVE_BENEATH | unix.RESOLVE_NO_SYMLINKS | unix.RESOLVE_NO_MAGICLINKS,
		}
		next, err := unix.Openat2(fd, part, how)
		if errors.Is(err, unix.ENOENT) {
			made := unix.Mkdirat(fd, part, 0o755)
			if made == nil || errors.Is(made, unix.EEXIST) {
				next, err = unix.Openat2(fd, part, how)
			}
			if made == nil && err == nil {
				// The directory opened, which is the one made unless the pod
				// swapped it meanwhile for another directory of its own: never a
				// link, nor a file of someone else's.
				// Only an empty directory of the node's own, as the one it made
				// is: not another pod's, moved in its place in a shared claim.
				var st unix.Stat_t
				if err = unix.Fstat(next, &st); err == nil && st.Mode&unix.S_IFMT == unix.S_IFDIR && int(st.Uid) == os.Geteuid() && st.Nlink == 2 {
					err = unix.Fchownat(next, "", owner.uid, owner.gid, unix.AT_EMPTY_PATH)
				}
			}
		}
		unix.Close(fd)
		if err != nil && next >= 0 {
			unix.Close(next)
		}
		if errors.Is(err, unix.ELOOP) {
			return nil, invalidSpec("subPath %q passes through the symbolic link %s in its volume; a subPath must name directories or a file", subPath, walked)
		}
		if err != nil {
			return nil, &os.PathError{Op: "open", Path: filepath.Join(dir, walked), Err: err}
		}
		fd = next
	}
	return os.NewFile(uintptr(fd), filepath.Join(dir, subPath)), nil
}

// keyFiles turns ConfigMap or Secret data into files: every key, or only the listed
// items at their paths.
func keyFiles(data map[string][]byte, items []corev1.KeyToPath, defaultMode *int32) ([]volumeFile, error) {
	mode := os.FileMode(0o644)
	if defaultMode != nil {
		mode = os.FileMode(*defaultMode)
	}
	var out []volumeFile
	if len(items) == 0 {
		for k, b := range data {
			out = append(out, volumeFile{path: k, data: b, mode: mode})
		}
		return out, nil
	}
	for _, it := range items {
		b, ok := data[it.Key]
		if !ok {
			return nil, fmt.Errorf("key %s not found", it.Key)
		}
		m := mode
		if it.Mode != nil {
			m = os.FileMode(*it.Mode)
		}
		out = append(out, volumeFile{path: it.Path, data: b, mode: m})
	}
	return out, nil
}

func downwardFiles(pod *corev1.Pod, d *corev1.DownwardAPIVolumeSource) ([]volumeFile, error) {
	mode := os.FileMode(0o644)
	if d.DefaultMode != nil {
		mode = os.FileMode(*d.DefaultMode)
	}
	var out []volumeFile
	for _, it := range d.Items {
		if it.FieldRef == nil {
			return nil, fmt.Errorf("downwardAPI item %s: only fieldRef is supported", it.Path)
		}
		v, err := podField(pod, it.FieldRef.FieldPath)
		if err != nil {
			return nil, err
		}
		m := mode
		if it.Mode != nil {
			m = os.FileMode(*it.Mode)
		}
		out = append(out, volumeFile{path: it.Path, data: []byte(v), mode: m})
	}
	return out, nil
}

// projectedFiles gathers the files of every source of a projected volume (the
// service account token volume every pod gets is one).
func projectedFiles(ctx context.Context, src refSource, pod *corev1.Pod, p *corev1.ProjectedVolumeSource) ([]volumeFile, error) {
	var out []volumeFile
	for _, s := range p.Sources {
		files, err := projectionFiles(ctx, src, pod, s, p.DefaultMode)
		if err != nil {
			return nil, err
		}
		out = append(out, files...)
	}
	return out, nil
}

func projectionFiles(ctx context.Context, src refSource, pod *corev1.Pod, s corev1.VolumeProjection, mode *int32) ([]volumeFile, error) {
	switch {
	case s.ConfigMap != nil:
		v := corev1.Volume{VolumeSource: corev1.VolumeSource{ConfigMap: &corev1.ConfigMapVolumeSource{
			LocalObjectReference: s.ConfigMap.LocalObjectReference, Items: s.ConfigMap.Items, Optional: s.ConfigMap.Optional, DefaultMode: mode}}}
		return volumeFiles(ctx, src, pod, v)
	case s.Secret != nil:
		v := corev1.Volume{VolumeSource: corev1.VolumeSource{Secret: &corev1.SecretVolumeSource{
			SecretName: s.Secret.Name, Items: s.Secret.Items, Optional: s.Secret.Optional, DefaultMode: mode}}}
		return volumeFiles(ctx, src, pod, v)
	case s.DownwardAPI != nil:
		return downwardFiles(pod, &corev1.DownwardAPIVolumeSource{Items: s.DownwardAPI.Items, DefaultMode: mode})
	case s.ServiceAccountToken != nil:
		tok, err := src.token(ctx, pod, s.ServiceAccountToken.Audience, s.ServiceAccountToken.ExpirationSeconds)
		if err != nil {
			return nil, fmt.Errorf("service account token: %w", err)
		}
		m := os.FileMode(0o600)
		if mode != nil {
			m = os.FileMode(*mode)
		}
		return []volumeFile{{path: s.ServiceAccountToken.Path, data: []byte(tok), mode: m}}, nil
	}
	return nil, fmt.Errorf("unsupported projected volume source")
}
