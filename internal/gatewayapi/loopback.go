package gatewayapi

import (
	"context"
	"net"
	"net/http"
	"sync"
)

// Loopback serves a handler to clients in the same process over in-memory
// connections (net.Pipe): real HTTP, through the handler's own server, with no socket
// to guard. The gateway's dashboard calls the gateway's API through it as any client
// does, while the API still sees the browser's address (WithClientAddress), which its
// failed-login limit counts by.
type Loopback struct {
	ln  *pipeListener
	srv *http.Server
}

// NewLoopback starts serving h; Close stops it.
func NewLoopback(h http.Handler) *Loopback {
	l := &Loopback{ln: &pipeListener{conns: make(chan net.Conn), closed: make(chan struct{})}, srv: &http.Server{Handler: h}}
	go func() { _ = l.srv.Serve(l.ln) }()
	return l
}

// Close stops the loopback's server; its clients' requests then fail.
func (l *Loopback) Close() error { return l.srv.Close() }

// Client is an HTTP client whose requests, to any URL, reach the handler. Each
// request has its own connection, so that its client address is its own.
func (l *Loopback) Client() *http.Client {
	return &http.Client{Transport: &http.Transport{DialContext: l.dial, DisableKeepAlives: true}}
}

// BaseURL is the URL a Client of the loopback is given: the host is never resolved.
const BaseURL = "http://loopback"

type clientAddressKey struct{}

// WithClientAddress makes the loopback's requests made with ctx come from addr (a
// host:port, e.g. the browser's http.Request.RemoteAddr).
func WithClientAddress(ctx context.Context, addr string) context.Context {
	return context.WithValue(ctx, clientAddressKey{}, addr)
}

func (l *Loopback) dial(ctx context.Context, _, _ string) (net.Conn, error) {
	return l.ln.dial(ctx)
}

// pipeListener is the net.Listener the loopback's server serves: its connections
// are the server's ends of the pipes its clients dial.
type pipeListener struct {
	conns  chan net.Conn
	closed chan struct{}
	once   sync.Once
}

func (l *pipeListener) dial(ctx context.Context) (net.Conn, error) {
	client, server := net.Pipe()
	remote := server.RemoteAddr()
	if addr, ok := ctx.Value(clientAddressKey{}).(string); ok {
		remote = pipeAddr(addr)
	}
	select {
	case l.conns <- addrConn{Conn: server, remote: remote}:
		return client, nil
	case <-l.closed:
		return nil, net.ErrClosed
	case <-ctx.Done():
		return nil, ctx.Err()
	}
}

func (l *pipeListener) Accept() (net.Conn, error) {
	select {
	case c := <-l.conns:
		return c, nil
	case <-l.closed:
		return nil, net.ErrClosed
	}
}

func (l *pipeListener) Close() error {
	l.once.Do(func() { close(l.closed) })
	return nil
}

func (l *pipeListener) Addr() net.Addr { return pipeAddr(BaseURL) }

// addrConn is the server's end of a pipe, from the client address its dial named.
type addrConn struct {
	net.Conn
	remote net.Addr
}

func (c addrConn) RemoteAddr() net.Addr { return c.remote }

type pipeAddr string

func (a pipeAddr) Network() string { return "pipe" }
func (a pipeAddr) String() string  { return string(a) }
