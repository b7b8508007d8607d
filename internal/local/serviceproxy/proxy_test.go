package serviceproxy

import (
	"net"
	"testing"
)

// addrConn is a net.Conn that only knows its addresses.
type addrConn struct {
	net.Conn
	local, remote string
}

func (c addrConn) LocalAddr() net.Addr  { return tcpAddr(c.local) }
func (c addrConn) RemoteAddr() net.Addr { return tcpAddr(c.remote) }

func tcpAddr(s string) *net.TCPAddr {
	a, _ := net.ResolveTCPAddr("tcp", s)
	return a
}

func TestAllowedClients(t *testing.T) {
	_, pods, _ := net.ParseCIDR("10.244.0.0/24")
	p := &Proxy{opts: Options{Clients: pods}}
	cases := []struct {
		local, remote string
		want          bool
	}{
		{"10.96.0.1:443", "10.244.0.7:40000", true},   // a pod
		{"10.96.0.1:443", "10.96.0.1:40000", true},    // a host process dialing the ClusterIP
		{"10.244.0.1:6443", "10.244.0.1:40000", true}, // a host process dialing the bridge address
		{"10.96.0.1:443", "127.0.0.1:40000", true},
		{"10.96.0.1:443", "192.168.1.20:40000", false}, // another machine routing to us
		{"10.96.0.1:443", "10.244.1.7:40000", false},
	}
	for _, tc := range cases {
		if got := p.allowed(addrConn{local: tc.local, remote: tc.remote}); got != tc.want {
			t.Errorf("client %s to %s: allowed %t, want %t", tc.remote, tc.local, got, tc.want)
		}
	}
}
