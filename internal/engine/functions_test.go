package engine

import "testing"

func TestFunctionOfURL(t *testing.T) {
	for _, tc := range []struct {
		url  string
		want functionKey
	}{
		{"http://gateway.metalambda:8080/hooks/team-a/sync", functionKey{"team-a", "sync"}},
		{"https://example.com/prefix/hooks/ns/fn/", functionKey{"ns", "fn"}},
		{"http://gateway/hooks/ns", functionKey{}},
		{"http://gateway/sync", functionKey{}},
		{"http://gateway/hook/ns/fn", functionKey{}},
		{"http://gateway/hooks//fn", functionKey{}},
		{"::bad", functionKey{}},
	} {
		if got := functionOfURL(tc.url); got != tc.want {
			t.Errorf("functionOfURL(%q) = %v, want %v", tc.url, got, tc.want)
		}
	}
}
