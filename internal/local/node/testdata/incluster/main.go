// Command incluster is what the node's integration test runs as a pod: it builds
// client-go's in-cluster configuration, lists the ConfigMaps of its namespace (which
// its service account may) and the Secrets (which it may not), and prints one line
// per outcome. It exits 0 only when the first is allowed, the second forbidden, and
// the API server's certificate is also valid for kubernetes.default.svc.
package main

import (
	"context"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"os"
	"strings"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
)

const namespaceFile = "/var/run/secrets/kubernetes.io/serviceaccount/namespace"

func main() {
	if err := run(context.Background()); err != nil {
		fmt.Println("error:", err)
		os.Exit(1)
	}
}

func run(ctx context.Context) error {
	cfg, err := rest.InClusterConfig()
	if err != nil {
		return err
	}
	fmt.Println("host:", cfg.Host)
	data, err := os.ReadFile(namespaceFile)
	if err != nil {
		return err
	}
	ns := strings.TrimSpace(string(data))
	kube, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		return err
	}
	cms, err := kube.CoreV1().ConfigMaps(ns).List(ctx, metav1.ListOptions{})
	if err != nil {
		return fmt.Errorf("list configmaps: %w", err)
	}
	names := make([]string, 0, len(cms.Items))
	for _, cm := range cms.Items {
		names = append(names, cm.Name)
	}
	fmt.Printf("configmaps in %s: %s\n", ns, strings.Join(names, ","))
	_, err = kube.CoreV1().Secrets(ns).List(ctx, metav1.ListOptions{})
	if !apierrors.IsForbidden(err) {
		return fmt.Errorf("list secrets: want forbidden, got %v", err)
	}
	fmt.Println("secrets: forbidden:", err)
	if err := printBinding(cfg.BearerTokenFile); err != nil {
		return err
	}
	return verifyName(cfg, "kubernetes.default.svc")
}

// printBinding prints the pod and audience the mounted token is bound to (its JWT
// claims; the API server has already checked the signature).
func printBinding(tokenFile string) error {
	data, err := os.ReadFile(tokenFile)
	if err != nil {
		return err
	}
	parts := strings.Split(strings.TrimSpace(string(data)), ".")
	if len(parts) != 3 {
		return fmt.Errorf("the token is not a JWT")
	}
	payload, err := base64.RawURLEncoding.DecodeString(parts[1])
	if err != nil {
		return err
	}
	var claims struct {
		Audience []string `json:"aud"`
		K8s      struct {
			Pod struct {
				Name string `json:"name"`
			} `json:"pod"`
		} `json:"kubernetes.io"`
	}
	if err := json.Unmarshal(payload, &claims); err != nil {
		return err
	}
	fmt.Printf("token bound to pod %s for audience %s\n", claims.K8s.Pod.Name, strings.Join(claims.Audience, ","))
	return nil
}

// verifyName proves the API server's certificate is valid for name (pods without a
// cluster DNS still dial the ClusterIP).
func verifyName(cfg *rest.Config, name string) error {
	named := rest.CopyConfig(cfg)
	named.TLSClientConfig.ServerName = name
	kube, err := kubernetes.NewForConfig(named)
	if err != nil {
		return err
	}
	if _, err := kube.Discovery().ServerVersion(); err != nil {
		return fmt.Errorf("verify the certificate as %s: %w", name, err)
	}
	fmt.Println("certificate verified for", name)
	return nil
}
