package gateway

import (
	"context"
	"net/http"
	"net/http/httptest"
	"slices"
	"testing"
	"time"

	discoveryv1 "k8s.io/api/discovery/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes/fake"
)

func endpointSlice(ns, name, service string, ports map[string]int32, addresses ...string) *discoveryv1.EndpointSlice {
	s := &discoveryv1.EndpointSlice{
		ObjectMeta:  metav1.ObjectMeta{Namespace: ns, Name: name, Labels: map[string]string{discoveryv1.LabelServiceName: service}},
		AddressType: discoveryv1.AddressTypeIPv4,
	}
	for n, p := range ports {
		s.Ports = append(s.Ports, discoveryv1.EndpointPort{Name: &n, Port: &p})
	}
	for _, a := range addresses {
		s.Endpoints = append(s.Endpoints, discoveryv1.Endpoint{Addresses: []string{a}})
	}
	return s
}

// The replicas are the endpoints of the gateway's own Service at its API port,
// from every slice of that Service alone, without this replica.
func TestEndpointPeers(t *testing.T) {
	ports := map[string]int32{"api": 8080, "hooks": 8081}
	kube := fake.NewClientset(
		endpointSlice("system", "gw-1", "gw", ports, "10.0.0.1", "10.0.0.2"),
		endpointSlice("system", "gw-2", "gw", ports, "10.0.0.3", "10.0.0.1"),
		endpointSlice("system", "other", "other", ports, "10.0.0.9"),
		endpointSlice("elsewhere", "gw-x", "gw", ports, "10.0.0.8"),
		endpointSlice("system", "gw-noport", "gw", map[string]int32{"hooks": 8081}, "10.0.0.7"),
	)
	peers, run, err := EndpointPeers(kube, "system", "gw", "api", "10.0.0.2")
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { defer close(done); run(ctx) }()
	defer func() { cancel(); <-done }()
	want := []string{"http://10.0.0.1:8080", "http://10.0.0.3:8080"}
	deadline := time.Now().Add(10 * time.Second)
	for got := peers(); !slices.Equal(got, want); got = peers() {
		if time.Now().After(deadline) {
			t.Fatalf("peers = %v, want %v", got, want)
		}
		time.Sleep(10 * time.Millisecond)
	}
	if _, _, err := EndpointPeers(kube, "system", "", "api", ""); err == nil {
		t.Error("a Service without a name was taken")
	}
}

// A peer gets the caller's own token as a bearer token, however the caller's
// Authorization header spells the scheme that the gateway accepted ("bearer",
// several spaces), and not the header's scheme as part of the token.
func TestRecordedSendsCallersToken(t *testing.T) {
	var got []string
	peer := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		got = append(got, r.Header.Get("Authorization"))
		w.Header().Set("Content-Type", "application/json")
		_, _ = w.Write([]byte(`{"items": []}`))
	}))
	defer peer.Close()
	g := &Gateway{opts: Options{History: 10, Peers: func() []string { return []string{peer.URL} }}}
	for _, header := range []string{"Bearer tok", "bearer tok", "Bearer  tok"} {
		got = nil
		r := httptest.NewRequest(http.MethodGet, "/v1/namespaces/ns/functions/f/invocations", nil)
		r.Header.Set("Authorization", header)
		_, unreachable := g.recorded(r, "ns", "f", &entry{history: newHistory(10)})
		if len(unreachable) != 0 || !slices.Equal(got, []string{"Bearer tok"}) {
			t.Errorf("Authorization %q: the peer got %q (unreachable %v), want [\"Bearer tok\"]", header, got, unreachable)
		}
	}
}
