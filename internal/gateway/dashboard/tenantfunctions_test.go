package dashboard

import (
	"slices"
	"testing"

	authenticationv1 "k8s.io/api/authentication/v1"
)

// A tenant's Functions are looked for in the namespaces it is known in: those given
// (its namespaced controllers', one it names) and a ServiceAccount's own, once each,
// never a name no namespace can have.
func TestUserNamespaces(t *testing.T) {
	for _, tc := range []struct {
		user  string
		known []string
		want  []string
		// def is a new function's namespace for a user who may not create
		// Functions in default; one who may starts in default.
		def string
	}{
		{"system:serviceaccount:team-a:viewer", nil, []string{"team-a"}, "team-a"},
		{"system:serviceaccount:team-a:viewer", []string{"team-b", "", "team-a", "team-b"}, []string{"team-a", "team-b"}, "team-a"},
		{"jane@example.com", []string{"team-c", "Not_A_Namespace", "../x"}, []string{"team-c"}, "default"},
		{"jane@example.com", nil, nil, "default"},
		{"system:serviceaccount:broken", nil, nil, "default"},
	} {
		s := &Session{User: authenticationv1.UserInfo{Username: tc.user}}
		if got := userNamespaces(s, tc.known); !slices.Equal(got, tc.want) {
			t.Errorf("userNamespaces(%q, %q) = %q, want %q", tc.user, tc.known, got, tc.want)
		}
		if got := defaultNamespace(s, false); got != tc.def {
			t.Errorf("defaultNamespace(%q) = %q, want %q", tc.user, got, tc.def)
		}
		if got := defaultNamespace(s, true); got != "default" {
			t.Errorf("defaultNamespace(%q) for a user who may create Functions in default = %q, want default", tc.user, got)
		}
	}
}
