package engine

import (
	"context"
	"fmt"
	"net"
	"net/url"
	"strings"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/util/validation"

	"github.com/metalambda/metalambda/internal/apis/metacontroller/v1alpha1"
)

var servicesGVR = corev1.SchemeGroupVersion.WithResource("services")

// tenantHook is the hook a namespaced controller may call, or why it may not. A
// tenant's hook goes to one of two places only, so that the engine never sends a
// request from its own network position where the tenant could not:
//
//   - a Service of the controller's namespace (webhook.service with its namespace
//     empty or the controller's), which is not an ExternalName Service;
//   - a gateway Function of the controller's namespace: a URL (webhook.url, or a
//     webhook.service the engine would call at such a URL) under one of the engine's
//     Options.TenantGateways whose path is /hooks/<namespace>/<function>.
//
// Everything else (the API server, the engine's metrics, another namespace's Service
// or Function, any other host) is refused.
func (m *Manager) tenantHook(ctx context.Context, env *environment, h *v1alpha1.Hook) (*v1alpha1.Hook, error) {
	if h == nil || h.Webhook == nil {
		return h, nil // ResolveEndpoint says what is missing
	}
	ns := env.tenant.namespace
	w := h.Webhook
	if w.URL != nil && *w.URL != "" {
		if err := gatewayFunctionURL(*w.URL, ns, m.env.opts.TenantGateways); err != nil {
			return nil, fmt.Errorf("webhook.url %q: %w", *w.URL, err)
		}
		return h, nil
	}
	if w.Service == nil {
		return h, nil
	}
	svc := *w.Service
	if svc.Namespace == "" {
		svc.Namespace = ns
	}
	if svc.Namespace != ns {
		if gatewayFunctionURL(serviceURL(svc, w.Path), ns, m.env.opts.TenantGateways) == nil {
			return withService(h, svc), nil
		}
		return nil, fmt.Errorf("webhook.service %s/%s is in another namespace: a namespaced controller calls a Service of its own namespace %s, or a gateway Function of it (path /hooks/%s/<function>)", svc.Namespace, svc.Name, ns, ns)
	}
	if err := m.ownService(ctx, env, svc); err != nil {
		return nil, err
	}
	return withService(h, svc), nil
}

// tenantOwnService is the Service of a namespaced controller's own namespace that
// its hook h (as tenantHook returned it) calls, if that is what it calls.
func tenantOwnService(env *environment, h *v1alpha1.Hook) (v1alpha1.ServiceReference, bool) {
	if env.tenant == nil || h == nil || h.Webhook == nil || h.Webhook.Service == nil || (h.Webhook.URL != nil && *h.Webhook.URL != "") {
		return v1alpha1.ServiceReference{}, false
	}
	svc := *h.Webhook.Service
	return svc, svc.Namespace == env.tenant.namespace
}

// withService is h calling svc.
func withService(h *v1alpha1.Hook, svc v1alpha1.ServiceReference) *v1alpha1.Hook {
	out := *h
	w := *h.Webhook
	w.Service = &svc
	out.Webhook = &w
	return &out
}

// ownService refuses an ExternalName Service, which would send the call to any
// host its DNS name points at. It reads the Service as the tenant.
func (m *Manager) ownService(ctx context.Context, env *environment, svc v1alpha1.ServiceReference) error {
	obj, err := env.resource(servicesGVR, svc.Namespace).Get(ctx, svc.Name, metav1.GetOptions{})
	switch {
	case apierrors.IsForbidden(err):
		return fmt.Errorf("webhook.service: %s", missingRightsMessage(*env.tenant, []right{{verb: "get", resource: "services"}}))
	case apierrors.IsNotFound(err):
		return fmt.Errorf("webhook.service %s/%s does not exist", svc.Namespace, svc.Name)
	case err != nil:
		return fmt.Errorf("webhook.service %s/%s: %w", svc.Namespace, svc.Name, err)
	}
	if t, _, _ := unstructured.NestedString(obj.Object, "spec", "type"); t == string(corev1.ServiceTypeExternalName) {
		return fmt.Errorf("webhook.service %s/%s is an ExternalName Service: a namespaced controller's hook may not send the engine's requests to another host", svc.Namespace, svc.Name)
	}
	return nil
}

// serviceURL is the URL the engine calls a Service at through cluster DNS.
func serviceURL(svc v1alpha1.ServiceReference, path *string) string {
	scheme := "http"
	if svc.Protocol != nil && *svc.Protocol != "" {
		scheme = *svc.Protocol
	}
	port := int32(80)
	if svc.Port != nil {
		port = *svc.Port
	}
	return fmt.Sprintf("%s://%s.%s:%d%s", scheme, svc.Name, svc.Namespace, port, webhookPathOf(path))
}

func webhookPathOf(p *string) string {
	switch {
	case p == nil || *p == "":
		return ""
	case strings.HasPrefix(*p, "/"):
		return *p
	}
	return "/" + *p
}

// gatewayFunctionURL accepts raw when it is exactly <gateway>/hooks/<namespace>/<name>
// for one of gateways and a valid Function name: no query, fragment, user info,
// escaped or dot segments that a server could read as another path.
func gatewayFunctionURL(raw, namespace string, gateways []string) error {
	u, err := url.Parse(raw)
	if err != nil {
		return fmt.Errorf("does not parse: %v", err)
	}
	if u.User != nil || u.RawQuery != "" || u.Fragment != "" || u.RawPath != "" || u.Opaque != "" || strings.Contains(raw, "..") {
		return fmt.Errorf("a namespaced controller's hook URL carries no user info, query, fragment, escaped characters or dot segments")
	}
	for _, g := range gateways {
		base, err := url.Parse(g)
		if err != nil || !strings.EqualFold(base.Scheme, u.Scheme) || hostPort(base) != hostPort(u) {
			continue
		}
		rest, ok := strings.CutPrefix(u.Path, strings.TrimSuffix(base.Path, "/")+"/hooks/"+namespace+"/")
		if ok && len(validation.IsDNS1123Subdomain(rest)) == 0 {
			return nil
		}
		return fmt.Errorf("a namespaced controller of namespace %s calls only the gateway's Functions of its namespace, at %s/hooks/%s/<function>", namespace, strings.TrimSuffix(g, "/"), namespace)
	}
	return fmt.Errorf("a namespaced controller's hook is a Service of its namespace %s or a gateway Function of it (%s/hooks/%s/<function>); this URL is neither", namespace, gatewayList(gateways), namespace)
}

func gatewayList(gateways []string) string {
	if len(gateways) == 0 {
		return "no gateway is configured: the engine's --tenant-gateway-url"
	}
	return strings.Join(gateways, " or ")
}

// hostPort is u's lower-case host with its scheme's default port made explicit.
func hostPort(u *url.URL) string {
	host := strings.ToLower(u.Hostname())
	port := u.Port()
	if port == "" {
		port = map[string]string{"http": "80", "https": "443"}[strings.ToLower(u.Scheme)]
	}
	return net.JoinHostPort(host, port)
}
