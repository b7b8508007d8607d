package engine

import (
	"context"
	"encoding/base64"
	"fmt"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"

	"github.com/metalambda/metalambda/internal/hook"
)

var (
	secretsGVR    = schema.GroupVersionResource{Version: "v1", Resource: "secrets"}
	configMapsGVR = schema.GroupVersionResource{Version: "v1", Resource: "configmaps"}
)

// credentials reads the Secrets and ConfigMaps of webhook TLS and auth settings
// with a GET each, when a controller starts: no cluster-wide Secret cache. A change
// to them takes effect when the controller object changes or the engine restarts.
type credentials struct{ env *environment }

func (m *Manager) credentials() hook.Credentials { return credentials{env: m.env} }

func (c credentials) Secret(ctx context.Context, namespace, name string) (map[string][]byte, error) {
	obj, err := c.env.resource(secretsGVR, namespace).Get(ctx, name, metav1.GetOptions{})
	if err != nil {
		return nil, err
	}
	raw, _ := obj.Object["data"].(map[string]any)
	data := make(map[string][]byte, len(raw))
	for k, v := range raw {
		s, _ := v.(string)
		b, err := base64.StdEncoding.DecodeString(s)
		if err != nil {
			return nil, fmt.Errorf("key %q is not base64: %v", k, err)
		}
		data[k] = b
	}
	return data, nil
}

func (c credentials) ConfigMap(ctx context.Context, namespace, name string) (map[string]string, error) {
	obj, err := c.env.resource(configMapsGVR, namespace).Get(ctx, name, metav1.GetOptions{})
	if err != nil {
		return nil, err
	}
	raw, _ := obj.Object["data"].(map[string]any)
	data := make(map[string]string, len(raw))
	for k, v := range raw {
		data[k], _ = v.(string)
	}
	return data, nil
}
