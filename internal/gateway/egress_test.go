package gateway

import (
	"testing"

	"github.com/google/go-cmp/cmp"
	"k8s.io/client-go/rest"

	"github.com/metalambda/metalambda/internal/gateway/egress"
)

func TestURLHostPort(t *testing.T) {
	for _, tt := range []struct{ in, want string }{
		{"https://10.96.0.1:443", "10.96.0.1:443"},
		{"https://10.96.0.1", "10.96.0.1:443"},
		{"http://127.0.0.1:9095/", "127.0.0.1:9095"},
		{"http://[::1]", "[::1]:80"},
		{"127.0.0.1:6443", "127.0.0.1:6443"},
		{"kube.example", "kube.example:443"},
		{"ftp://a.example", ""},
		{"", ""},
	} {
		if got := urlHostPort(tt.in); got != tt.want {
			t.Errorf("urlHostPort(%q) = %q, want %q", tt.in, got, tt.want)
		}
	}
}

func TestControlPlane(t *testing.T) {
	etcd := egress.Destination{Address: "127.0.0.1:2379", What: "etcd"}
	got := controlPlane(&rest.Config{Host: "https://127.0.0.1:6443"}, &Options{
		EngineURL: "http://127.0.0.1:9095", PublicURL: "http://127.0.0.1:8081", EgressDeny: []egress.Destination{etcd},
	})
	want := []egress.Destination{
		{Address: "127.0.0.1:6443", What: "the Kubernetes API server"},
		{Address: "127.0.0.1:9095", What: "the engine's API"},
		{Address: "127.0.0.1:8081", What: "the gateway's API"},
		etcd,
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("controlPlane (-want +got):\n%s", diff)
	}
}
