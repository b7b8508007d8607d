// Package leader is the engine's leader election: upstream Metacontroller's
// --leader-election* flags, a coordination.k8s.io Lease campaigned for with
// client-go's elector, work that runs only while this instance holds the Lease and
// stops before a follower may take over, the /readyz answer of a leader and a
// follower, controller-runtime's leader election metrics, and the EndpointSlice by
// which the leader serves the engine's API behind a Service (endpoint.go).
package leader

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

// Options are the --leader-election* settings. Start from Defaults: upstream's
// flags, and controller-runtime's timings.
type Options struct {
	Enabled       bool
	ResourceLock  string
	Namespace     string
	ID            string
	LeaseDuration time.Duration
	RenewDeadline time.Duration
	RetryPeriod   time.Duration
	// NamespaceFile is read when Namespace is empty.
	NamespaceFile string
}

// Defaults are the options without flags: leader election off.
func Defaults() Options {
	return Options{
		ResourceLock:  resourcelock.LeasesResourceLock,
		ID:            "metacontroller",
		LeaseDuration: 15 * time.Second,
		RenewDeadline: 10 * time.Second,
		RetryPeriod:   2 * time.Second,
		NamespaceFile: inClusterNamespaceFile,
	}
}

// BindFlags adds the --leader-election* flags to fs.
func (o *Options) BindFlags(fs *flag.FlagSet) {
	fs.BoolVar(&o.Enabled, "leader-election", o.Enabled, "Run controllers only while this instance holds a Lease, so that several replicas can run (active/standby).")
	fs.StringVar(&o.ResourceLock, "leader-election-resource-lock", o.ResourceLock, "Kind of lock object; only \"leases\" (coordination.k8s.io) is supported.")
	fs.StringVar(&o.Namespace, "leader-election-namespace", o.Namespace, "Namespace of the Lease; required outside a cluster, default the pod's own namespace inside one.")
	fs.StringVar(&o.ID, "leader-election-id", o.ID, "Name of the Lease.")
	fs.DurationVar(&o.LeaseDuration, "leader-election-lease-duration", o.LeaseDuration, "How long a follower waits, without seeing the lease renewed, before it takes over.")
	fs.DurationVar(&o.RenewDeadline, "leader-election-renew-deadline", o.RenewDeadline, "How long the leader keeps retrying to renew its lease before it stops its controllers and exits.")
	fs.DurationVar(&o.RetryPeriod, "leader-election-retry-period", o.RetryPeriod, "How often the lease is renewed, or its acquisition tried.")
}

// Validate checks the settings and fills in the namespace of an in-cluster engine.
func (o *Options) Validate() error {
	if o.ResourceLock != resourcelock.LeasesResourceLock {
		return fmt.Errorf("--leader-election-resource-lock %q is not supported: the only lock is %q (coordination.k8s.io Lease)", o.ResourceLock, resourcelock.LeasesResourceLock)
	}
	if !o.Enabled {
		return nil
	}
	if o.ID == "" {
		return errors.New("--leader-election-id must not be empty")
	}
	if o.RetryPeriod <= 0 || float64(o.RenewDeadline) <= leaderelection.JitterFactor*float64(o.RetryPeriod) || o.LeaseDuration <= o.RenewDeadline {
		return fmt.Errorf("leader election timings must satisfy lease duration (%s) > renew deadline (%s) > %.1f × retry period (%s) > 0",
			o.LeaseDuration, o.RenewDeadline, leaderelection.JitterFactor, o.RetryPeriod)
	}
	if o.Namespace != "" {
		return nil
	}
	data, err := os.ReadFile(o.NamespaceFile)
	if errors.Is(err, os.ErrNotExist) {
		return fmt.Errorf("--leader-election-namespace is required when running outside a cluster (%s does not exist)", o.NamespaceFile)
	}
	if err != nil {
		return fmt.Errorf("read the pod's namespace for --leader-election-namespace: %w", err)
	}
	if o.Namespace = strings.TrimSpace(string(data)); o.Namespace == "" {
		return fmt.Errorf("--leader-election-namespace is not set and %s is empty", o.NamespaceFile)
	}
	return nil
}

// Elector runs work only while this instance holds the Lease.
type Elector struct {
	identity string
	opts     Options
	lock     *renewalLock
	elector  *leaderelection.LeaderElector

	started chan struct{} // closed once this instance leads
}

// New prepares leader election with its own client, so that the engine's rate limit
// never delays a renewal. The elector's status is counted in reg. It refuses the
// options Validate refuses; o.Enabled is the caller's switch, which New does not read.
func New(cfg *rest.Config, o Options, reg prometheus.Registerer) (*Elector, error) {
	o.Enabled = true // Validate checks the timings and the namespace of an enabled election only
	if err := o.Validate(); err != nil {
		return nil, err
	}
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
	return newWithLock(&resourcelock.LeaseLock{
		LeaseMeta:  metav1.ObjectMeta{Namespace: o.Namespace, Name: o.ID},
		Client:     kube.CoordinationV1(),
		LockConfig: resourcelock.ResourceLockConfig{Identity: identity},
	}, o)
}

func newWithLock(lock resourcelock.Interface, o Options) (*Elector, error) {
	l := &Elector{identity: lock.Identity(), opts: o, lock: &renewalLock{Interface: lock}, started: make(chan struct{})}
	var err error
	l.elector, err = leaderelection.NewLeaderElector(leaderelection.LeaderElectionConfig{
		Lock:            l.lock,
		Name:            o.ID,
		LeaseDuration:   o.LeaseDuration,
		RenewDeadline:   o.RenewDeadline,
		RetryPeriod:     o.RetryPeriod,
		ReleaseOnCancel: true,
		Callbacks: leaderelection.LeaderCallbacks{
			OnStartedLeading: func(context.Context) { close(l.started) },
			OnStoppedLeading: func() {},
			OnNewLeader: func(identity string) {
				klog.InfoS("Leader observed", "lease", o.Namespace+"/"+o.ID, "leader", identity, "self", identity == l.identity)
			},
		},
	})
	return l, err
}

// errLeaseLost ends an engine that stopped leading; its pod restarts as a follower.
var errLeaseLost = errors.New("leader election lost")

// Run campaigns for the Lease and runs work while this instance holds it.
//
// When ctx ends (SIGTERM), work stops first and the Lease is released after, so a
// follower takes over at once and never overlaps with this instance. When the Lease
// cannot be renewed within the renew deadline, work is cancelled and Run returns
// errLeaseLost at once, before a follower may take over (a lease duration after the
// last renewal): the caller exits the process rather than wait for in-flight work.
func (l *Elector) Run(ctx context.Context, work func(context.Context) error) error {
	log := klog.FromContext(ctx)
	log.Info("Campaigning for leadership", "lease", l.opts.Namespace+"/"+l.opts.ID, "identity", l.identity,
		"leaseDuration", l.opts.LeaseDuration, "renewDeadline", l.opts.RenewDeadline, "retryPeriod", l.opts.RetryPeriod)
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
		return fmt.Errorf("%w: lease %s/%s could not be renewed", errLeaseLost, l.opts.Namespace, l.opts.ID)
	case <-lost:
		return fmt.Errorf("%w: lease %s/%s not renewed within %s", errLeaseLost, l.opts.Namespace, l.opts.ID, l.opts.RenewDeadline)
	}
}

// shutdown stops work and waits for it (workDone is nil when it never started), then
// releases the Lease.
func (l *Elector) shutdown(workDone <-chan error, stopWork, stopElecting context.CancelFunc, electionDone <-chan struct{}) error {
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
func (l *Elector) watchRenewals(ctx context.Context) <-chan struct{} {
	lost := make(chan struct{})
	go func() {
		tick := time.NewTicker(l.opts.RetryPeriod / 2)
		defer tick.Stop()
		for {
			select {
			case <-ctx.Done():
				return
			case <-tick.C:
			}
			if time.Since(l.lock.lastRenewal()) > l.opts.RenewDeadline {
				close(lost)
				return
			}
		}
	}()
	return lost
}

// Leading reports whether this instance holds the Lease and runs its controllers.
func (l *Elector) Leading() bool {
	select {
	case <-l.started:
		return l.elector.IsLeader()
	default:
		return false
	}
}

// Standby reports whether this instance is a standby replica (it does not lead) and
// the identity of the leader, "" while none is known.
func (l *Elector) Standby() (leader string, standby bool) {
	return l.elector.GetLeader(), !l.Leading()
}

// Readyz answers 200 on a follower, which must not hold back a rollout, and names
// the leader; on the leader, or without leader election, it is 200 once the
// engine's caches are synced. l is nil without leader election.
func Readyz(ready func() bool, l *Elector) http.HandlerFunc {
	return func(w http.ResponseWriter, _ *http.Request) {
		if l != nil && !l.Leading() {
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
