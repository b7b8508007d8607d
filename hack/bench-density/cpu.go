package main

import (
	"fmt"
	"io"
	"os"
	"path/filepath"
	"runtime/pprof"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/metalambda/metalambda/hack/internal/procstat"
)

// cpuProfile, when set, is a directory to write a CPU profile of this process
// (the gateway and the benchmark's clients) into for each pass (PASS.cpu.pprof).
var cpuProfile string

// cpuUse is what a pass cost the machine's processors: this process (the
// gateway, the benchmark's callers and, for the cold passes, what starts a
// worker in it), its workers (every process below it), and the machine as a
// whole (the control plane and everything else included).
type cpuUse struct {
	wall, self, machine time.Duration
	workers             time.Duration
}

type cpuMark struct {
	at            time.Time
	self, machine time.Duration
	workers       time.Duration
}

// markCPU marks the start of a pass. Reading the workers' times takes this
// process a while (every process's /proc files): it reads them before its own
// time at the start and after it at the end (since), so that the pass counts
// none of it.
func markCPU() cpuMark {
	workers := workersCPU()
	self, _ := procstat.CPU(os.Getpid())
	return cpuMark{at: time.Now(), self: self, machine: procstat.MachineBusy(), workers: workers}
}

func (m cpuMark) since() cpuUse {
	at := time.Now()
	self, _ := procstat.CPU(os.Getpid())
	machine := procstat.MachineBusy()
	return cpuUse{wall: at.Sub(m.at), self: self - m.self, machine: machine - m.machine, workers: workersCPU() - m.workers}
}

// startCPUProfile starts a profile of the pass named name; the function it
// returns stops it.
func startCPUProfile(name string) func() {
	if cpuProfile == "" {
		return func() {}
	}
	f, err := os.Create(filepath.Join(cpuProfile, slug(name)+".cpu.pprof"))
	if err == nil {
		err = pprof.StartCPUProfile(f)
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, "bench-density: cpu profile:", err)
		if f != nil {
			f.Close()
		}
		return func() {}
	}
	return func() {
		pprof.StopCPUProfile()
		f.Close()
	}
}

func slug(s string) string {
	return strings.NewReplacer(" ", "-", "(", "", ")", "").Replace(s)
}

// workersCPU is the CPU time of every process below this one that serves its
// gateway (as pss counts them), live ones only: a worker that exited during a
// pass takes its time with it, unless this process waited for it.
func workersCPU() time.Duration {
	var total time.Duration
	for _, tree := range workerTrees() {
		for _, pid := range tree {
			t, _ := procstat.CPU(pid)
			total += t
		}
	}
	return total
}

func printCPU(w io.Writer, passes []*phase) {
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintln(tw, "pass\twall (s)\tthis process (s)\tits workers (s)\tthe machine (s)\tmachine per call (ms)\tworkers started\tstopped for the budget\t")
	for _, p := range passes {
		calls := 0
		for _, l := range p.latencies {
			calls += len(l)
		}
		per := 0.0
		if calls > 0 {
			per = float64(p.cpu.machine.Microseconds()) / 1000 / float64(calls)
		}
		fmt.Fprintf(tw, "%s\t%.1f\t%.1f\t%.1f\t%.1f\t%.2f\t%d\t%d\t\n", p.name, p.cpu.wall.Seconds(), p.cpu.self.Seconds(), p.cpu.workers.Seconds(), p.cpu.machine.Seconds(), per, p.starts, p.evictions)
	}
	tw.Flush()
}
