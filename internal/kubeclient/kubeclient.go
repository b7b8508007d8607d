// Package kubeclient builds the rest.Config the project's commands reach the
// Kubernetes API with.
package kubeclient

import (
	"fmt"

	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"
)

// Config loads credentials from kubeconfig when set, else from the in-cluster
// environment or $KUBECONFIG and ~/.kube/config, and applies the client rate limit.
func Config(kubeconfig string, qps float64, burst int) (*rest.Config, error) {
	var cfg *rest.Config
	var err error
	if kubeconfig != "" {
		cfg, err = clientcmd.BuildConfigFromFlags("", kubeconfig)
	} else {
		rules := clientcmd.NewDefaultClientConfigLoadingRules()
		cfg, err = clientcmd.NewNonInteractiveDeferredLoadingClientConfig(rules, &clientcmd.ConfigOverrides{}).ClientConfig()
	}
	if err != nil {
		return nil, fmt.Errorf("load Kubernetes credentials: %w", err)
	}
	cfg.QPS, cfg.Burst = float32(qps), burst
	return cfg, nil
}
