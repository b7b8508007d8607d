package kubetest

import (
	"math/rand/v2"
	"net"
	"os"
	"strconv"
	"strings"
	"testing"
)

// FreeAddr is a loopback address (127.0.0.1:port) whose port was free a moment
// ago, for a component that must be told its address before it listens (the
// platform's ingress and gateway, an engine's flags). Something else may take the
// port in between; a test that can listen itself should hand over the listener.
// t may be nil outside a test (a TestMain): FreeAddr panics then.
//
// The port is chosen below the kernel's ephemeral range
// (net.ipv4.ip_local_port_range), from which every outgoing connection takes
// its source port: a port the kernel handed out for 127.0.0.1:0 and that was
// closed again could be any client's the next moment, and one was (a
// platform test failed with "bind: address already in use" while the
// packages beside it connected to their API servers). Below the range only
// another process choosing a port this way can take it.
func FreeAddr(t testing.TB) string {
	addr, err := freeAddr()
	if err != nil {
		if t == nil {
			panic("kubetest: no free loopback port: " + err.Error())
		}
		t.Helper()
		t.Fatalf("no free loopback port: %v", err)
	}
	return addr
}

// freePortFloor is the lowest port FreeAddr chooses.
const freePortFloor = 10000

func freeAddr() (string, error) {
	if low := ephemeralLow(); low-freePortFloor >= 1000 {
		for range 100 {
			port := freePortFloor + rand.IntN(low-freePortFloor)
			l, err := net.Listen("tcp", "127.0.0.1:"+strconv.Itoa(port))
			if err != nil {
				continue
			}
			addr := l.Addr().String()
			l.Close()
			return addr, nil
		}
	}
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return "", err
	}
	defer l.Close()
	return l.Addr().String(), nil
}

// ephemeralLow is the first port of the kernel's ephemeral range, 0 when it
// cannot be read.
func ephemeralLow() int {
	raw, err := os.ReadFile("/proc/sys/net/ipv4/ip_local_port_range")
	if err != nil {
		return 0
	}
	f := strings.Fields(string(raw))
	if len(f) != 2 {
		return 0
	}
	low, err := strconv.Atoi(f[0])
	if err != nil {
		return 0
	}
	return low
}
