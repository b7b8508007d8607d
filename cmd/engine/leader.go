package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"net/http"
	"os"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/uuid"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/leaderelection"
	"k8s.io/client-go/tools/leaderelection/resourcelock"
	"k8s.io/klog/v2"
)

// inClusterNamespaceFile holds the namespace of the pod the engine runs in.
const inClusterNamespaceFile = "/var/run/secrets/kubernetes.io/serviceaccount/namespace"

// leaderOptions are the --leader-election* settings. Defaults: upstream's flags, and
// controller-runtime's timings.
type leaderOptions struct {
	enabled       bool
	resourceLock  string
	namespace     string
	id            string
	leaseDuration time.Duration
	renewDeadline time.Duration
	retryPeriod   time.Duration
	// namespaceFile is read when namespace is empty.
	namespaceFile string
}

func defaultLeaderOptions() leaderOptions {
	return leaderOptions{
		resourceLock:  resourcelock.LeasesResourceLock,
		id:            "metacontroller",
		leaseDuration: 15 * time.Second,
		renewDeadline: 10 * time.Second,
		retryPeriod:   2 * time.Second,
		namespaceFile: inClusterNamespaceFile,
	}
}

func (o *leaderOptions) bindFlags(fs *flag.FlagSet) {
	fs.BoolVar(&o.enabled, "leader-election", o.enabled, "Run controllers only while this instance holds a Lease, so that several replicas can run (active/standby).")
	fs.StringVar(&o.resourceLock, "leader-election-resource-lock", o.resourceLock, "Kind of lock object; only \"leases\" (coordination.k8s.io) is supported.")
	fs.StringVar(&o.namespace, "leader-election-namespace", o.namespace, "Namespace of the Lease; required outside a cluster, default the pod's own namespace inside one.")
	fs.StringVar(&o.id, "leader-election-id", o.id, "Name of the Lease.")
	fs.DurationVar(&o.leaseDuration, "leader-election-lease-duration", o.leaseDuration, "How long a follower waits, without seeing the lease renewed, before it takes over.")
	fs.DurationVar(&o.renewDeadline, "leader-election-renew-deadline", o.renewDeadline, "How long the leader keeps retrying to renew its lease before it stops its controllers and exits.")
	fs.DurationVar(&o.retryPeriod, "leader-election-retry-period", o.retryPeriod, "How often the lease is renewed, or its acquisition tried.")
}

// validate checks the settings and fills in the namespace of an in-cluster engine.
func (o *leaderOptions) validate() error {
	if o.resourceLock != resourcelock.LeasesResourceLock {
		return fmt.Errorf("--leader-election-resource-lock %q is not supported: the only lock is %q (coordination.k8s.io Lease)", o.resourceLock, resourcelock.LeasesResourceLock)
	}
	if !o.enabled {
		return nil
	}
	if o.id == "" {
		return errors.New("--leader-election-id must not be empty")
	}
	if o.retryPeriod <= 0 || float64(o.renewDeadline) <= leaderelection.JitterFactor*float64(o.retryPeriod) || o.leaseDuration <= o.renewDeadline {
		return fmt.Errorf("leader election timings must satisfy lease duration (%s) > renew deadline (%s) > %.1f × retry period (%s) > 0",
			o.leaseDuration, o.renewDeadline, leaderelection.JitterFactor, o.retryPeriod)
	}
	if o.namespace != "" {
		return nil
	}
	data, err := os.ReadFile(o.namespaceFile)
	if errors.Is(err, os.ErrNotExist) {
		return fmt.Errorf("--leader-election-namespace is required when running outside a cluster (%s does not exist)", o.namespaceFile)
	}
	if err != nil {
		return fmt.Errorf("read the pod's namespace for --leader-election-namespace: %w", err)
	}
	if o.namespace = strings.TrimSpace(string(data)); o.namespace == "" {
		return fmt.Errorf("--leader-election-namespace is not set and %s is empty", o.namespaceFile)
	}
	return nil
}

// leader runs work only while this instance holds the Lease.
type leader struct {
	identity string
	opts     leaderOptions
	lock     *renewalLock
	elector  *leaderelection.LeaderElector

	started chan struct{} // closed once this instance leads
}

// newLeader prepares leader election with its own client, so that the engine's rate
// limit never delays a renewal. The elector's status is counted in reg.
func newLeader(cfg *rest.Config, o leaderOptions, reg prometheus.Registerer) (*leader, error) {
	kube, err := kubernetes.NewForConfig(rest.CopyConfig(cfg))
	if err != nil {
		return nil, err
	}
	host, err := os.Hostname()
	if err != nil {
		return nil, fmt.Errorf("leader election identity: %w", err)
	}
	identity := host + "_" + string(uuid.NewUUID())
	registerLeaderMetrics(reg)
	return newLeaderWithLock(&resourcelock.LeaseLock{
		LeaseMeta:  metav1.ObjectMeta{Namespace: o.namespace, Name: o.id},
		Client:     kube.CoordinationV1(),
		LockConfig: resourcelock.ResourceLockConfig{Identity: identity},
	}, o)
}

func newLeaderWithLock(lock resourcelock.Interface, o leaderOptions) (*leader, error) {
	l := &leader{identity: lock.Identity(), opts: o, lock: &renewalLock{Interface: lock}, started: make(chan struct{})}
	var err error
	l.elector, err = leaderelection.NewLeaderElector(leaderelection.LeaderElectionConfig{
		Lock:            l.lock,
		Name:            o.id,
		LeaseDuration:   o.leaseDuration,
		RenewDeadline:   o.renewDeadline,
		RetryPeriod:     o.retryPeriod,
		ReleaseOnCancel: true,
		Callbacks: leaderelection.LeaderCallbacks{
			OnStartedLeading: func(context.Context) { close(l.started) },
			OnStoppedLeading: func() {},
			OnNewLeader: func(identity string) {
				klog.InfoS("Leader observed", "lease", o.namespace+"/"+o.id, "leader", identity, "self", identity == l.identity)
			},
		},
	})
	return l, err
}

// errLeaseLost ends an engine that stopped leading; its pod restarts as a follower.
var errLeaseLost = errors.New("leader election lost")

// run campaigns for the Lease and runs work while this instance holds it.
//
// When ctx ends (SIGTERM), work stops first and the Lease is released after, so a
// follower takes over at once and never overlaps with this instance. When the Lease
// cannot be renewed within the renew deadline, work is cancelled and run returns
// errLeaseLost at once, before a follower may take over (a lease duration after the
// last renewal): the caller exits the process rather than wait for in-flight work.
func (l *leader) run(ctx context.Context, work func(context.Context) error) error {
	log := klog.FromContext(ctx)
	log.Info("Campaigning for leadership", "lease", l.opts.namespace+"/"+l.opts.id, "identity", l.identity,
		"leaseDuration", l.opts.leaseDuration, "renewDeadline", l.opts.renewDeadline, "retryPeriod", l.opts.retryPeriod)
	// The election outlives ctx: the Lease is released only after work has stopped.
	electCtx, stopElecting := context.WithCancel(context.WithoutCancel(ctx))
	defer stopElecting()
	electionDone := make(chan struct{})
	go func() {
		defer close(electionDone)
		l.elector.Run(electCtx)
	}()
	workCtx, stopWork := context.WithCancel(ctx)
	defer stopWork()
	select {
	case <-ctx.Done():
		return l.shutdown(nil, stopWork, stopElecting, electionDone)
	case <-l.started:
	}
	log.Info("Leading: starting controllers", "identity", l.identity)
	workDone := make(chan error, 1)
	go func() { workDone <- work(workCtx) }()
	lost := l.watchRenewals(workCtx)
	select {
	case <-ctx.Done():
		return l.shutdown(workDone, stopWork, stopElecting, electionDone)
	case err := <-workDone:
		// The engine ended on its own: hand the Lease over, then report why.
		stopElecting()
		<-electionDone
		return errors.Join(errors.New("engine stopped while leading"), err)
	case <-electionDone:
		return fmt.Errorf("%w: lease %s/%s could not be renewed", errLeaseLost, l.opts.namespace, l.opts.id)
	case <-lost:
		return fmt.Errorf("%w: lease %s/%s not renewed within %s", errLeaseLost, l.opts.namespace, l.opts.id, l.opts.renewDeadline)
	}
}

// shutdown stops work and waits for it (workDone is nil when it never started), then
// releases the Lease.
func (l *leader) shutdown(workDone <-chan error, stopWork, stopElecting context.CancelFunc, electionDone <-chan struct{}) error {
	stopWork()
	var err error
	if workDone != nil {
		if err = <-workDone; errors.Is(err, context.Canceled) {
			err = nil
		}
	}
	stopElecting()
	<-electionDone
	klog.InfoS("Leader election stopped; lease released if held", "identity", l.identity)
	return err
}

// watchRenewals closes the returned channel, and cancels nothing itself, once the
// Lease has gone unrenewed for the renew deadline. The elector notices the same a
// little later, and then still tries to release the Lease before it returns; work
// must not go on meanwhile.
func (l *leader) watchRenewals(ctx context.Context) <-chan struct{} {
	lost := make(chan struct{})
	go func() {
		tick := time.NewTicker(l.opts.retryPeriod / 2)
		defer tick.Stop()
		for {
			select {
			case <-ctx.Done():
				return
			case <-tick.C:
			}
			if time.Since(l.lock.lastRenewal()) > l.opts.renewDeadline {
				close(lost)
				return
			}
		}
	}()
	return lost
}

// leading reports whether this instance holds the Lease and runs its controllers.
func (l *leader) leading() bool {
	select {
	case <-l.started:
		return l.elector.IsLeader()
	default:
		return false
	}
}

// readyz answers 200 on a follower, which must not hold back a rollout, and names
// the leader; on the leader, or without leader election, it is 200 once the
// engine's caches are synced.
func readyz(ready func() bool, l *leader) http.HandlerFunc {
	return func(w http.ResponseWriter, _ *http.Request) {
		if l != nil && !l.leading() {
			holder := l.elector.GetLeader()
			if holder == "" {
				holder = "(none yet)"
			}
			fmt.Fprintf(w, "ok: follower\nidentity: %s\nleader: %s\n", l.identity, holder)
			return
		}
		if !ready() {
			http.Error(w, "caches not synced", http.StatusServiceUnavailable)
			return
		}
		if l != nil {
			fmt.Fprintf(w, "ok: leader\nidentity: %s\nleader: %s\n", l.identity, l.identity)
			return
		}
		fmt.Fprintln(w, "ok")
	}
}

// renewalLock remembers when this instance last wrote its own record to the Lease.
type renewalLock struct {
	resourcelock.Interface
	renewed atomic.Int64 // unix nanoseconds
}

func (l *renewalLock) Create(ctx context.Context, rec resourcelock.LeaderElectionRecord) error {
	err := l.Interface.Create(ctx, rec)
	l.note(rec, err)
	return err
}

func (l *renewalLock) Update(ctx context.Context, rec resourcelock.LeaderElectionRecord) error {
	err := l.Interface.Update(ctx, rec)
	l.note(rec, err)
	return err
}

func (l *renewalLock) note(rec resourcelock.LeaderElectionRecord, err error) {
	if err == nil && rec.HolderIdentity == l.Identity() {
		l.renewed.Store(time.Now().UnixNano())
	}
}

func (l *renewalLock) lastRenewal() time.Time { return time.Unix(0, l.renewed.Load()) }

// Leader election metrics, as controller-runtime exposes them. client-go takes one
// metrics provider for the whole process, so these series are process-wide too.
var (
	leaderStatus = prometheus.NewGaugeVec(prometheus.GaugeOpts{
		Name: "leader_election_master_status",
		Help: "1 while this instance holds the lease of the given name, else 0.",
	}, []string{"name"})
	leaderSlowpath = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "leader_election_slowpath_total",
		Help: "Lease renewals that had to read the lease first (the fast path failed).",
	}, []string{"name"})
	leaderProviderOnce sync.Once
)

type leaderMetricsProvider struct{}

func (leaderMetricsProvider) NewLeaderMetric() leaderelection.LeaderMetric { return leaderMetric{} }

type leaderMetric struct{}

func (leaderMetric) On(name string)                { leaderStatus.WithLabelValues(name).Set(1) }
func (leaderMetric) Off(name string)               { leaderStatus.WithLabelValues(name).Set(0) }
func (leaderMetric) SlowpathExercised(name string) { leaderSlowpath.WithLabelValues(name).Inc() }

func registerLeaderMetrics(reg prometheus.Registerer) {
	leaderProviderOnce.Do(func() { leaderelection.SetProvider(leaderMetricsProvider{}) })
	if reg != nil {
		reg.MustRegister(leaderStatus, leaderSlowpath)
	}
}
