package kubetest

import (
	"net"
	"testing"
)

// FreeAddr is a loopback address (127.0.0.1:port) whose port was free a moment
// ago, for a component that must be told its address before it listens (the
// platform's ingress and gateway, an engine's flags). Something else may take the
// port in between; a test that can listen itself should hand over the listener.
// t may be nil outside a test (a TestMain): FreeAddr panics then.
func FreeAddr(t testing.TB) string {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		if t == nil {
			panic("kubetest: no free loopback port: " + err.Error())
		}
		t.Helper()
		t.Fatalf("no free loopback port: %v", err)
	}
	defer l.Close()
	return l.Addr().String()
}
