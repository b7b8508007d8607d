package deploy

import (
	"slices"
	"testing"
)

// TestUserRoles: the roles the local platform installs for people are the
// aggregated ones and the Function roles, and none of the engine's or the gateway's
// own.
func TestUserRoles(t *testing.T) {
	roles, err := UserRoles()
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, r := range roles {
		names = append(names, r.GetName())
	}
	for _, want := range []string{
		"aggregate-metacontroller-view",
		"aggregate-metalambda-namespaced-controllers-edit",
		"metalambda-function-developer",
		"metalambda-function-invoker",
	} {
		if !slices.Contains(names, want) {
			t.Errorf("UserRoles() = %v, want %s among them", names, want)
		}
	}
	for _, own := range []string{"metalambda-gateway", "metalambda-engine"} {
		if slices.Contains(names, own) {
			t.Errorf("UserRoles() = %v holds the component's own role %s", names, own)
		}
	}
}
