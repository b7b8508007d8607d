package engine

import (
	"strings"
	"testing"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	"github.com/metalambda/metalambda/internal/apis/metacontroller/v1alpha1"
)

// TestGatewayFunctionURL: a namespaced controller of team-a calls only team-a's
// Functions, at the gateway the engine is configured with; every other URL (the
// API server, the engine's metrics, another namespace's Function, tricks with the
// path) is refused.
func TestGatewayFunctionURL(t *testing.T) {
	gateways := []string{"http://metalambda-gateway.metalambda-system", "https://gw.example:8443/prefix"}
	for _, tc := range []struct {
		url string
		ok  bool
	}{
		{"http://metalambda-gateway.metalambda-system/hooks/team-a/sync", true},
		{"http://metalambda-gateway.metalambda-system:80/hooks/team-a/sync", true},
		{"http://METALAMBDA-GATEWAY.metalambda-system/hooks/team-a/sync.v2", true},
		{"https://gw.example:8443/prefix/hooks/team-a/sync", true},
		// another namespace's Function
		{"http://metalambda-gateway.metalambda-system/hooks/team-b/sync", false},
		// the API server, the engine's metrics, the cloud metadata service
		{"https://kubernetes.default.svc/api/v1/secrets", false},
		{"http://metalambda-engine.metalambda-system:9999/metrics", false},
		{"http://169.254.169.254/latest/meta-data", false},
		// the gateway, but not a hook of team-a
		{"http://metalambda-gateway.metalambda-system/api/functions", false},
		{"http://metalambda-gateway.metalambda-system/hooks/team-a/../team-b/sync", false},
		{"http://metalambda-gateway.metalambda-system/hooks/team-a/%2e%2e%2fteam-b", false},
		{"http://metalambda-gateway.metalambda-system/hooks/team-a/sync/more", false},
		{"http://metalambda-gateway.metalambda-system/hooks/team-a/sync?x=1", false},
		{"http://user@metalambda-gateway.metalambda-system/hooks/team-a/sync", false},
		{"http://metalambda-gateway.metalambda-system:8080/hooks/team-a/sync", false},
		{"https://metalambda-gateway.metalambda-system/hooks/team-a/sync", false},
		{"https://gw.example:8443/hooks/team-a/sync", false},
	} {
		err := gatewayFunctionURL(tc.url, "team-a", gateways)
		if (err == nil) != tc.ok {
			t.Errorf("%s: err = %v, want allowed %v", tc.url, err, tc.ok)
		}
	}
	if err := gatewayFunctionURL("http://metalambda-gateway.metalambda-system/hooks/team-a/sync", "team-a", nil); err == nil || !strings.Contains(err.Error(), "--tenant-gateway-url") {
		t.Errorf("without a gateway: err = %v, want one naming --tenant-gateway-url", err)
	}
}

// TestServiceURLOfTheGateway: a webhook.service naming the gateway's Service with a
// path of the controller's namespace is the gateway URL it would call.
func TestServiceURLOfTheGateway(t *testing.T) {
	path := "/hooks/team-a/sync"
	got := serviceURL(v1alpha1.ServiceReference{Name: "metalambda-gateway", Namespace: "metalambda-system"}, &path)
	if err := gatewayFunctionURL(got, "team-a", []string{"http://metalambda-gateway.metalambda-system"}); err != nil {
		t.Errorf("%s: %v", got, err)
	}
}

func TestMissingRightsMessage(t *testing.T) {
	team := tenant{namespace: "team-a", serviceAccount: "ctl"}
	got := missingRightsMessage(team, []right{{verb: "create", resource: "configmaps"}})
	want := `ServiceAccount team-a/ctl may not create configmaps in team-a: grant create on configmaps ("") in namespace team-a`
	if got != want {
		t.Errorf("got  %s\nwant %s", got, want)
	}
	got = missingRightsMessage(team, []right{
		{verb: "create", group: "apps", resource: "deployments"},
		{verb: "update", group: "example.com", resource: "things", subresource: "status"},
		{verb: "delete", group: "apps", resource: "deployments"},
	})
	want = `ServiceAccount team-a/ctl may not create, delete deployments in team-a: grant create, delete on deployments ("apps") in namespace team-a; ` +
		`ServiceAccount team-a/ctl may not update things/status in team-a: grant update on things/status ("example.com") in namespace team-a`
	if got != want {
		t.Errorf("got  %s\nwant %s", got, want)
	}
}

func TestTenantIdentity(t *testing.T) {
	team := tenant{namespace: "team-a", serviceAccount: "ctl"}
	if got := team.user(); got != "system:serviceaccount:team-a:ctl" {
		t.Errorf("user = %s", got)
	}
	if got := strings.Join(team.groups(), ","); got != "system:serviceaccounts,system:serviceaccounts:team-a,system:authenticated" {
		t.Errorf("groups = %s", got)
	}
}

// TestControllerKeyName: the series and recorded calls of a controller that goes
// are forgotten under the name they were kept under; a namespaced controller's
// kept its namespace/name, and forgetting its bare name left them behind forever
// (a tenant creating and deleting controllers grew the engine's metrics without
// bound).
func TestControllerKeyName(t *testing.T) {
	for _, obj := range []*unstructured.Unstructured{
		{Object: map[string]any{"kind": NamespacedCompositeKind, "metadata": map[string]any{"namespace": "team-a", "name": "greeter"}}},
		{Object: map[string]any{"kind": CompositeKind, "metadata": map[string]any{"name": "greeter"}}},
	} {
		key := controllerKey{kind: obj.GetKind(), namespace: obj.GetNamespace(), name: obj.GetName()}
		if got, want := key.controllerName(), controllerName(obj); got != want {
			t.Errorf("%s: key name %q, controller name %q", obj.GetKind(), got, want)
		}
	}
}

// TestPruneTenantEnvs: the environment of a ServiceAccount no hosted controller acts
// as any more is dropped; the one in use stays.
func TestPruneTenantEnvs(t *testing.T) {
	used, old := tenant{namespace: "team-a", serviceAccount: "ctl"}, tenant{namespace: "team-a", serviceAccount: "gone"}
	m := &Manager{tenants: newTenants(), hosted: map[controllerKey]*hosted{}}
	for _, tn := range []tenant{used, old} {
		m.tenants.envs[tn] = &environment{tenant: &tn}
	}
	m.hosted[controllerKey{kind: NamespacedCompositeKind, namespace: "team-a", name: "c"}] = &hosted{controller: &controller{env: m.tenants.envs[used]}}
	m.hosted[controllerKey{kind: CompositeKind, name: "cluster"}] = &hosted{controller: &controller{env: &environment{}}}
	m.pruneTenantEnvs()
	if m.tenants.envs[used] == nil {
		t.Error("the environment in use was dropped")
	}
	if m.tenants.envs[old] != nil {
		t.Error("the environment no controller uses was kept")
	}
}
