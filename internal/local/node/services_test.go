package node

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
)

func service(ns, name, ip string, ports ...corev1.ServicePort) *corev1.Service {
	return &corev1.Service{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name},
		Spec:       corev1.ServiceSpec{ClusterIP: ip, Ports: ports},
	}
}

func TestServiceEnv(t *testing.T) {
	services := []*corev1.Service{
		service("default", "kubernetes", "10.96.0.1", corev1.ServicePort{Name: "https", Port: 443, Protocol: corev1.ProtocolTCP}),
		service("ns", "my-db", "10.96.0.9", corev1.ServicePort{Port: 5432}, corev1.ServicePort{Name: "metrics-port", Port: 9187, Protocol: corev1.ProtocolUDP}),
		service("ns", "headless", "None", corev1.ServicePort{Port: 80}),
		service("other", "web", "10.96.0.7", corev1.ServicePort{Port: 80}),
	}
	want := []corev1.EnvVar{
		{Name: "KUBERNETES_SERVICE_HOST", Value: "10.96.0.1"},
		{Name: "KUBERNETES_SERVICE_PORT", Value: "443"},
		{Name: "KUBERNETES_SERVICE_PORT_HTTPS", Value: "443"},
		{Name: "KUBERNETES_PORT", Value: "tcp://10.96.0.1:443"},
		{Name: "KUBERNETES_PORT_443_TCP", Value: "tcp://10.96.0.1:443"},
		{Name: "KUBERNETES_PORT_443_TCP_PROTO", Value: "tcp"},
		{Name: "KUBERNETES_PORT_443_TCP_PORT", Value: "443"},
		{Name: "KUBERNETES_PORT_443_TCP_ADDR", Value: "10.96.0.1"},
		{Name: "MY_DB_SERVICE_HOST", Value: "10.96.0.9"},
		{Name: "MY_DB_SERVICE_PORT", Value: "5432"},
		{Name: "MY_DB_SERVICE_PORT_METRICS_PORT", Value: "9187"},
		{Name: "MY_DB_PORT", Value: "tcp://10.96.0.9:5432"},
		{Name: "MY_DB_PORT_5432_TCP", Value: "tcp://10.96.0.9:5432"},
		{Name: "MY_DB_PORT_5432_TCP_PROTO", Value: "tcp"},
		{Name: "MY_DB_PORT_5432_TCP_PORT", Value: "5432"},
		{Name: "MY_DB_PORT_5432_TCP_ADDR", Value: "10.96.0.9"},
		{Name: "MY_DB_PORT_9187_UDP", Value: "udp://10.96.0.9:9187"},
		{Name: "MY_DB_PORT_9187_UDP_PROTO", Value: "udp"},
		{Name: "MY_DB_PORT_9187_UDP_PORT", Value: "9187"},
		{Name: "MY_DB_PORT_9187_UDP_ADDR", Value: "10.96.0.9"},
	}
	if diff := cmp.Diff(want, serviceEnv(services, "ns", true)); diff != "" {
		t.Errorf("service links on (-want +got):\n%s", diff)
	}
	// Without service links only the kubernetes Service remains.
	if diff := cmp.Diff(want[:8], serviceEnv(services, "ns", false)); diff != "" {
		t.Errorf("service links off (-want +got):\n%s", diff)
	}
}

func TestContainerEnvServiceVariablesYieldToEnv(t *testing.T) {
	src := serviceRefs{fakeRefs: refs, svcs: []*corev1.Service{
		service("default", "kubernetes", "10.96.0.1", corev1.ServicePort{Name: "https", Port: 443}),
	}}
	c := &corev1.Container{Env: []corev1.EnvVar{
		{Name: "KUBERNETES_SERVICE_PORT", Value: "6443"},
		{Name: "API", Value: "https://$(KUBERNETES_SERVICE_HOST):$(KUBERNETES_SERVICE_PORT)"},
	}}
	env, err := containerEnv(context.Background(), src, testPod(), c)
	if err != nil {
		t.Fatal(err)
	}
	got := map[string]string{}
	for _, kv := range env {
		k, v, _ := strings.Cut(kv, "=")
		got[k] = v
	}
	if got["KUBERNETES_SERVICE_HOST"] != "10.96.0.1" || got["KUBERNETES_SERVICE_PORT"] != "6443" || got["API"] != "https://10.96.0.1:6443" {
		t.Errorf("env = %v", env)
	}
}

type serviceRefs struct {
	fakeRefs
	svcs []*corev1.Service
}

func (s serviceRefs) services(context.Context) ([]*corev1.Service, error) { return s.svcs, nil }

func TestTokenCacheRefreshesAtEightyPercent(t *testing.T) {
	start := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	var c tokenCache
	key := tokenKey{uid: "u-1", expiration: 1000}
	issued := 0
	request := func(now time.Time) func() (issuedToken, error) {
		return func() (issuedToken, error) {
			issued++
			return issuedToken{token: string(rune('a' + issued - 1)), issued: now, expires: now.Add(1000 * time.Second)}, nil
		}
	}
	steps := []struct {
		after time.Duration
		want  string
	}{
		{0, "a"},
		{500 * time.Second, "a"},
		{799 * time.Second, "a"},
		{800 * time.Second, "b"},  // 80% of the first token's life
		{1500 * time.Second, "b"}, // the second lives from 800s to 1800s
		{1600 * time.Second, "c"}, // 800s + 80% of 1000s
	}
	for _, s := range steps {
		now := start.Add(s.after)
		got, err := c.get(key, now, request(now))
		if err != nil || got != s.want {
			t.Fatalf("at +%s: token %q, %v; want %q", s.after, got, err, s.want)
		}
	}
	c.forget("u-1")
	if got, _ := c.get(key, start.Add(1601*time.Second), request(start)); got != "d" {
		t.Errorf("after forget: token %q, want a fresh one", got)
	}
	failing := func() (issuedToken, error) { return issuedToken{}, errors.New("boom") }
	if _, err := c.get(tokenKey{uid: "u-2"}, start, failing); err == nil {
		t.Error("a failed request gave no error")
	}
}

// rotatingRefs hands out a new token at every call.
type rotatingRefs struct {
	fakeRefs
	n *int
}

func (r rotatingRefs) token(context.Context, *corev1.Pod, string, *int64) (string, error) {
	*r.n++
	return "token-" + string(rune('0'+*r.n)), nil
}

func TestRefreshTokensRewritesProjectedTokenFiles(t *testing.T) {
	dir := t.TempDir()
	pod := testPod()
	pod.Spec.Volumes = []corev1.Volume{
		{Name: "kube-api-access-x", VolumeSource: corev1.VolumeSource{Projected: &corev1.ProjectedVolumeSource{
			DefaultMode: ptr.To[int32](0o644),
			Sources: []corev1.VolumeProjection{
				{ServiceAccountToken: &corev1.ServiceAccountTokenProjection{Path: "token", ExpirationSeconds: ptr.To[int64](3607)}},
				{ConfigMap: &corev1.ConfigMapProjection{LocalObjectReference: corev1.LocalObjectReference{Name: "kube-root-ca.crt"}}},
			},
		}}},
		{Name: "app", VolumeSource: corev1.VolumeSource{ConfigMap: &corev1.ConfigMapVolumeSource{LocalObjectReference: corev1.LocalObjectReference{Name: "app"}}}},
	}
	vdir := filepath.Join(dir, "kube-api-access-x")
	if err := os.MkdirAll(vdir, 0o755); err != nil {
		t.Fatal(err)
	}
	w := &podWorker{pod: pod, volumeDirs: map[string]string{"kube-api-access-x": vdir, "app": filepath.Join(dir, "app")}}
	n := 0
	src := rotatingRefs{fakeRefs: refs, n: &n}
	for _, want := range []string{"token-1", "token-2"} {
		if err := w.refreshTokens(context.Background(), src); err != nil {
			t.Fatal(err)
		}
		data, err := os.ReadFile(filepath.Join(vdir, "token"))
		if err != nil || string(data) != want {
			t.Fatalf("token file = %q, %v; want %q", data, err, want)
		}
	}
	info, err := os.Stat(filepath.Join(vdir, "token"))
	if err != nil || info.Mode().Perm() != 0o644 {
		t.Errorf("token file mode %v, %v; want the volume's defaultMode 0644", info.Mode(), err)
	}
	entries, _ := os.ReadDir(vdir)
	if len(entries) != 1 {
		t.Errorf("volume directory holds %d entries, want only the token (no temporary files)", len(entries))
	}
}
