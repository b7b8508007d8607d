package serviceproxy

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"os/exec"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes"
	corelisters "k8s.io/client-go/listers/core/v1"
	discoverylisters "k8s.io/client-go/listers/discovery/v1"
	"k8s.io/client-go/tools/cache"
	"k8s.io/klog/v2"
)

// Options configure a Proxy.
type Options struct {
	// Link is the network interface that carries the ClusterIP addresses: the node's
	// pod bridge, whose host address is the pods' gateway. Required.
	Link string
	// Clients is the pod network. Connections from it, from loopback and from the
	// host's own addresses are served; any other client is refused. Required.
	Clients *net.IPNet
	// APIServer, when set, makes the API server reachable from pods and publishes it
	// as the endpoint of the default/kubernetes Service.
	APIServer *APIServer
	// Resync is how often the addresses and listeners are checked besides on every
	// Service change. Default 15s.
	Resync time.Duration
	// DialTimeout bounds the connection to an endpoint. Default 5s.
	DialTimeout time.Duration
}

// Proxy serves Service ClusterIPs on this machine. Build it with New, start the
// informer factory, then Run it.
type Proxy struct {
	kube        kubernetes.Interface
	opts        Options
	services    corelisters.ServiceLister
	slices      discoverylisters.EndpointSliceLister
	synced      []cache.InformerSynced
	kick        chan struct{}
	apiEndpoint string // "ip:port" published for default/kubernetes; "" without APIServer

	// Touched only by Run's goroutine.
	listeners        map[string]*listener // by "ClusterIP:port"
	addresses        map[string]bool      // ClusterIPs added to the link
	endpointsWritten bool

	mu    sync.Mutex
	conns map[net.Conn]struct{}
	wg    sync.WaitGroup
}

// listener accepts the connections to one ClusterIP:port (or to the API server's
// advertised address) and sends each to a backend.
type listener struct {
	ln    net.Listener
	route atomic.Pointer[route] // nil: the fixed target
	fixed string                // dial this instead of a Service's endpoints
	next  atomic.Uint64
}

// New checks the options and registers the Service and EndpointSlice informers of
// factory; the caller starts the factory.
func New(kube kubernetes.Interface, factory informers.SharedInformerFactory, opts Options) (*Proxy, error) {
	if opts.Link == "" {
		return nil, errors.New("service proxy: no link to carry the ClusterIP addresses")
	}
	if opts.Clients == nil {
		return nil, errors.New("service proxy: no client network (the pod CIDR)")
	}
	if opts.Resync == 0 {
		opts.Resync = 15 * time.Second
	}
	if opts.DialTimeout == 0 {
		opts.DialTimeout = 5 * time.Second
	}
	p := &Proxy{
		kube: kube, opts: opts, kick: make(chan struct{}, 1),
		listeners: map[string]*listener{}, addresses: map[string]bool{}, conns: map[net.Conn]struct{}{},
	}
	if opts.APIServer != nil {
		ep, err := opts.APIServer.endpoint()
		if err != nil {
			return nil, err
		}
		p.apiEndpoint = ep
	}
	svcInformer := factory.Core().V1().Services()
	sliceInformer := factory.Discovery().V1().EndpointSlices()
	p.services, p.slices = svcInformer.Lister(), sliceInformer.Lister()
	p.synced = []cache.InformerSynced{svcInformer.Informer().HasSynced, sliceInformer.Informer().HasSynced}
	poke := func(any) { p.notify() }
	if _, err := svcInformer.Informer().AddEventHandler(cache.ResourceEventHandlerFuncs{
		AddFunc: poke, UpdateFunc: func(_, obj any) { p.notify() }, DeleteFunc: poke,
	}); err != nil {
		return nil, err
	}
	return p, nil
}

func (p *Proxy) notify() {
	select {
	case p.kick <- struct{}{}:
	default:
	}
}

// Run serves until ctx ends, then closes every listener and connection, removes the
// addresses it added and withdraws the API server's endpoints.
func (p *Proxy) Run(ctx context.Context) error {
	log := klog.FromContext(ctx).WithName("serviceproxy")
	if !cache.WaitForCacheSync(ctx.Done(), p.synced...) {
		return ctx.Err()
	}
	defer p.shutdown(log)
	if p.apiEndpoint != "" {
		if err := p.listen(p.apiEndpoint, p.opts.APIServer.Target); err != nil {
			return fmt.Errorf("expose the API server to pods at %s: %w", p.apiEndpoint, err)
		}
	}
	tick := time.NewTicker(p.opts.Resync)
	defer tick.Stop()
	for {
		p.reconcile(ctx, log)
		select {
		case <-ctx.Done():
			return nil
		case <-p.kick:
		case <-tick.C:
		}
	}
}

// reconcile converges the addresses and listeners to the Services, and the
// kubernetes Service's endpoints to the API server's address.
func (p *Proxy) reconcile(ctx context.Context, log klog.Logger) {
	if p.apiEndpoint != "" {
		if err := p.publishEndpoints(ctx); err != nil && ctx.Err() == nil {
			log.Error(err, "Cannot publish the API server's endpoints")
		}
	}
	services, err := p.services.List(labels.Everything())
	if err != nil {
		log.Error(err, "Cannot list Services")
		return
	}
	want := desiredRoutes(services)
	for key, l := range p.listeners {
		if _, ok := want[key]; !ok && l.fixed == "" {
			p.closeListener(key)
		}
	}
	wantIPs := map[string]bool{}
	for key := range want {
		ip, _, _ := net.SplitHostPort(key)
		wantIPs[ip] = true
	}
	for ip := range p.addresses {
		if !wantIPs[ip] {
			p.removeAddress(ip, log)
		}
	}
	for key, r := range want {
		p.ensureRoute(ctx, key, r, log)
	}
}

func (p *Proxy) ensureRoute(ctx context.Context, key string, r route, log klog.Logger) {
	if l, ok := p.listeners[key]; ok {
		l.route.Store(&r)
		return
	}
	ip, _, _ := net.SplitHostPort(key)
	if !p.addresses[ip] {
		if err := addrCmd(ctx, "replace", ip, p.opts.Link); err != nil {
			log.Error(err, "Cannot add a ClusterIP address", "address", ip, "service", r.service)
			return
		}
		p.addresses[ip] = true
	}
	if err := p.listen(key, ""); err != nil {
		log.Error(err, "Cannot listen on a ClusterIP", "address", key, "service", r.service)
		return
	}
	p.listeners[key].route.Store(&r)
	log.V(1).Info("Serving ClusterIP", "address", key, "service", r.service, "port", r.port)
}

// listen opens a listener at key; fixed, when set, is the address every connection
// goes to.
func (p *Proxy) listen(key, fixed string) error {
	ln, err := net.Listen("tcp", key)
	if err != nil {
		return err
	}
	l := &listener{ln: ln, fixed: fixed}
	p.listeners[key] = l
	p.wg.Add(1)
	go func() {
		defer p.wg.Done()
		p.accept(l)
	}()
	return nil
}

func (p *Proxy) closeListener(key string) {
	_ = p.listeners[key].ln.Close()
	delete(p.listeners, key)
}

func (p *Proxy) removeAddress(ip string, log klog.Logger) {
	if err := addrCmd(context.Background(), "del", ip, p.opts.Link); err != nil {
		log.Error(err, "Cannot remove a ClusterIP address", "address", ip)
	}
	delete(p.addresses, ip)
}

func (p *Proxy) accept(l *listener) {
	for {
		c, err := l.ln.Accept()
		if err != nil {
			return
		}
		if !p.track(c) {
			_ = c.Close()
			return
		}
		p.wg.Add(1)
		go func() {
			defer p.wg.Done()
			defer p.untrack(c)
			p.handle(c, l)
		}()
	}
}

// handle splices one client connection to a backend; a client from outside the
// pod network and the host, or a Service without a ready endpoint, gets the
// connection closed.
func (p *Proxy) handle(c net.Conn, l *listener) {
	if !p.allowed(c) {
		return
	}
	target := l.fixed
	if target == "" {
		target = p.pick(l)
	}
	if target == "" {
		return
	}
	if target == p.apiEndpoint {
		target = p.opts.APIServer.Target // skip a hop through our own listener
	}
	up, err := net.DialTimeout("tcp", target, p.opts.DialTimeout)
	if err != nil {
		return
	}
	if !p.track(up) {
		_ = up.Close()
		return
	}
	defer p.untrack(up)
	splice(c, up)
}

// pick chooses the next ready endpoint of the listener's Service port, round-robin.
func (p *Proxy) pick(l *listener) string {
	r := l.route.Load()
	if r == nil {
		return ""
	}
	sel := labels.SelectorFromSet(labels.Set{"kubernetes.io/service-name": r.service.Name})
	eps, err := p.slices.EndpointSlices(r.service.Namespace).List(sel)
	if err != nil {
		return ""
	}
	backends := readyBackends(r.port, eps)
	if len(backends) == 0 {
		return ""
	}
	return backends[l.next.Add(1)%uint64(len(backends))]
}

// allowed serves loopback, the pod network and the host itself (a host process
// connecting to a ClusterIP comes from that same local address).
func (p *Proxy) allowed(c net.Conn) bool {
	remote, ok1 := c.RemoteAddr().(*net.TCPAddr)
	local, ok2 := c.LocalAddr().(*net.TCPAddr)
	if !ok1 || !ok2 {
		return false
	}
	return remote.IP.IsLoopback() || p.opts.Clients.Contains(remote.IP) || remote.IP.Equal(local.IP)
}

// track records an open connection so shutdown can close it; false once shut down.
func (p *Proxy) track(c net.Conn) bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.conns == nil {
		return false
	}
	p.conns[c] = struct{}{}
	return true
}

func (p *Proxy) untrack(c net.Conn) {
	_ = c.Close()
	p.mu.Lock()
	defer p.mu.Unlock()
	delete(p.conns, c)
}

func (p *Proxy) shutdown(log klog.Logger) {
	for key := range p.listeners {
		p.closeListener(key)
	}
	p.mu.Lock()
	for c := range p.conns {
		_ = c.Close()
	}
	p.conns = nil
	p.mu.Unlock()
	p.wg.Wait()
	for ip := range p.addresses {
		p.removeAddress(ip, log)
	}
	if p.apiEndpoint != "" {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		if err := p.withdrawEndpoints(ctx); err != nil {
			log.V(1).Info("Cannot withdraw the API server's endpoints", "err", err)
		}
	}
}

// splice copies both ways until both sides are done, passing on half-closes.
func splice(a, b net.Conn) {
	var wg sync.WaitGroup
	cp := func(dst, src net.Conn) {
		defer wg.Done()
		_, _ = io.Copy(dst, src)
		if cw, ok := dst.(interface{ CloseWrite() error }); ok {
			_ = cw.CloseWrite()
			return
		}
		_ = dst.Close()
	}
	wg.Add(2)
	go cp(a, b)
	go cp(b, a)
	wg.Wait()
}

// addrCmd adds ("replace") or removes ("del") ip/32 on link.
func addrCmd(ctx context.Context, verb, ip, link string) error {
	args := []string{"addr", verb, ip + "/32", "dev", link}
	out, err := exec.CommandContext(ctx, "ip", args...).CombinedOutput()
	if err != nil {
		return fmt.Errorf("ip %s: %w: %s", strings.Join(args, " "), err, strings.TrimSpace(string(out)))
	}
	return nil
}
