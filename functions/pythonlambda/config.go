package pythonlambda

import (
	"cmp"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"slices"
	"strings"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/util/validation"

	"github.com/metalambda/metalambda/internal/apis/metacontroller/v1alpha1"
	"github.com/metalambda/metalambda/internal/hookapi"
)

// Keys of the related objects in the request: the Secrets and ConfigMaps the env
// reads, as the customize hook asks for them.
var (
	relatedSecretKey    = hookapi.TypeKey("Secret", "v1")
	relatedConfigMapKey = hookapi.TypeKey("ConfigMap", "v1")
)

// fieldPaths accepted in env[].valueFrom.fieldRef, as a Pod accepts them.
var envFieldPaths = map[string]bool{
	"metadata.name": true, "metadata.namespace": true, "metadata.uid": true,
	"spec.nodeName": true, "spec.serviceAccountName": true,
	"status.hostIP": true, "status.hostIPs": true, "status.podIP": true, "status.podIPs": true,
}

// validateEnvSource checks one env entry: a value or a valueFrom with exactly one
// of secretKeyRef, configMapKeyRef and fieldRef.
func validateEnvSource(field string, e corev1.EnvVar) error {
	vf := e.ValueFrom
	if vf == nil {
		return nil
	}
	if e.Value != "" {
		return fmt.Errorf("%s: value and valueFrom are both set; give one", field)
	}
	set := 0
	for _, ok := range []bool{vf.SecretKeyRef != nil, vf.ConfigMapKeyRef != nil, vf.FieldRef != nil} {
		if ok {
			set++
		}
	}
	if set != 1 || vf.ResourceFieldRef != nil || vf.FileKeyRef != nil {
		return fmt.Errorf("%s.valueFrom: give exactly one of secretKeyRef, configMapKeyRef and fieldRef", field)
	}
	switch {
	case vf.SecretKeyRef != nil:
		return keyRef(field+".valueFrom.secretKeyRef", vf.SecretKeyRef.Name, vf.SecretKeyRef.Key)
	case vf.ConfigMapKeyRef != nil:
		return keyRef(field+".valueFrom.configMapKeyRef", vf.ConfigMapKeyRef.Name, vf.ConfigMapKeyRef.Key)
	case !envFieldPaths[vf.FieldRef.FieldPath] && !labelOrAnnotationPath(vf.FieldRef.FieldPath):
		return fmt.Errorf("%s.valueFrom.fieldRef.fieldPath %q is not one a Pod's env accepts (metadata.name, metadata.namespace, metadata.labels['<key>'], status.podIP, ...)", field, vf.FieldRef.FieldPath)
	}
	return nil
}

func labelOrAnnotationPath(path string) bool {
	for _, prefix := range []string{"metadata.labels['", "metadata.annotations['"} {
		if strings.HasPrefix(path, prefix) && strings.HasSuffix(path, "']") && len(path) > len(prefix)+2 {
			return true
		}
	}
	return false
}

func keyRef(field, name, key string) error {
	if err := objectName(field+".name", name); err != nil {
		return err
	}
	if errs := validation.IsConfigMapKey(key); len(errs) > 0 {
		return fmt.Errorf("%s.key %q: %s", field, key, strings.Join(errs, "; "))
	}
	return nil
}

func objectName(field, name string) error {
	if name == "" {
		return fmt.Errorf("%s is empty", field)
	}
	if errs := validation.IsDNS1123Subdomain(name); len(errs) > 0 {
		return fmt.Errorf("%s %q: %s", field, name, strings.Join(errs, "; "))
	}
	return nil
}

// validateEnvFrom checks envFrom: each entry names one Secret or one ConfigMap, with
// an optional prefix that keeps the variables' names valid.
func validateEnvFrom(from []corev1.EnvFromSource) error {
	for i, f := range from {
		field := fmt.Sprintf("spec.envFrom[%d]", i)
		switch {
		case (f.SecretRef == nil) == (f.ConfigMapRef == nil):
			return fmt.Errorf("%s: give exactly one of secretRef and configMapRef", field)
		case f.SecretRef != nil:
			if err := objectName(field+".secretRef.name", f.SecretRef.Name); err != nil {
				return err
			}
		default:
			if err := objectName(field+".configMapRef.name", f.ConfigMapRef.Name); err != nil {
				return err
			}
		}
		if f.Prefix != "" {
			if errs := validation.IsEnvVarName(f.Prefix); len(errs) > 0 {
				return fmt.Errorf("%s.prefix %q: %s", field, f.Prefix, strings.Join(errs, "; "))
			}
		}
	}
	return nil
}

// envRefs are the names of the Secrets and ConfigMaps the env reads, sorted.
type envRefs struct {
	Secrets, ConfigMaps []string
}

func refsOf(s spec) envRefs {
	var r envRefs
	for _, e := range s.Env {
		switch {
		case e.ValueFrom == nil:
		case e.ValueFrom.SecretKeyRef != nil:
			r.Secrets = append(r.Secrets, e.ValueFrom.SecretKeyRef.Name)
		case e.ValueFrom.ConfigMapKeyRef != nil:
			r.ConfigMaps = append(r.ConfigMaps, e.ValueFrom.ConfigMapKeyRef.Name)
		}
	}
	for _, f := range s.EnvFrom {
		if f.SecretRef != nil {
			r.Secrets = append(r.Secrets, f.SecretRef.Name)
		}
		if f.ConfigMapRef != nil {
			r.ConfigMaps = append(r.ConfigMaps, f.ConfigMapRef.Name)
		}
	}
	slices.Sort(r.Secrets)
	slices.Sort(r.ConfigMaps)
	r.Secrets, r.ConfigMaps = slices.Compact(r.Secrets), slices.Compact(r.ConfigMaps)
	return r
}

// Customize is the PythonLambda customize hook: the related objects of a parent are
// the Secrets and ConfigMaps its env and envFrom read, by name, in its namespace. A
// parent without such references has none.
func Customize(req *hookapi.CustomizeRequest) (*hookapi.CustomizeResponse, error) {
	l, err := parseParent(req.Parent)
	if err != nil {
		return nil, err
	}
	refs := refsOf(l.Spec)
	out := &hookapi.CustomizeResponse{RelatedResources: []v1alpha1.RelatedResourceRule{}}
	if len(refs.Secrets) > 0 {
		out.RelatedResources = append(out.RelatedResources, v1alpha1.RelatedResourceRule{
			ResourceRule: v1alpha1.ResourceRule{APIVersion: "v1", Resource: "secrets"},
			Namespace:    l.Namespace, Names: refs.Secrets,
		})
	}
	if len(refs.ConfigMaps) > 0 {
		out.RelatedResources = append(out.RelatedResources, v1alpha1.RelatedResourceRule{
			ResourceRule: v1alpha1.ResourceRule{APIVersion: "v1", Resource: "configmaps"},
			Namespace:    l.Namespace, Names: refs.ConfigMaps,
		})
	}
	return out, nil
}

// configRevision identifies the current state of the Secrets and ConfigMaps the env
// reads: a hash of their names, UIDs and resourceVersions (never of their data), with
// missing ones marked. It is "" when the env reads none.
func configRevision(refs envRefs, related hookapi.Objects) (string, error) {
	if len(refs.Secrets)+len(refs.ConfigMaps) == 0 {
		return "", nil
	}
	var parts []string
	for _, kind := range []struct {
		name  string
		names []string
		key   string
	}{{"Secret", refs.Secrets, relatedSecretKey}, {"ConfigMap", refs.ConfigMaps, relatedConfigMapKey}} {
		seen := map[string]string{}
		for _, obj := range related[kind.key] {
			name, version, err := versionOf(obj)
			if err != nil {
				return "", fmt.Errorf("related %s: %w", kind.name, err)
			}
			seen[name] = version
		}
		for _, name := range kind.names {
			parts = append(parts, kind.name+"/"+name+"="+cmp.Or(seen[name], "missing"))
		}
	}
	sum := sha256.Sum256([]byte(strings.Join(parts, "\n")))
	return hex.EncodeToString(sum[:8]), nil
}

// versionOf reads metadata.name, uid and resourceVersion of a related object.
func versionOf(obj hookapi.Object) (name, version string, err error) {
	meta, _ := obj["metadata"].(map[string]any)
	name, _ = meta["name"].(string)
	if name == "" {
		return "", "", errors.New("an object without metadata.name")
	}
	uid, _ := meta["uid"].(string)
	rv, _ := meta["resourceVersion"].(string)
	return name, uid + "@" + rv, nil
}

// recordedConfigRevision is the parent's status.configRevision, "" when unset.
func recordedConfigRevision(parent hookapi.Object) string {
	st, _ := parent["status"].(map[string]any)
	rev, _ := st["configRevision"].(string)
	return rev
}
