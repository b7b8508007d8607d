package main

import (
	"context"
	"fmt"
	"io"
	"math/rand/v2"
	"os"
	"path/filepath"
	"sync"
	"time"

	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"

	"github.com/metalambda/metalambda/internal/kubetest"
	"github.com/metalambda/metalambda/internal/local/cluster"
	"github.com/metalambda/metalambda/internal/local/node"
	"github.com/metalambda/metalambda/internal/local/platform"
	"github.com/metalambda/metalambda/internal/manifest"
)

// soak is one run: the platform, its clients and what the load and the faults
// record.
type soak struct {
	cfg     Config
	log     func(format string, args ...any)
	p       *platform.Platform
	cfgRest *rest.Config
	kube    kubernetes.Interface
	dyn     dynamic.Interface
	apply   *manifest.Applier
	ingress string
	rng     *rand.Rand
	rngMu   sync.Mutex

	parents  *parentLoad
	requests *requestLoad
	engines  *engineScraper
	faults   *injector
}

// Run brings the platform up, runs the load and the faults for cfg.Duration, lets it
// settle and measures; Report.Missed says which targets it missed. An error says the
// soak could not run to the end (the platform did not come up, the workload did not
// converge before the load, or ctx ended).
func Run(ctx context.Context, cfg Config, logTo io.Writer) (*Report, error) {
	start := time.Now()
	s := &soak{cfg: cfg, rng: rand.New(rand.NewPCG(cfg.Seed, 1))}
	s.log = func(format string, args ...any) {
		fmt.Fprintf(logTo, "soak %6.1fs: %s\n", time.Since(start).Seconds(), fmt.Sprintf(format, args...))
	}
	s.log("seed %d; building the engine and the gateway", cfg.Seed)
	binDir, err := platform.BuildComponents(ctx, "soak-")
	if err != nil {
		return nil, err
	}
	defer os.RemoveAll(binDir)
	dir, err := os.MkdirTemp("", "metalambda-soak-")
	if err != nil {
		return nil, err
	}
	defer os.RemoveAll(dir)
	if err := s.up(ctx, binDir, filepath.Join(dir, "data"), logTo); err != nil {
		return nil, err
	}
	defer func() {
		s.log("stopping the platform")
		s.p.Stop()
	}()
	rep := &Report{Config: cfg}
	if err := s.soak(ctx, rep); err != nil {
		return nil, err
	}
	return rep, nil
}

// up starts the platform in-cluster, with the chart's two engines and two gateways
// running on the local node.
func (s *soak) up(ctx context.Context, binDir, dataDir string, logTo io.Writer) error {
	opts := platform.Defaults()
	opts.DataDir, opts.BinDir = dataDir, os.Getenv(cluster.BinDirEnv)
	opts.IngressAddress, opts.GatewayAddress = kubetest.FreeAddr(nil), kubetest.FreeAddr(nil)
	opts.InCluster = &platform.InCluster{ChartDir: s.cfg.ChartDir, BinDir: binDir}
	nodeOpts := node.Defaults()
	nodeOpts.Bridge, nodeOpts.PodCIDR, nodeOpts.Images = s.cfg.Bridge, s.cfg.PodCIDR, platform.ComponentImages(binDir)
	opts.Node = platform.LocalNode(nodeOpts)
	s.log("starting the platform in-cluster in %s", dataDir)
	upCtx, cancel := context.WithTimeout(ctx, 8*time.Minute)
	defer cancel()
	p, err := platform.Start(upCtx, opts, logTo)
	if err != nil {
		return err
	}
	s.p, s.ingress = p, opts.IngressAddress
	if s.cfgRest, err = clientcmd.BuildConfigFromFlags("", p.Kubeconfig); err != nil {
		p.Stop()
		return err
	}
	s.cfgRest.QPS, s.cfgRest.Burst = -1, 0 // the soak's own load is paced by itself
	s.kube = kubernetes.NewForConfigOrDie(s.cfgRest)
	s.dyn = dynamic.NewForConfigOrDie(s.cfgRest)
	if s.apply, err = manifest.NewApplier(s.cfgRest, "soak"); err != nil {
		p.Stop()
		return err
	}
	return nil
}

// soak installs the workload, runs the load with faults, settles and checks.
func (s *soak) soak(ctx context.Context, rep *Report) error {
	if err := s.install(ctx); err != nil {
		return err
	}
	s.engines = newEngineScraper(s.kube)
	s.parents = newParentLoad(s)
	s.requests = newRequestLoad(s)
	s.faults = newInjector(s, ctx)

	bg, stopBG := context.WithCancel(ctx)
	var wg sync.WaitGroup
	goRun := func(f func(context.Context)) {
		wg.Add(1)
		go func() { defer wg.Done(); f(bg) }()
	}
	goRun(s.engines.run)
	goRun(s.parents.observe)
	defer func() { stopBG(); wg.Wait() }()
	if err := s.parents.waitConverged(ctx, 3*time.Minute); err != nil {
		return err
	}
	if err := s.requests.waitServing(ctx, 3*time.Minute); err != nil {
		return err
	}
	s.log("load for %s: a parent change every %s, %.0f requests/s to %d PythonLambdas, a fault every %s on average",
		s.cfg.Duration, s.cfg.WriteInterval, s.cfg.RequestRate, s.cfg.Lambdas, s.cfg.FaultInterval)
	loadCtx, stopLoad := context.WithTimeout(ctx, s.cfg.Duration)
	defer stopLoad()
	var load sync.WaitGroup
	for _, f := range []func(context.Context){s.parents.write, s.requests.run, s.faults.run} {
		load.Add(1)
		go func() { defer load.Done(); f(loadCtx) }()
	}
	load.Wait()
	if ctx.Err() != nil {
		return ctx.Err()
	}
	s.log("load done: %d faults; settling (up to %s)", len(s.faults.windows()), s.cfg.Settle)
	rep.Settled = s.parents.waitReflected(ctx, s.cfg.Settle)
	s.check(ctx, rep)
	return nil
}

// random draws from the run's seeded source (safe for concurrent use).
func (s *soak) random(f func(r *rand.Rand) int) int {
	s.rngMu.Lock()
	defer s.rngMu.Unlock()
	return f(s.rng)
}
