package node

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"

	corev1 "k8s.io/api/core/v1"
)

// materializeVolumes writes every volume of a pod into dir/<volume name> and returns
// the directories by volume name. Unsupported volume types are an error.
func materializeVolumes(ctx context.Context, src refSource, pod *corev1.Pod, dir string) (map[string]string, error) {
	out := map[string]string{}
	for _, v := range pod.Spec.Volumes {
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
	return nil, fmt.Errorf("unsupported volume type (the local node supports configMap, secret, emptyDir, downwardAPI, projected)")
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
