package egress

import (
	"context"
	"errors"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"net/netip"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"golang.org/x/net/dns/dnsmessage"
)

const tryIt = `"try it"`

func TestCheck(t *testing.T) {
	c, err := compile(Policy{
		Purpose: tryIt,
		Allow:   []string{"127.0.0.1:8080", "ingress.local:8443"},
		Deny: []Destination{
			{Address: "10.0.0.5:6443", What: "the Kubernetes API server"},
			{Address: ":2379", What: "etcd"},
			{Address: "gateway.local:8081", What: "the gateway's API"},
		},
	})
	if err != nil {
		t.Fatal(err)
	}
	loopback := `loopback addresses are not reachable from "try it"`
	linkLocal := `link-local addresses (cloud metadata services among them) are not reachable from "try it"`
	unspecified := `unspecified addresses (they reach this host) are not reachable from "try it"`
	multicast := `multicast addresses are not reachable from "try it"`
	for _, tt := range []struct {
		name, requested, address string
		want                     string // the refusal's reason; "" allows
	}{
		{"loopback", "a.example:9000", "127.0.0.1:9000", loopback},
		{"another loopback address", "a.example:9000", "127.0.0.2:9000", loopback},
		{"IPv6 loopback", "a.example:9000", "[::1]:9000", loopback},
		{"IPv4-mapped loopback", "a.example:9000", "[::ffff:127.0.0.1]:9000", loopback},
		{"metadata service", "a.example:80", "169.254.169.254:80", linkLocal},
		{"IPv4-mapped metadata service", "a.example:80", "[::ffff:169.254.169.254]:80", linkLocal},
		{"IPv6 link-local", "a.example:80", "[fe80::1]:80", linkLocal},
		{"IPv6 link-local with a zone", "a.example:80", "[fe80::1%eth0]:80", linkLocal},
		{"unspecified", "a.example:80", "0.0.0.0:80", unspecified},
		{"IPv6 unspecified", "a.example:80", "[::]:80", unspecified},
		{"multicast", "a.example:80", "224.0.0.1:80", multicast},
		{"IPv6 multicast", "a.example:80", "[ff02::1]:80", multicast},
		{"denied address", "a.example:6443", "10.0.0.5:6443", `the Kubernetes API server is not reachable from "try it"`},
		{"denied address, IPv4-mapped", "a.example:6443", "[::ffff:10.0.0.5]:6443", `the Kubernetes API server is not reachable from "try it"`},
		{"denied port on every address", "a.example:2379", "192.0.2.10:2379", `etcd is not reachable from "try it"`},
		{"denied name", "Gateway.Local.:8081", "192.0.2.11:8081", `the gateway's API is not reachable from "try it"`},
		{"another port of a denied address", "a.example:443", "10.0.0.5:443", ""},
		{"the allowed ingress", "127.0.0.1:8080", "127.0.0.1:8080", ""},
		{"the allowed ingress, IPv4-mapped", "127.0.0.1:8080", "[::ffff:127.0.0.1]:8080", ""},
		{"the allowed ingress under another name", "a.example:8080", "127.0.0.1:8080", ""},
		{"another port of the ingress's address", "127.0.0.1:8081", "127.0.0.1:8081", loopback},
		{"the ingress's port on another loopback address", "[::1]:8080", "[::1]:8080", loopback},
		{"an allowed name", "ingress.local:8443", "127.0.0.1:8443", ""},
		{"an allowed name's port, named otherwise", "a.example:8443", "127.0.0.1:8443", loopback},
		{"a public address", "a.example:80", "192.0.2.10:80", ""},
		{"a private address", "a.example:80", "10.1.2.3:80", ""},
		{"not an address", "a.example:80", "a.example:80", "not an IP address and port"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			err := c.check(tt.requested, tt.address)
			if tt.want == "" {
				if err != nil {
					t.Fatalf("refused: %v", err)
				}
				return
			}
			var refused *RefusedError
			if !errors.As(err, &refused) {
				t.Fatalf("error %v, want a *RefusedError", err)
			}
			if want := "refusing to connect to " + tt.address + ": " + tt.want; err.Error() != want {
				t.Errorf("error\n %s\nwant\n %s", err, want)
			}
		})
	}
}

func TestPolicyEntriesMustParse(t *testing.T) {
	for _, p := range []Policy{
		{Allow: []string{"127.0.0.1"}},
		{Allow: []string{"127.0.0.1:http"}},
		{Deny: []Destination{{Address: "10.0.0.1:70000"}}},
	} {
		if _, err := New(p); err == nil {
			t.Errorf("New(%+v) succeeded, want an error", p)
		}
	}
}

// recorder is a server that counts its requests.
func recorder(t *testing.T) (*httptest.Server, *atomic.Int32) {
	t.Helper()
	var hits atomic.Int32
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		hits.Add(1)
		_, _ = io.WriteString(w, "reached")
	}))
	t.Cleanup(srv.Close)
	return srv, &hits
}

func hostOf(srv *httptest.Server) string { return srv.Listener.Addr().String() }

// A redirect is returned as it came, even to a destination the policy allows: the
// client never sends the request (and its body, for a 307 or 308) again elsewhere.
func TestClientFollowsNoRedirect(t *testing.T) {
	target, hits := recorder(t)
	for _, status := range []int{http.StatusMovedPermanently, http.StatusFound, http.StatusSeeOther, http.StatusTemporaryRedirect, http.StatusPermanentRedirect} {
		t.Run(http.StatusText(status), func(t *testing.T) {
			redirector := httptest.NewServer(http.RedirectHandler(target.URL+"/v3/kv/put", status))
			defer redirector.Close()
			client, err := New(Policy{Purpose: tryIt, Allow: []string{hostOf(redirector), hostOf(target)}})
			if err != nil {
				t.Fatal(err)
			}
			resp, err := client.Post(redirector.URL, "application/json", strings.NewReader(`{"key":"Zm9v"}`))
			if err != nil {
				t.Fatal(err)
			}
			resp.Body.Close()
			if resp.StatusCode != status || resp.Header.Get("Location") != target.URL+"/v3/kv/put" {
				t.Errorf("answer %d to %q, want %d to the target", resp.StatusCode, resp.Header.Get("Location"), status)
			}
			if n := hits.Load(); n != 0 {
				t.Fatalf("the redirect's target got %d requests", n)
			}
		})
	}
}

func TestClientRefusesLoopback(t *testing.T) {
	srv, hits := recorder(t)
	client, err := New(Policy{Purpose: tryIt})
	if err != nil {
		t.Fatal(err)
	}
	_, err = client.Get(srv.URL)
	var refused *RefusedError
	if !errors.As(err, &refused) || refused.Address != hostOf(srv) || !strings.Contains(err.Error(), `loopback addresses are not reachable from "try it"`) {
		t.Errorf("error %v, want the loopback address refused", err)
	}
	if n := hits.Load(); n != 0 {
		t.Errorf("the server got %d requests", n)
	}
}

// The check applies to the address a name resolves to when the connection is made,
// whatever the name: one that resolves to loopback is refused, and the allowed
// address is reached under any name.
func TestClientChecksTheResolvedAddress(t *testing.T) {
	srv, hits := recorder(t)
	_, port, _ := net.SplitHostPort(hostOf(srv))
	resolver := fakeDNS(t, map[string]netip.Addr{"rebound.example.": netip.MustParseAddr("127.0.0.1")})
	for _, tt := range []struct {
		name    string
		allow   []string
		wantErr string
	}{
		{"refused", nil, "refusing to connect to " + hostOf(srv) + `: loopback addresses are not reachable from "try it"`},
		{"allowed", []string{hostOf(srv)}, ""},
	} {
		t.Run(tt.name, func(t *testing.T) {
			hits.Store(0)
			client, err := New(Policy{Purpose: tryIt, Allow: tt.allow, Resolver: resolver})
			if err != nil {
				t.Fatal(err)
			}
			resp, err := client.Get("http://rebound.example:" + port + "/")
			if tt.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tt.wantErr) || hits.Load() != 0 {
					t.Fatalf("error %v and %d requests, want %q and none", err, hits.Load(), tt.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			resp.Body.Close()
			if hits.Load() != 1 {
				t.Errorf("the server got %d requests, want 1", hits.Load())
			}
		})
	}
}

func TestClientSettings(t *testing.T) {
	client, err := New(Policy{})
	if err != nil {
		t.Fatal(err)
	}
	if client.Timeout != DefaultTimeout {
		t.Errorf("timeout %s, want %s", client.Timeout, DefaultTimeout)
	}
	if client.Transport.(*http.Transport).Proxy != nil {
		t.Error("the client takes a proxy from the environment")
	}
	if client, _ = New(Policy{Timeout: time.Second}); client.Timeout != time.Second {
		t.Errorf("timeout %s, want 1s", client.Timeout)
	}
}

// fakeDNS is a resolver that asks a DNS server on loopback which answers A records
// from names, and no record for any other question.
func fakeDNS(t *testing.T, names map[string]netip.Addr) *net.Resolver {
	t.Helper()
	conn, err := net.ListenPacket("udp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { conn.Close() })
	go func() {
		buf := make([]byte, 512)
		for {
			n, from, err := conn.ReadFrom(buf)
			if err != nil {
				return
			}
			if answer, err := dnsAnswer(buf[:n], names); err == nil {
				_, _ = conn.WriteTo(answer, from)
			}
		}
	}()
	return &net.Resolver{PreferGo: true, Dial: func(ctx context.Context, _, _ string) (net.Conn, error) {
		var d net.Dialer
		return d.DialContext(ctx, "udp", conn.LocalAddr().String())
	}}
}

func dnsAnswer(query []byte, names map[string]netip.Addr) ([]byte, error) {
	var msg dnsmessage.Message
	if err := msg.Unpack(query); err != nil || len(msg.Questions) != 1 {
		return nil, errors.New("not one question")
	}
	q := msg.Questions[0]
	msg.Header.Response, msg.Header.Authoritative = true, true
	if addr, ok := names[q.Name.String()]; ok && q.Type == dnsmessage.TypeA {
		msg.Answers = []dnsmessage.Resource{{
			Header: dnsmessage.ResourceHeader{Name: q.Name, Type: dnsmessage.TypeA, Class: dnsmessage.ClassINET, TTL: 1},
			Body:   &dnsmessage.AResource{A: addr.As4()},
		}}
	}
	return msg.Pack()
}
