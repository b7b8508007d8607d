package engine

import (
	"context"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"

	"github.com/metalambda/metalambda/internal/engine/hook"
)

var (
	secretsGVR    = schema.GroupVersionResource{Version: "v1", Resource: "secrets"}
	configMapsGVR = schema.GroupVersionResource{Version: "v1", Resource: "configmaps"}
)

// credentials reads the Secrets and ConfigMaps of webhook TLS and auth settings
// with a GET each, when a controller starts: no cluster-wide Secret cache. A change
// to them takes effect when the controller object changes or the engine restarts.
// A namespaced controller's are read as its ServiceAccount (its environment's client).
type credentials struct{ env *environment }

var _ hook.Credentials = credentials{}

func (c credentials) Secret(ctx context.Context, namespace, name string) (map[string][]byte, error) {
	var s corev1.Secret
	if err := c.get(ctx, secretsGVR, namespace, name, &s); err != nil {
		return nil, err
	}
	return s.Data, nil
}

func (c credentials) ConfigMap(ctx context.Context, namespace, name string) (map[string]string, error) {
	var cm corev1.ConfigMap
	if err := c.get(ctx, configMapsGVR, namespace, name, &cm); err != nil {
		return nil, err
	}
	return cm.Data, nil
}

func (c credentials) get(ctx context.Context, gvr schema.GroupVersionResource, namespace, name string, into any) error {
	obj, err := c.env.resource(gvr, namespace).Get(ctx, name, metav1.GetOptions{})
	if err != nil {
		return err
	}
	return runtime.DefaultUnstructuredConverter.FromUnstructured(obj.Object, into)
}
