package hook

import (
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/metalambda/metalambda/internal/apis/metacontroller/v1alpha1"
)

// webhookHook builds a Hook around a Webhook changed by the options.
func webhookHook(opts ...func(*v1alpha1.Hook)) *v1alpha1.Hook {
	h := &v1alpha1.Hook{Webhook: &v1alpha1.Webhook{}}
	for _, o := range opts {
		o(h)
	}
	return h
}

func withURL(u string) func(*v1alpha1.Hook) {
	return func(h *v1alpha1.Hook) { h.Webhook.URL = &u }
}

func withService(name, ns string) func(*v1alpha1.Hook) {
	return func(h *v1alpha1.Hook) {
		h.Webhook.Service = &v1alpha1.ServiceReference{Name: name, Namespace: ns}
	}
}

func withPort(p int32) func(*v1alpha1.Hook) {
	return func(h *v1alpha1.Hook) { h.Webhook.Service.Port = &p }
}

func withProtocol(p string) func(*v1alpha1.Hook) {
	return func(h *v1alpha1.Hook) { h.Webhook.Service.Protocol = &p }
}

func withPath(p string) func(*v1alpha1.Hook) {
	return func(h *v1alpha1.Hook) { h.Webhook.Path = &p }
}

func withVersion(v v1alpha1.HookVersion) func(*v1alpha1.Hook) {
	return func(h *v1alpha1.Hook) { h.Version = &v }
}

func withTimeout(d time.Duration) func(*v1alpha1.Hook) {
	return func(h *v1alpha1.Hook) { h.Webhook.Timeout = &metav1.Duration{Duration: d} }
}

func withMode(m string) func(*v1alpha1.Hook) {
	return func(h *v1alpha1.Hook) { h.Webhook.ResponseUnMarshallMode = &m }
}

func TestResolveEndpoint(t *testing.T) {
	const v1, v2 = v1alpha1.HookVersionV1, v1alpha1.HookVersionV2
	resolver := func(ref v1alpha1.ServiceReference) (string, bool) {
		if ref.Name == "local" {
			return "http://127.0.0.1:31000/", true
		}
		return "", false
	}
	tests := []struct {
		name    string
		hook    *v1alpha1.Hook
		want    Endpoint
		wantErr string // substring; the error must also wrap ErrInvalidHook
	}{{
		name: "url",
		hook: webhookHook(withURL("https://hooks.example.com/sync")),
		want: Endpoint{URL: "https://hooks.example.com/sync", Timeout: 10 * time.Second, Version: v1},
	}, {
		name: "url wins over service and path",
		hook: webhookHook(withURL("http://a/sync"), withService("svc", "ns"), withPath("/other")),
		want: Endpoint{URL: "http://a/sync", Timeout: 10 * time.Second, Version: v1},
	}, {
		name: "service defaults",
		hook: webhookHook(withService("svc", "ns"), withPath("/sync")),
		want: Endpoint{URL: "http://svc.ns:80/sync", Timeout: 10 * time.Second, Version: v1},
	}, {
		name: "service with port, protocol and path",
		hook: webhookHook(withService("svc", "ns"), withPort(8443), withProtocol("https"), withPath("/hooks/sync")),
		want: Endpoint{URL: "https://svc.ns:8443/hooks/sync", Timeout: 10 * time.Second, Version: v1},
	}, {
		name: "service path without slash",
		hook: webhookHook(withService("svc", "ns"), withPath("sync")),
		want: Endpoint{URL: "http://svc.ns:80/sync", Timeout: 10 * time.Second, Version: v1},
	}, {
		name: "service without path",
		hook: webhookHook(withService("svc", "ns")),
		want: Endpoint{URL: "http://svc.ns:80", Timeout: 10 * time.Second, Version: v1},
	}, {
		name: "resolver override",
		hook: webhookHook(withService("local", "ns"), withPort(8080), withPath("/sync")),
		want: Endpoint{URL: "http://127.0.0.1:31000/sync", Timeout: 10 * time.Second, Version: v1},
	}, {
		name: "resolver declines",
		hook: webhookHook(withService("svc", "ns"), withPath("/sync")),
		want: Endpoint{URL: "http://svc.ns:80/sync", Timeout: 10 * time.Second, Version: v1},
	}, {
		name: "v2 defaults to strict",
		hook: webhookHook(withURL("http://a/sync"), withVersion(v2)),
		want: Endpoint{URL: "http://a/sync", Timeout: 10 * time.Second, Strict: true, Version: v2},
	}, {
		name: "v2 explicit loose",
		hook: webhookHook(withURL("http://a/sync"), withVersion(v2), withMode("loose")),
		want: Endpoint{URL: "http://a/sync", Timeout: 10 * time.Second, Version: v2},
	}, {
		name: "v1 explicit strict",
		hook: webhookHook(withURL("http://a/sync"), withVersion(v1), withMode("strict")),
		want: Endpoint{URL: "http://a/sync", Timeout: 10 * time.Second, Strict: true, Version: v1},
	}, {
		name: "explicit timeout",
		hook: webhookHook(withURL("http://a/sync"), withTimeout(3*time.Second)),
		want: Endpoint{URL: "http://a/sync", Timeout: 3 * time.Second, Version: v1},
	}, {
		name:    "bad mode",
		hook:    webhookHook(withURL("http://a/sync"), withMode("Strict")),
		wantErr: `responseUnMarshallMode "Strict" is not "strict" or "loose"`,
	}, {
		name:    "zero timeout",
		hook:    webhookHook(withURL("http://a/sync"), withTimeout(0)),
		wantErr: "webhook timeout must be positive, got 0s",
	}, {
		name:    "negative timeout",
		hook:    webhookHook(withURL("http://a/sync"), withTimeout(-time.Second)),
		wantErr: "webhook timeout must be positive, got -1s",
	}, {
		name:    "bad version",
		hook:    webhookHook(withURL("http://a/sync"), withVersion("v3")),
		wantErr: `hook version "v3" is not v1 or v2`,
	}, {
		name:    "nil hook",
		hook:    nil,
		wantErr: "no hook given",
	}, {
		name:    "no webhook",
		hook:    &v1alpha1.Hook{},
		wantErr: "hook has no webhook",
	}, {
		name:    "no url or service",
		hook:    webhookHook(withPath("/sync")),
		wantErr: "webhook needs url or service",
	}, {
		name:    "service without namespace",
		hook:    webhookHook(withService("svc", "")),
		wantErr: "webhook service needs name and namespace",
	}, {
		name:    "bad port",
		hook:    webhookHook(withService("svc", "ns"), withPort(0)),
		wantErr: "webhook service port 0 is not between 1 and 65535",
	}, {
		name:    "bad protocol",
		hook:    webhookHook(withService("svc", "ns"), withProtocol("grpc")),
		wantErr: `webhook service protocol "grpc" is not http or https`,
	}, {
		name:    "relative url",
		hook:    webhookHook(withURL("/sync")),
		wantErr: `webhook url "/sync" must start with http:// or https://`,
	}, {
		name:    "url without host",
		hook:    webhookHook(withURL("http:///sync")),
		wantErr: `webhook url "http:///sync" has no host`,
	}}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := ResolveEndpoint(tt.hook, resolver)
			if tt.wantErr != "" {
				if !errors.Is(err, ErrInvalidHook) || !strings.Contains(err.Error(), tt.wantErr) {
					t.Fatalf("error = %v, want ErrInvalidHook containing %q", err, tt.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatalf("unexpected error: %v", err)
			}
			if diff := cmp.Diff(tt.want, got); diff != "" {
				t.Errorf("endpoint (-want +got):\n%s", diff)
			}
		})
	}
}

func TestResolveEndpointNilResolver(t *testing.T) {
	got, err := ResolveEndpoint(webhookHook(withService("svc", "ns"), withPath("/sync")), nil)
	if err != nil {
		t.Fatal(err)
	}
	if got.URL != "http://svc.ns:80/sync" {
		t.Errorf("URL = %q, want http://svc.ns:80/sync", got.URL)
	}
}
