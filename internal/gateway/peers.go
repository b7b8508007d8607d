package gateway

import (
	"context"
	"errors"
	"net"
	"net/http"
	"slices"
	"sync"
	"time"

	"k8s.io/client-go/kubernetes"

	"github.com/metalambda/metalambda/internal/endpoints"
	"github.com/metalambda/metalambda/internal/gatewayapi"
	"github.com/metalambda/metalambda/internal/httpapi"
)

// Replicas of a gateway share nothing but the API server: each records the
// calls it served. A list of a function's invocations, and a replay (which runs
// on recorded calls), asks the other replicas for theirs and merges them, so
// that they show the function's latest calls wherever they ran. A replica that
// does not answer leaves its calls out, and the answer names it.

// Peers returns the base URLs of the other replicas' APIs (http://ip:port).
type Peers func() []string

// localParam asks a replica for the calls it recorded itself (what peers ask).
const localParam = "local"

// peerTimeout bounds a replica's answer.
const peerTimeout = 3 * time.Second

// peerHTTP calls other replicas: no proxy from the environment, no redirects.
var peerHTTP = &http.Client{
	Timeout:       peerTimeout,
	Transport:     &http.Transport{Proxy: nil, MaxIdleConnsPerHost: 4, IdleConnTimeout: 90 * time.Second},
	CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse },
}

// recorded returns the function's recorded calls, newest first, at most
// Options.History of them: this replica's, merged with every peer's unless r
// asks for this replica's alone. unreachable names the peers that did not
// answer. A peer gets the caller's own bearer token and checks it as any
// request's.
func (g *Gateway) recorded(r *http.Request, ns, name string, e *entry) (items []Invocation, unreachable []string) {
	items = e.history.list()
	if g.opts.Peers == nil || r.URL.Query().Get(localParam) != "" {
		return items, nil
	}
	peers := g.opts.Peers()
	if len(peers) == 0 {
		return items, nil
	}
	token, _ := httpapi.Bearer(r) // as the caller was authenticated: "bearer", spaces
	var mu sync.Mutex
	var wg sync.WaitGroup
	for _, peer := range peers {
		wg.Go(func() {
			c := &gatewayapi.Client{BaseURL: peer, Token: token, HTTP: peerHTTP}
			list, err := c.LocalInvocations(r.Context(), ns, name)
			mu.Lock()
			defer mu.Unlock()
			if err != nil {
				unreachable = append(unreachable, peer+": "+err.Error())
				return
			}
			items = append(items, list.Items...)
		})
	}
	wg.Wait()
	slices.SortStableFunc(items, func(a, b Invocation) int { return b.Time.Compare(a.Time) })
	if len(items) > g.opts.History {
		items = items[:g.opts.History]
	}
	slices.Sort(unreachable)
	return items, unreachable
}

// EndpointPeers follows the EndpointSlices of the Service namespace/service and
// returns, as Peers, the URLs of its endpoints at the port named port, except
// self (this replica's address). Endpoints that are not ready are kept: a
// replica that is shutting down still holds the calls it recorded. run watches
// until ctx ends; Peers is empty until the first list.
func EndpointPeers(kube kubernetes.Interface, namespace, service, port, self string) (peers Peers, run func(ctx context.Context), err error) {
	if port == "" {
		return nil, nil, errors.New("peers: the name of the Service's port is needed")
	}
	svc, err := endpoints.Watch(kube, namespace, service)
	if err != nil {
		return nil, nil, err
	}
	peers = func() []string {
		var urls []string
		for _, addr := range svc.Addresses(port, false) {
			if host, _, _ := net.SplitHostPort(addr); host != self {
				urls = append(urls, "http://"+addr)
			}
		}
		return urls
	}
	return peers, svc.Run, nil
}
