package main

import (
	"strings"
	"testing"

	"github.com/metalambda/metalambda/internal/engine"
)

func TestAPIFlags(t *testing.T) {
	for _, tt := range []struct {
		args    []string
		address string
		history int
	}{
		{nil, "0", 0}, // off like upstream: no port, no history
		{[]string{"--api-address=:9095"}, ":9095", engine.DefaultHookCallHistory},
		{[]string{"--api-address=127.0.0.1:9095", "--hook-call-history=5"}, "127.0.0.1:9095", 5},
		{[]string{"--api-address=:9095", "--hook-call-history=0"}, ":9095", 0},
		{[]string{"--hook-call-history=50"}, "0", 0},
	} {
		o, _, err := parse(t, tt.args...)
		if err != nil {
			t.Errorf("%v: %v", tt.args, err)
			continue
		}
		if o.apiAddress != tt.address || o.engine.HookCallHistory != tt.history {
			t.Errorf("%v: address %q, history %d; want %q, %d", tt.args, o.apiAddress, o.engine.HookCallHistory, tt.address, tt.history)
		}
	}
	if _, _, err := parse(t, "--api-address=:9095", "--hook-call-history=-1"); err == nil || !strings.Contains(err.Error(), "--hook-call-history must not be negative") {
		t.Errorf("negative history: %v", err)
	}
}

func TestParseAPIEndpoint(t *testing.T) {
	e, err := parseAPIEndpoint("metalambda-system/metalambda-engine-api", "10.244.0.7", ":9095")
	if err != nil {
		t.Fatal(err)
	}
	s := e.slice()
	if s.Name != "metalambda-engine-api-leader" || s.Namespace != "metalambda-system" ||
		s.Labels["kubernetes.io/service-name"] != "metalambda-engine-api" ||
		s.Endpoints[0].Addresses[0] != "10.244.0.7" || *s.Ports[0].Port != 9095 || *s.Ports[0].Name != "api" {
		t.Errorf("EndpointSlice %+v", s)
	}
	if e, err := parseAPIEndpoint("", "", "0"); e != nil || err != nil {
		t.Errorf("without --api-service: %v, %v", e, err)
	}
	for _, tc := range []struct{ service, ip, address, want string }{
		{"engine-api", "10.0.0.1", ":9095", "is not NAMESPACE/NAME"},
		{"ns/engine-api", "10.0.0.1", "0", "needs the API on"},
		{"ns/engine-api", "10.0.0.1", ":0", "needs a fixed port"},
		{"ns/engine-api", "", ":9095", "is not an IPv4 address"},
	} {
		if _, err := parseAPIEndpoint(tc.service, tc.ip, tc.address); err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%+v: err = %v, want %q", tc, err, tc.want)
		}
	}
}
