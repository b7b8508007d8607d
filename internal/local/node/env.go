package node

import (
	"context"
	"fmt"
	"slices"
	"strings"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
)

// refSource reads the objects that env and volumes refer to.
type refSource interface {
	configMap(ctx context.Context, namespace, name string) (*corev1.ConfigMap, error)
	secret(ctx context.Context, namespace, name string) (*corev1.Secret, error)
	token(ctx context.Context, pod *corev1.Pod, audience string, expirationSeconds *int64) (string, error)
	services(ctx context.Context) ([]*corev1.Service, error)
	claim(ctx context.Context, namespace, name string) (*corev1.PersistentVolumeClaim, error)
	volume(ctx context.Context, name string) (*corev1.PersistentVolume, error)
}

// basePath is the PATH a container gets unless its env sets one.
const basePath = "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"

// containerEnv resolves a container's environment as a kubelet does: the Service
// variables first, then envFrom, then env in order, with $(VAR) references to earlier
// variables expanded.
func containerEnv(ctx context.Context, src refSource, pod *corev1.Pod, c *corev1.Container) ([]string, error) {
	vars := map[string]string{"PATH": basePath, "HOSTNAME": pod.Name, "HOME": "/root"}
	order := []string{"PATH", "HOSTNAME", "HOME"}
	set := func(k, v string) {
		if _, ok := vars[k]; !ok {
			order = append(order, k)
		}
		vars[k] = v
	}
	services, err := src.services(ctx)
	if err != nil {
		return nil, fmt.Errorf("services for the environment: %w", err)
	}
	links := pod.Spec.EnableServiceLinks == nil || *pod.Spec.EnableServiceLinks
	for _, e := range serviceEnv(services, pod.Namespace, links) {
		set(e.Name, e.Value)
	}
	for _, from := range c.EnvFrom {
		data, err := envFromData(ctx, src, pod.Namespace, from)
		if err != nil {
			return nil, err
		}
		for k, v := range data {
			set(from.Prefix+k, v)
		}
	}
	for _, e := range c.Env {
		v, err := envValue(ctx, src, pod, e, vars)
		if err != nil {
			return nil, fmt.Errorf("env %s: %w", e.Name, err)
		}
		set(e.Name, v)
	}
	out := make([]string, 0, len(order))
	for _, k := range order {
		out = append(out, k+"="+vars[k])
	}
	return out, nil
}

func envFromData(ctx context.Context, src refSource, ns string, from corev1.EnvFromSource) (map[string]string, error) {
	switch {
	case from.ConfigMapRef != nil:
		cm, err := src.configMap(ctx, ns, from.ConfigMapRef.Name)
		if err != nil {
			return nil, optionalMissing(err, from.ConfigMapRef.Optional)
		}
		return cm.Data, nil
	case from.SecretRef != nil:
		s, err := src.secret(ctx, ns, from.SecretRef.Name)
		if err != nil {
			return nil, optionalMissing(err, from.SecretRef.Optional)
		}
		out := map[string]string{}
		for k, v := range s.Data {
			out[k] = string(v)
		}
		return out, nil
	}
	return nil, nil
}

// optionalMissing turns a not-found error into nil when the reference is optional.
func optionalMissing(err error, optional *bool) error {
	if apierrors.IsNotFound(err) && optional != nil && *optional {
		return nil
	}
	return err
}

func envValue(ctx context.Context, src refSource, pod *corev1.Pod, e corev1.EnvVar, vars map[string]string) (string, error) {
	if e.ValueFrom == nil {
		return expandVars(e.Value, vars), nil
	}
	vf := e.ValueFrom
	switch {
	case vf.FieldRef != nil:
		return podField(pod, vf.FieldRef.FieldPath)
	case vf.ConfigMapKeyRef != nil:
		ref := vf.ConfigMapKeyRef
		cm, err := src.configMap(ctx, pod.Namespace, ref.Name)
		if err != nil {
			return "", optionalMissing(err, ref.Optional)
		}
		v, ok := cm.Data[ref.Key]
		if !ok && (ref.Optional == nil || !*ref.Optional) {
			return "", fmt.Errorf("key %s not in ConfigMap %s", ref.Key, ref.Name)
		}
		return v, nil
	case vf.SecretKeyRef != nil:
		ref := vf.SecretKeyRef
		s, err := src.secret(ctx, pod.Namespace, ref.Name)
		if err != nil {
			return "", optionalMissing(err, ref.Optional)
		}
		v, ok := s.Data[ref.Key]
		if !ok && (ref.Optional == nil || !*ref.Optional) {
			return "", fmt.Errorf("key %s not in Secret %s", ref.Key, ref.Name)
		}
		return string(v), nil
	}
	return "", fmt.Errorf("unsupported valueFrom (only fieldRef, configMapKeyRef, secretKeyRef)")
}

// podField returns a downward-API field of a pod.
func podField(pod *corev1.Pod, path string) (string, error) {
	switch path {
	case "metadata.name":
		return pod.Name, nil
	case "metadata.namespace":
		return pod.Namespace, nil
	case "metadata.uid":
		return string(pod.UID), nil
	case "spec.nodeName":
		return pod.Spec.NodeName, nil
	case "spec.serviceAccountName":
		return pod.Spec.ServiceAccountName, nil
	case "status.podIP":
		return pod.Status.PodIP, nil
	case "status.hostIP":
		return pod.Status.HostIP, nil
	case "status.podIPs":
		ips := make([]string, 0, len(pod.Status.PodIPs))
		for _, ip := range pod.Status.PodIPs {
			ips = append(ips, ip.IP)
		}
		return strings.Join(ips, ","), nil
	case "metadata.labels":
		return formatMap(pod.Labels), nil
	case "metadata.annotations":
		return formatMap(pod.Annotations), nil
	}
	for prefix, m := range map[string]map[string]string{"metadata.labels": pod.Labels, "metadata.annotations": pod.Annotations} {
		if key, ok := strings.CutPrefix(path, prefix+"['"); ok && strings.HasSuffix(key, "']") {
			return m[strings.TrimSuffix(key, "']")], nil
		}
	}
	return "", fmt.Errorf("unsupported fieldRef %q", path)
}

// formatMap renders labels or annotations as the downward API does: key="value" lines,
// sorted by key.
func formatMap(m map[string]string) string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	lines := make([]string, 0, len(keys))
	for _, k := range keys {
		lines = append(lines, fmt.Sprintf("%s=%q", k, m[k]))
	}
	return strings.Join(lines, "\n")
}

// expandVars replaces $(NAME) with earlier variables; $$ escapes; unknown
// references stay as written, as in Kubernetes.
func expandVars(s string, vars map[string]string) string {
	var b strings.Builder
	for i := 0; i < len(s); i++ {
		if s[i] != '$' || i+1 >= len(s) {
			b.WriteByte(s[i])
			continue
		}
		switch s[i+1] {
		case '$':
			b.WriteByte('$')
			i++
			continue
		case '(':
			end := strings.IndexByte(s[i+2:], ')')
			if end < 0 {
				break
			}
			name := s[i+2 : i+2+end]
			if v, ok := vars[name]; ok {
				b.WriteString(v)
			} else {
				b.WriteString(s[i : i+3+end])
			}
			i += 2 + end
			continue
		}
		b.WriteByte(s[i])
	}
	return b.String()
}
