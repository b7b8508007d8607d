package leader

import (
	"strings"
	"testing"
)

func TestParseAPIEndpoint(t *testing.T) {
	e, err := ParseEndpoint("metalambda-system/metalambda-engine-api", "10.244.0.7", ":9095")
	if err != nil {
		t.Fatal(err)
	}
	s := e.slice()
	if s.Name != "metalambda-engine-api-leader" || s.Namespace != "metalambda-system" ||
		s.Labels["kubernetes.io/service-name"] != "metalambda-engine-api" ||
		s.Endpoints[0].Addresses[0] != "10.244.0.7" || *s.Ports[0].Port != 9095 || *s.Ports[0].Name != "api" {
		t.Errorf("EndpointSlice %+v", s)
	}
	if e, err := ParseEndpoint("", "", "0"); e != nil || err != nil {
		t.Errorf("without --api-service: %v, %v", e, err)
	}
	for _, tc := range []struct{ service, ip, address, want string }{
		{"engine-api", "10.0.0.1", ":9095", "is not NAMESPACE/NAME"},
		{"ns/engine-api", "10.0.0.1", "0", "needs the API on"},
		{"ns/engine-api", "10.0.0.1", ":0", "needs a fixed port"},
		{"ns/engine-api", "", ":9095", "is not an IPv4 address"},
	} {
		if _, err := ParseEndpoint(tc.service, tc.ip, tc.address); err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%+v: err = %v, want %q", tc, err, tc.want)
		}
	}
}
