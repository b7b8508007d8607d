package main

import (
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"os"
	"path/filepath"
	"strings"

	"k8s.io/cli-runtime/pkg/genericclioptions"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"
	"k8s.io/client-go/transport"

	"github.com/metalambda/metalambda/internal/local/platform"
)

// gatewayEnv names the gateway when --gateway does not.
const gatewayEnv = "METALAMBDA_GATEWAY"

// connectOptions say how `metalambda fn` reaches the gateway and who it is there.
type connectOptions struct {
	kube    *genericclioptions.ConfigFlags
	gateway string // --gateway
}

// client builds a gateway client for the namespace of the kubeconfig's context (or
// --namespace), authenticated with the kubeconfig's credentials.
func (o *connectOptions) client() (*gatewayClient, error) {
	loader := o.kube.ToRawKubeConfigLoader()
	namespace, _, err := loader.Namespace()
	if err != nil {
		return nil, fmt.Errorf("the kubeconfig: %w", err)
	}
	cfg, err := o.kube.ToRESTConfig()
	if err != nil {
		return nil, fmt.Errorf("the kubeconfig: %w", err)
	}
	base, source, err := o.findGateway(loader, cfg.Host)
	if err != nil {
		return nil, err
	}
	rt, err := bearerTransport(cfg, "the gateway")
	if err != nil {
		return nil, err
	}
	return newGatewayClient(base, source, namespace, &http.Client{Transport: rt, Timeout: cfg.Timeout}), nil
}

// findGateway returns the gateway's URL and where it was found: --gateway, then
// $METALAMBDA_GATEWAY, then the gateway-url file that `metalambda up` writes beside
// the kubeconfig it writes, when the kubeconfig in use is that one (its cluster is
// the API server host).
func (o *connectOptions) findGateway(loader clientcmd.ClientConfig, apiHost string) (string, string, error) {
	return findURL(loader, apiHost, o.gateway, "--gateway", gatewayEnv, platform.GatewayURLFile, "gateway",
		"no gateway: pass --gateway URL or set $"+gatewayEnv+"; only a kubeconfig that `metalambda up` wrote names its gateway. "+
			"A gateway in a cluster is reached at its own address (an Ingress, a LoadBalancer, `kubectl port-forward`), not through the API server's service proxy, which drops the bearer token the gateway needs")
}

// findURL returns a component's URL and where it was found: the flag's value,
// then the environment variable env, then the file (fileIn of its directory) that
// `metalambda up` writes beside the kubeconfig it writes, when the kubeconfig in
// use is that one; otherwise the error notFound.
func findURL(loader clientcmd.ClientConfig, apiHost, flagValue, flagName, env string, fileIn func(dir string) string, what, notFound string) (string, string, error) {
	if flagValue != "" {
		return checkURL(flagValue, flagName, what)
	}
	if v := os.Getenv(env); v != "" {
		return checkURL(v, "$"+env, what)
	}
	for _, path := range kubeconfigPaths(loader) {
		file := fileIn(filepath.Dir(path))
		if u, ok := platformURL(file, path, apiHost); ok {
			return checkURL(u, "from "+file, what)
		}
	}
	return "", "", errors.New(notFound)
}

// kubeconfigPaths lists the kubeconfig files in use: --kubeconfig, else $KUBECONFIG's
// files, else ~/.kube/config.
func kubeconfigPaths(loader clientcmd.ClientConfig) []string {
	access := loader.ConfigAccess()
	if f := access.GetExplicitFile(); f != "" {
		return []string{f}
	}
	return access.GetLoadingPrecedence()
}

// platformURL reads a URL file the platform wrote beside a kubeconfig (gateway-url,
// engine-url), when that kubeconfig points at apiHost.
func platformURL(file, kubeconfig, apiHost string) (string, bool) {
	data, err := os.ReadFile(file)
	if err != nil {
		return "", false
	}
	cfg, err := clientcmd.LoadFromFile(kubeconfig)
	if err != nil {
		return "", false
	}
	for _, cluster := range cfg.Clusters {
		if strings.TrimSuffix(cluster.Server, "/") == strings.TrimSuffix(apiHost, "/") {
			return strings.TrimSpace(string(data)), true
		}
	}
	return "", false
}

// checkURL refuses a URL of what (the gateway, the engine API) that is not http(s).
func checkURL(raw, source, what string) (string, string, error) {
	u, err := url.Parse(raw)
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
		return "", "", fmt.Errorf("%s URL %q (%s) is not an http:// or https:// URL", what, raw, source)
	}
	return strings.TrimSuffix(raw, "/"), source, nil
}

// bearerTransport presents the kubeconfig's bearer token (a token, a token file, an
// exec plugin or an auth provider that yields one) to server (the gateway, the
// engine's API), which accepts bearer tokens alone: it checks them with a
// TokenReview. A client certificate proves who one is to the API server only, so a
// kubeconfig with nothing else is refused here, with what to do instead.
func bearerTransport(cfg *rest.Config, server string) (http.RoundTripper, error) {
	if cfg.Impersonate.UserName != "" || cfg.Impersonate.UID != "" || len(cfg.Impersonate.Groups) > 0 {
		return nil, fmt.Errorf("--as, --as-group and --as-uid cannot be used: %s acts as the user whose token it is given, and does not take impersonation headers", server)
	}
	if cfg.BearerToken == "" && cfg.BearerTokenFile == "" && cfg.ExecProvider == nil && cfg.AuthProvider == nil {
		what := "no credentials"
		switch {
		case len(cfg.CertData) > 0 || cfg.CertFile != "":
			what = "a client certificate"
		case cfg.Username != "":
			what = "a user name and password"
		}
		return nil, fmt.Errorf("the kubeconfig's user authenticates with %s, and %s accepts bearer tokens only (it checks them with a TokenReview): "+
			"pass --token (for example from `kubectl create token <service account>`), or use a context whose user has a token", what, server)
	}
	tc, err := cfg.TransportConfig()
	if err != nil {
		return nil, err
	}
	// The API server's TLS settings and client certificates are not the server's:
	// only the bearer token, from whichever source the kubeconfig names, goes along.
	tc.TLS = transport.TLSConfig{}
	return transport.HTTPWrappersForConfig(tc, http.DefaultTransport.(*http.Transport).Clone())
}
