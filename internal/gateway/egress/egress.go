package egress

import (
	"cmp"
	"context"
	"fmt"
	"net"
	"net/http"
	"net/netip"
	"strconv"
	"strings"
	"syscall"
	"time"
)

// Default timeouts of a client.
const (
	// DefaultTimeout bounds a whole request, the reading of its answer included.
	DefaultTimeout = 15 * time.Second
	// dialTimeout bounds one connection attempt.
	dialTimeout = 10 * time.Second
)

// Destination is a host:port a Policy names, and what it is, for errors.
type Destination struct {
	// Address is host:port. The host is an IP address; empty or unspecified (0.0.0.0,
	// ::) for every address on the port; or a name, which matches a request that names
	// it, as written (the name is not resolved: list its addresses to match them under
	// any name).
	Address string
	// What the destination is, e.g. "the Kubernetes API server".
	What string
}

// Policy says where a client may connect.
type Policy struct {
	// Purpose names the feature in errors, e.g. `"try it"`.
	Purpose string
	// Allow are destinations (host:port, as Destination.Address) connected to although
	// their address is refused otherwise: the ingress on a loopback address.
	Allow []string
	// Deny are destinations refused although their address is allowed otherwise: the
	// ports of the platform's control plane.
	Deny []Destination
	// Timeout bounds a whole request, the reading of its answer included. Default
	// DefaultTimeout.
	Timeout time.Duration
	// Resolver resolves names; nil is the default resolver.
	Resolver *net.Resolver
}

// RefusedError is a connection a Policy refused: the address (IP and port, as
// resolved) and why.
type RefusedError struct {
	Address string
	Reason  string
}

func (e *RefusedError) Error() string {
	return "refusing to connect to " + e.Address + ": " + e.Reason
}

// New is an HTTP client that connects only where p allows, follows no redirect (a 3xx
// is returned as it came; its body is the caller's to read, and to bound) and uses no
// proxy. An entry of p that does not parse is an error.
func New(p Policy) (*http.Client, error) {
	c, err := compile(p)
	if err != nil {
		return nil, err
	}
	transport := &http.Transport{
		Proxy:                 nil,
		DialContext:           c.dial,
		TLSHandshakeTimeout:   dialTimeout,
		MaxIdleConns:          16,
		IdleConnTimeout:       90 * time.Second,
		ExpectContinueTimeout: time.Second,
	}
	return &http.Client{
		Transport:     transport,
		Timeout:       cmp.Or(p.Timeout, DefaultTimeout),
		CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse },
	}, nil
}

// checker is a compiled Policy.
type checker struct {
	purpose  string
	allow    []rule
	deny     []rule
	resolver *net.Resolver
}

func compile(p Policy) (*checker, error) {
	c := &checker{purpose: cmp.Or(p.Purpose, "this request"), resolver: p.Resolver}
	for _, a := range p.Allow {
		r, err := parseRule(a, "")
		if err != nil {
			return nil, fmt.Errorf("egress: allowed destination %w", err)
		}
		c.allow = append(c.allow, r)
	}
	for _, d := range p.Deny {
		r, err := parseRule(d.Address, d.What)
		if err != nil {
			return nil, fmt.Errorf("egress: denied destination %w", err)
		}
		c.deny = append(c.deny, r)
	}
	return c, nil
}

// dial connects to addr (host:port, as the request names it), checking each address
// it resolves to just before connecting to it.
func (c *checker) dial(ctx context.Context, network, addr string) (net.Conn, error) {
	d := net.Dialer{
		Timeout:   dialTimeout,
		KeepAlive: 30 * time.Second,
		Resolver:  c.resolver,
		ControlContext: func(_ context.Context, _, address string, _ syscall.RawConn) error {
			return c.check(addr, address)
		},
	}
	return d.DialContext(ctx, network, addr)
}

// check refuses a connection to address (the resolved IP and port) of a request to
// requested (host:port, as the request names it), unless it is allowed.
func (c *checker) check(requested, address string) error {
	ap, err := netip.ParseAddrPort(address)
	if err != nil {
		return &RefusedError{Address: address, Reason: "not an IP address and port"}
	}
	ap = netip.AddrPortFrom(ap.Addr().Unmap().WithZone(""), ap.Port())
	for _, r := range c.allow {
		if r.matches(requested, ap) {
			return nil
		}
	}
	for _, r := range c.deny {
		if r.matches(requested, ap) {
			return &RefusedError{Address: address, Reason: fmt.Sprintf("%s is not reachable from %s", cmp.Or(r.what, "a denied destination"), c.purpose)}
		}
	}
	if reason := refusedClass(ap.Addr()); reason != "" {
		return &RefusedError{Address: address, Reason: fmt.Sprintf("%s are not reachable from %s", reason, c.purpose)}
	}
	return nil
}

// refusedClass names the kind of a refused address (unmapped), "" for another.
func refusedClass(a netip.Addr) string {
	switch {
	case a.IsLoopback():
		return "loopback addresses"
	case a.IsUnspecified():
		return "unspecified addresses (they reach this host)"
	case a.IsLinkLocalUnicast():
		return "link-local addresses (cloud metadata services among them)"
	case a.IsMulticast():
		return "multicast addresses"
	}
	return ""
}

// rule is one destination of a Policy.
type rule struct {
	anyAddr bool       // every address on port
	addr    netip.Addr // when not anyAddr and name is ""
	name    string     // a host name, lower case, without a final dot
	port    uint16
	what    string
}

func parseRule(address, what string) (rule, error) {
	host, portText, err := net.SplitHostPort(address)
	if err != nil {
		return rule{}, fmt.Errorf("%q: %w", address, err)
	}
	port, err := strconv.ParseUint(portText, 10, 16)
	if err != nil {
		return rule{}, fmt.Errorf("%q: the port is not a number from 0 to 65535", address)
	}
	r := rule{port: uint16(port), what: what}
	if host == "" {
		r.anyAddr = true
		return r, nil
	}
	if a, err := netip.ParseAddr(host); err == nil {
		r.addr = a.Unmap().WithZone("")
		r.anyAddr = r.addr.IsUnspecified()
		return r, nil
	}
	r.name = normalName(host)
	return r, nil
}

// matches reports whether a connection to ap, for a request to requested (host:port
// as the request names it), is r's destination.
func (r rule) matches(requested string, ap netip.AddrPort) bool {
	if ap.Port() != r.port {
		return false
	}
	switch {
	case r.anyAddr:
		return true
	case r.name != "":
		host, _, err := net.SplitHostPort(requested)
		return err == nil && normalName(host) == r.name
	}
	return ap.Addr() == r.addr
}

func normalName(host string) string { return strings.TrimSuffix(strings.ToLower(host), ".") }
