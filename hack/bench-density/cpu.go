package main

import (
	"fmt"
	"io"
	"os"
	"path/filepath"
	"runtime/pprof"
	"strconv"
	"strings"
	"text/tabwriter"
	"time"
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
	return cpuMark{at: time.Now(), self: procCPU(os.Getpid()), machine: machineBusy(), workers: workers}
}

func (m cpuMark) since() cpuUse {
	at, self, machine := time.Now(), procCPU(os.Getpid()), machineBusy()
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

// clockTick is the unit of /proc's CPU times (USER_HZ, 100 on Linux).
const clockTick = 10 * time.Millisecond

// procCPU is the user and system time of a process and of its children it has
// waited for.
func procCPU(pid int) time.Duration {
	raw, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
	if err != nil {
		return 0
	}
	s := string(raw)
	// Fields after the command, which is in parentheses and may hold spaces.
	f := strings.Fields(s[strings.LastIndexByte(s, ')')+1:])
	var ticks int64
	for _, i := range []int{11, 12, 13, 14} { // utime, stime, cutime, cstime
		if i < len(f) {
			v, _ := strconv.ParseInt(f[i], 10, 64)
			ticks += v
		}
	}
	return time.Duration(ticks) * clockTick
}

// workersCPU is the CPU time of every process below this one that serves its
// gateway (as pss counts them), live ones only: a worker that exited during a
// pass takes its time with it, unless this process waited for it.
func workersCPU() time.Duration {
	var total time.Duration
	for _, tree := range workerTrees() {
		for _, pid := range tree {
			total += procCPU(pid)
		}
	}
	return total
}

// machineBusy is the time the machine's processors were not idle.
func machineBusy() time.Duration {
	raw, err := os.ReadFile("/proc/stat")
	if err != nil {
		return 0
	}
	line, _, _ := strings.Cut(string(raw), "\n")
	f := strings.Fields(line) // cpu user nice system idle iowait irq softirq steal ...
	var busy int64
	for i, v := range f[1:] {
		if i == 3 || i == 4 { // idle, iowait
			continue
		}
		if i >= 8 { // guest times are within user
			break
		}
		n, _ := strconv.ParseInt(v, 10, 64)
		busy += n
	}
	return time.Duration(busy) * clockTick
}

func printCPU(w io.Writer, passes []*phase) {
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintln(tw, "pass\twall (s)\tthis process (s)\tits workers (s)\tthe machine (s)\tmachine per call (ms)\t")
	for _, p := range passes {
		calls := 0
		for _, l := range p.latencies {
			calls += len(l)
		}
		per := 0.0
		if calls > 0 {
			per = float64(p.cpu.machine.Microseconds()) / 1000 / float64(calls)
		}
		fmt.Fprintf(tw, "%s\t%.1f\t%.1f\t%.1f\t%.1f\t%.2f\t\n", p.name, p.cpu.wall.Seconds(), p.cpu.self.Seconds(), p.cpu.workers.Seconds(), p.cpu.machine.Seconds(), per)
	}
	tw.Flush()
}
