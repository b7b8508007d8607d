package kubetest

import (
	"net"
	"strconv"
	"testing"
)

// FreeAddr's ports are free, on loopback, and below the kernel's ephemeral
// range, which outgoing connections take their source ports from.
func TestFreeAddrIsBelowTheEphemeralRange(t *testing.T) {
	low := ephemeralLow()
	if low-freePortFloor < 1000 {
		t.Skipf("the ephemeral range starts at %d: FreeAddr takes a port of the kernel's", low)
	}
	for range 20 {
		addr := FreeAddr(t)
		host, port, err := net.SplitHostPort(addr)
		if err != nil {
			t.Fatal(err)
		}
		n, _ := strconv.Atoi(port)
		if host != "127.0.0.1" || n < freePortFloor || n >= low {
			t.Fatalf("FreeAddr = %s: want 127.0.0.1 and a port in [%d, %d)", addr, freePortFloor, low)
		}
		l, err := net.Listen("tcp", addr)
		if err != nil {
			t.Fatalf("FreeAddr = %s, which is not free: %v", addr, err)
		}
		l.Close()
	}
}
