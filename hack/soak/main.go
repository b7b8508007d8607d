// Command soak runs the whole local platform in-cluster (two engine and two gateway
// replicas from the Helm chart, on the local node) under load while a fault injector
// kills its parts at random, then checks what the faults cost against the targets in
// docs/reliability.md and prints a table. It exits 1 when a target is missed. It
// needs root (the local node) and the control-plane binaries (make kube).
//
//	go run ./hack/soak -duration 10m          # make soak
//	go run ./hack/soak -duration 2m -fault-interval 5s
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"os"
	"os/signal"
	"strings"
	"syscall"
	"time"

	"github.com/metalambda/metalambda/internal/gateway/lambda"
)

// Config is one soak run. Defaults() holds the command's defaults.
type Config struct {
	// Duration of the load phase, with faults; then the faults stop and the writer
	// with them, and the platform has up to Settle to converge.
	Duration time.Duration
	// FaultInterval is the mean time between two faults (exponentially distributed),
	// counted from the end of the previous fault's window.
	FaultInterval time.Duration
	Settle        time.Duration
	// Faults are the kinds injected, in a random order each round (all by default).
	Faults []string
	// Parents of the soak's CompositeController, and the interval at which the writer
	// changes one of them.
	Parents       int
	WriteInterval time.Duration
	// Lambdas are the PythonLambdas, asked RequestRate times a second in all.
	Lambdas     int
	RequestRate float64
	// ResyncPeriod of the soak's controller: the no-op write check watches one full
	// resync of the converged parents.
	ResyncPeriod time.Duration
	// Bridge and PodCIDR are the local node's network.
	Bridge, PodCIDR string
	// ChartDir is the Helm chart installed in-cluster.
	ChartDir string
	Seed     uint64
}

// Defaults are the command's flag defaults.
func Defaults() Config {
	return Config{
		Duration: 10 * time.Minute, FaultInterval: 20 * time.Second, Settle: 60 * time.Second,
		Faults:  allFaults,
		Parents: 200, WriteInterval: 100 * time.Millisecond,
		Lambdas: 20, RequestRate: 20,
		ResyncPeriod: 15 * time.Second,
		Bridge:       "mlsoak0", PodCIDR: "10.244.236.0/24",
		ChartDir: "deploy/helm/metalambda",
		Seed:     uint64(time.Now().UnixNano()),
	}
}

// Validate refuses a configuration that cannot run.
func (c *Config) Validate() error {
	var errs []error
	if c.Duration <= 0 || c.FaultInterval <= 0 || c.Settle <= 0 || c.WriteInterval <= 0 || c.ResyncPeriod <= 0 {
		errs = append(errs, errors.New("-duration, -fault-interval, -settle, -write-interval and -resync must be positive"))
	}
	if c.Parents < 1 || c.Lambdas < 1 || c.RequestRate <= 0 {
		errs = append(errs, errors.New("-parents and -lambdas must be at least 1 and -rate positive"))
	}
	for _, f := range c.Faults {
		if !isFault(f) {
			errs = append(errs, fmt.Errorf("unknown fault %q: the kinds are %s", f, strings.Join(allFaults, ", ")))
		}
	}
	if os.Geteuid() != 0 {
		errs = append(errs, errors.New("the soak runs the local node, which needs root"))
	}
	return errors.Join(errs...)
}

func main() {
	// The local node's sandboxes start this executable again as their launcher.
	lambda.ServeWorker()
	cfg := Defaults()
	flag.DurationVar(&cfg.Duration, "duration", cfg.Duration, "load phase with faults")
	flag.DurationVar(&cfg.FaultInterval, "fault-interval", cfg.FaultInterval, "mean time between faults (from the end of the previous fault's window)")
	flag.DurationVar(&cfg.Settle, "settle", cfg.Settle, "longest wait for convergence once the faults stop")
	faults := flag.String("faults", strings.Join(cfg.Faults, ","), "fault kinds to inject, comma-separated")
	flag.IntVar(&cfg.Parents, "parents", cfg.Parents, "parents of the soak's CompositeController")
	flag.DurationVar(&cfg.WriteInterval, "write-interval", cfg.WriteInterval, "interval of the writer's parent changes")
	flag.IntVar(&cfg.Lambdas, "lambdas", cfg.Lambdas, "PythonLambdas")
	flag.Float64Var(&cfg.RequestRate, "rate", cfg.RequestRate, "requests per second to the PythonLambdas, in all")
	flag.DurationVar(&cfg.ResyncPeriod, "resync", cfg.ResyncPeriod, "resync period of the soak's controller")
	flag.StringVar(&cfg.Bridge, "bridge", cfg.Bridge, "the local node's bridge")
	flag.StringVar(&cfg.PodCIDR, "pod-cidr", cfg.PodCIDR, "the local node's pod subnet")
	flag.StringVar(&cfg.ChartDir, "chart", cfg.ChartDir, "the Helm chart to install")
	flag.Uint64Var(&cfg.Seed, "seed", cfg.Seed, "random seed")
	flag.Parse()
	cfg.Faults = strings.Split(*faults, ",")
	if err := cfg.Validate(); err != nil {
		fmt.Fprintln(os.Stderr, "soak:", err)
		os.Exit(2)
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	rep, err := Run(ctx, cfg, os.Stderr)
	if rep != nil {
		rep.Print(os.Stdout)
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, "soak:", err)
		os.Exit(1)
	}
	if missed := rep.Missed(); len(missed) > 0 {
		fmt.Fprintf(os.Stderr, "soak: %d target(s) missed\n", len(missed))
		os.Exit(1)
	}
}
