package gateway

import (
	"context"
	"errors"
	"net"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	discoveryv1 "k8s.io/api/discovery/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/cache"

	"github.com/metalambda/metalambda/internal/gatewayapi"
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
	token, _ := strings.CutPrefix(r.Header.Get("Authorization"), "Bearer ")
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
// returns the addresses of its endpoints at the port named port, except self
// (this replica's address), as Peers. Endpoints that are not ready are kept:
// a replica that is shutting down still holds the calls it recorded. run
// watches until ctx ends; Peers is empty until the first list.
func EndpointPeers(kube kubernetes.Interface, namespace, service, port, self string) (peers Peers, run func(ctx context.Context), err error) {
	if namespace == "" || service == "" || port == "" {
		return nil, nil, errors.New("peers: a Service's namespace, name and port name are needed")
	}
	factory := informers.NewSharedInformerFactoryWithOptions(kube, 10*time.Minute, informers.WithNamespace(namespace),
		informers.WithTweakListOptions(func(o *metav1.ListOptions) { o.LabelSelector = discoveryv1.LabelServiceName + "=" + service }))
	informer := factory.Discovery().V1().EndpointSlices()
	lister := informer.Lister()
	informer.Informer() // registered before Start
	peers = func() []string {
		slicesOf, err := lister.List(labels.Everything())
		if err != nil {
			return nil
		}
		return endpointURLs(slicesOf, port, self)
	}
	run = func(ctx context.Context) {
		factory.Start(ctx.Done())
		cache.WaitForCacheSync(ctx.Done(), informer.Informer().HasSynced)
		<-ctx.Done()
		factory.Shutdown()
	}
	return peers, run, nil
}

// endpointURLs are the http URLs of the endpoints of slices at the port named
// port, without self and without duplicates, sorted.
func endpointURLs(endpointSlices []*discoveryv1.EndpointSlice, port, self string) []string {
	var urls []string
	for _, s := range endpointSlices {
		number := int32(0)
		for _, p := range s.Ports {
			if p.Name != nil && *p.Name == port && p.Port != nil {
				number = *p.Port
			}
		}
		if number == 0 {
			continue
		}
		for _, ep := range s.Endpoints {
			if len(ep.Addresses) == 0 || ep.Addresses[0] == self {
				continue
			}
			urls = append(urls, "http://"+net.JoinHostPort(ep.Addresses[0], strconv.Itoa(int(number))))
		}
	}
	slices.Sort(urls)
	return slices.Compact(urls)
}
