package hook

import (
	"cmp"
	"errors"
	"hash/fnv"
	"io"
	"net/http"
	"slices"
	"strings"
	"syscall"
)

// Sharded sends hook calls to a gateway's Service straight to one of its replicas,
// so that the calls of one Function go to the same one or two replicas and each
// replica keeps warm only its share of the workers (as a sharded isolate service
// routes each script to the machines that hold it). Rendezvous hashing ranks the
// Service's ready endpoints for each Function: a call goes to the first, and to the
// second when the first cannot be connected to or its connection ends before it
// answers; a replica that comes or goes moves
// only the Functions it ranks first. With no endpoint known, or when neither
// could be connected to, the call goes to the Service's address as written, as it
// would without Sharded.
//
// Only plain-HTTP calls of a Function's hook path (/hooks/NAMESPACE/NAME) on the
// Service's host are routed; the request keeps its Host header, so a token for the
// Service's host (TokenForHosts, which runs first) still goes with it.
type Sharded struct {
	// Service is the gateway's Service, "name.namespace"; its longer DNS names
	// ("name.namespace.svc", "name.namespace.svc.cluster.local") match too.
	Service string
	// Endpoints returns the "ip:port" addresses of the Service's ready endpoints
	// at the hooks' port.
	Endpoints func() []string
	// Next sends the requests; nil means the client Client uses by default.
	Next Doer
}

// shardCandidates is how many replicas, best ranked first, a call tries.
const shardCandidates = 2

// Do sends req to the replica its Function ranks first, then second, then to the
// Service.
func (s Sharded) Do(req *http.Request) (*http.Response, error) {
	next := s.Next
	if next == nil {
		next = sharedHTTP
	}
	function, ok := s.function(req)
	if !ok || s.Endpoints == nil || req.GetBody == nil && req.Body != nil && req.Body != http.NoBody {
		return next.Do(req) // a body it could not send twice goes once, as written
	}
	for _, addr := range Rank(function, s.Endpoints(), shardCandidates) {
		direct, err := redirected(req, addr)
		if err != nil {
			return nil, err
		}
		resp, err := next.Do(direct)
		if err == nil || !(notConnected(err) || lostBeforeAnswer(err)) || req.Context().Err() != nil {
			return resp, err
		}
	}
	again, err := redirected(req, "")
	if err != nil {
		return nil, err
	}
	return next.Do(again)
}

// lostBeforeAnswer reports whether err is a connection that ended before any answer
// came: the replica went away mid-call (a crash, a node lost). The call goes to the
// next replica at once, which is what the sync's retry would do after a back-off: a
// Function's answer reaches only the engine, which acts on nothing but the answer,
// and a sync hook is called again after a failure in any case.
func lostBeforeAnswer(err error) bool {
	return errors.Is(err, io.EOF) || errors.Is(err, io.ErrUnexpectedEOF) ||
		errors.Is(err, syscall.ECONNRESET) || errors.Is(err, syscall.EPIPE)
}

// function is the "namespace/name" of the Function req calls, when req is a
// plain-HTTP call of a hook path on the Service's host.
func (s Sharded) function(req *http.Request) (string, bool) {
	if req.URL.Scheme != "http" || s.Service == "" {
		return "", false
	}
	host := req.URL.Hostname()
	if !strings.EqualFold(host, s.Service) && !serviceName(s.Service, host) {
		return "", false
	}
	rest, ok := strings.CutPrefix(req.URL.Path, "/hooks/")
	if !ok {
		return "", false
	}
	ns, name, ok := strings.Cut(rest, "/")
	if !ok || ns == "" || name == "" || strings.Contains(name, "/") {
		return "", false
	}
	return ns + "/" + name, true
}

// redirected is a copy of req, with a fresh body, sent to addr ("ip:port") but
// naming the original host; addr "" keeps the original address.
func redirected(req *http.Request, addr string) (*http.Request, error) {
	out := req.Clone(req.Context())
	if req.GetBody != nil {
		body, err := req.GetBody()
		if err != nil {
			return nil, err
		}
		out.Body = body
	}
	if addr != "" {
		out.Host = cmp.Or(req.Host, req.URL.Host)
		out.URL.Host = addr
	}
	return out, nil
}

// Rank returns at most n of addrs, best first, for key by rendezvous (highest
// random weight) hashing: each address's weight is a hash of the key and the
// address, the same in every process, so every engine ranks alike.
func Rank(key string, addrs []string, n int) []string {
	type scored struct {
		addr  string
		score uint64
	}
	all := make([]scored, 0, len(addrs))
	for _, a := range addrs {
		all = append(all, scored{a, weight(key, a)})
	}
	slices.SortFunc(all, func(x, y scored) int { return cmp.Or(cmp.Compare(y.score, x.score), strings.Compare(x.addr, y.addr)) })
	out := make([]string, 0, min(n, len(all)))
	for _, s := range all[:min(n, len(all))] {
		out = append(out, s.addr)
	}
	return out
}

// weight is FNV-1a of key, a zero byte and addr, mixed by splitmix64's finalizer
// (FNV alone spreads similar inputs, such as addresses one apart, unevenly).
func weight(key, addr string) uint64 {
	h := fnv.New64a()
	_, _ = io.WriteString(h, key)
	_, _ = h.Write([]byte{0})
	_, _ = io.WriteString(h, addr)
	z := h.Sum64()
	z = (z ^ z>>30) * 0xbf58476d1ce4e5b9
	z = (z ^ z>>27) * 0x94d049bb133111eb
	return z ^ z>>31
}
