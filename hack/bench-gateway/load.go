package main

import (
	"bytes"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"slices"
	"strconv"
	"sync"
	"syscall"
	"time"

	"github.com/metalambda/metalambda/internal/gateway/lambda"
	"github.com/metalambda/metalambda/internal/gateway/sandbox"

	"github.com/metalambda/metalambda/hack/internal/procstat"
)

// loadFlag is the flag that makes this executable the Go load generator: started
// again by the benchmark, in a process of its own, so that its CPU counts in no
// server's row.
const loadFlag = "load"

// loadReport is what a load child prints: its requests' latencies summarised.
type loadReport struct {
	Requests int           `json:"requests"`
	Errors   int           `json:"errors"`
	P50      time.Duration `json:"p50"`
	P99      time.Duration `json:"p99"`
	Max      time.Duration `json:"max"`
}

// serveLoad is the load child's main: clients goroutines post to url for d, and
// the summary is printed as JSON on stdout.
func serveLoad(url string, d time.Duration, clients int) error {
	var mu sync.Mutex
	var latencies []time.Duration
	errors := 0
	deadline := time.Now().Add(d)
	var wg sync.WaitGroup
	for range clients {
		wg.Go(func() {
			var mine []time.Duration
			bad := 0
			for time.Now().Before(deadline) {
				start := time.Now()
				if err := post(url); err != nil {
					bad++
					continue
				}
				mine = append(mine, time.Since(start))
			}
			mu.Lock()
			latencies = append(latencies, mine...)
			errors += bad
			mu.Unlock()
		})
	}
	wg.Wait()
	slices.Sort(latencies)
	r := loadReport{Requests: len(latencies), Errors: errors}
	if n := len(latencies); n > 0 {
		r.P50, r.P99, r.Max = latencies[n/2], latencies[n*99/100], latencies[n-1]
	}
	return json.NewEncoder(os.Stdout).Encode(r)
}

// load runs the Go load generator against url in a child process and returns
// its summary, with the child's CPU time as the loader's.
func load(name, url string, d time.Duration, clients int) (result, error) {
	exe, err := os.Executable()
	if err != nil {
		return result{}, err
	}
	cmd := exec.Command(exe, "-"+loadFlag, url, "-duration", d.String(), "-clients", strconv.Itoa(clients))
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		return result{}, fmt.Errorf("load generator: %v: %s", err, stderr.String())
	}
	var rep loadReport
	if err := json.Unmarshal(out, &rep); err != nil {
		return result{}, fmt.Errorf("load generator: %v: %s", err, out)
	}
	r := result{name: name, requests: rep.Requests, errors: rep.Errors, rps: float64(rep.Requests) / d.Seconds(), p50: rep.P50, p99: rep.P99, max: rep.Max}
	if ru, ok := cmd.ProcessState.SysUsage().(*syscall.Rusage); ok {
		r.loaderCPU = time.Duration(syscall.TimevalToNsec(ru.Utime) + syscall.TimevalToNsec(ru.Stime))
	}
	return r, nil
}

// cpuMeter reads the CPU time a server's processes have used so far.
type cpuMeter func() cpuReading

// cpuReading is a cpuMeter's reading: the CPU time of the server's own
// process, and that of its workers (the gateway's) or other processes (the
// seed's) read as a total or each from /proc, so that a process that started
// between two readings counts whole and one that was read before counts from
// then on.
type cpuReading struct {
	own     time.Duration
	total   time.Duration
	procs   map[int]time.Duration
	hasWork bool // total and procs are the gateway's workers
}

// since is the CPU time used between before and r.
func (r cpuReading) since(before cpuReading) time.Duration {
	return r.own - before.own + r.others(before)
}

// others is the CPU time of the processes beside the server's own between
// before and r.
func (r cpuReading) others(before cpuReading) time.Duration {
	used := r.total - before.total
	for pid, t := range r.procs {
		used += t - before.procs[pid]
	}
	return used
}

// processesMeter counts the processes pids returns, each by /proc/PID/stat.
func processesMeter(pids func() []int) cpuMeter {
	return func() cpuReading {
		r := cpuReading{procs: map[int]time.Duration{}}
		for _, pid := range pids() {
			if t, ok := procstat.CPU(pid); ok {
				r.procs[pid] = t
			}
		}
		return r
	}
}

// gatewayMeter counts this process (the gateway, and the constant server of the
// last row) and the gateway's workers: their cgroups' total where the sandbox
// gives each worker one (every process in the worker's sandbox, and the time of
// workers that have exited), else each worker process's by /proc.
func gatewayMeter() cpuMeter {
	self := os.Getpid()
	workers := processesMeter(func() []int {
		return append(lambda.PythonWorkerPIDs(self, ""), lambda.ScriptWorkerPIDs(self, "")...)
	})
	return func() cpuReading {
		var r cpuReading
		if t, ok := sandbox.WorkersCPU(); ok {
			r.total = t
		} else {
			r = workers()
		}
		r.own, _ = procstat.CPU(self)
		r.hasWork = true
		return r
	}
}
