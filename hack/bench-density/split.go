package main

import (
	"fmt"
	"io"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"text/tabwriter"

	"github.com/metalambda/metalambda/hack/internal/benchkit"
	"github.com/metalambda/metalambda/internal/gateway/lambda"
	"github.com/metalambda/metalambda/internal/gateway/sandbox"
)

// The roles of a worker's processes: in a namespace sandbox, bubblewrap's
// monitor (the gateway's child) and the first process of the PID namespace
// (the reaper, metalambda-init, or, where there is none for the architecture,
// bubblewrap's own init), then the worker itself (the launcher executed it);
// anything the worker started is "other". In a Landlock sandbox the worker is
// the gateway's child. A worker forked by a zygote (--python-zygote,
// --script-zygote) is the child of its init (pid 1 of its PID namespace), a
// child of the zygote: the worker and its init count for the function they
// serve, the zygote's own processes for "python zygote" or "script zygote".
const (
	roleWorker   = "worker"
	roleMonitor  = "bwrap (monitor)"
	roleInit     = "bwrap (pid 1)"
	roleReaper   = "metalambda-init (pid 1)"
	roleForkInit = "init (forked)"
	roleOther    = "other"
)

var roles = []string{roleWorker, roleMonitor, roleInit, roleReaper, roleForkInit, roleOther}

// procMem is a process's memory, from /proc/PID/smaps_rollup, in bytes.
type procMem struct {
	privateDirty, pssAnon, pssFile, pss int64
}

func (m *procMem) add(o procMem) {
	m.privateDirty += o.privateDirty
	m.pssAnon += o.pssAnon
	m.pssFile += o.pssFile
	m.pss += o.pss
}

func readProcMem(pid int) procMem {
	f := smapsFields(pid)
	return procMem{privateDirty: f["Private_Dirty:"], pssAnon: f["Pss_Anon:"], pssFile: f["Pss_File:"], pss: f["Pss:"]}
}

// roleMem sums the memory of the processes of one role.
type roleMem struct {
	processes int
	mem       procMem
}

// memSplit is the memory of the workers' processes by kind of worker (its
// runtime, or a spare of the Python or the Go executable) and role.
type memSplit map[string]map[string]*roleMem

// splitWorkers reads the memory of each process of each worker tree below this
// process (the trees pss counts, but for the gateway's own process).
func splitWorkers() memSplit {
	self := os.Getpid()
	mark := "gateway=" + strconv.Itoa(self)
	out := memSplit{}
	add := func(kind, role string, pid int) {
		if out[kind] == nil {
			out[kind] = map[string]*roleMem{}
		}
		if out[kind][role] == nil {
			out[kind][role] = &roleMem{}
		}
		out[kind][role].processes++
		out[kind][role].mem.add(readProcMem(pid))
	}
	forked := map[int]string{} // a forked worker's or its init's pid: the worker's kind
	forkedRole := map[int]string{}
	for _, f := range lambda.ForkedProcesses() {
		kind := "spare (python)"
		if f.Script {
			kind = "spare (javascript or jsonnet)"
		}
		if f.Function != "" {
			kind = functionKind(f.Function)
		}
		forked[f.Worker], forkedRole[f.Worker] = kind, roleWorker
		forked[f.Init], forkedRole[f.Init] = kind, roleForkInit
	}
	for _, child := range sandbox.Children(self) {
		tree := append([]int{child}, lambda.Descendants(child)...)
		kind, worker := "", 0
		for _, pid := range tree {
			if _, ok := forked[pid]; ok {
				continue // a forked worker shares its zygote's command line
			}
			args := cmdline(pid)
			if slices.Contains(args, lambda.PythonZygoteMarker) && filepath.Base(args[0]) != "bwrap" {
				kind, worker = "python zygote", pid
				break
			}
			if slices.Contains(args, lambda.ScriptZygoteMarker) && filepath.Base(args[0]) != "bwrap" {
				kind, worker = "script zygote", pid
				break
			}
			if slices.Contains(args, mark) && filepath.Base(args[0]) != "bwrap" {
				kind, worker = workerKind(pid, args), pid
				break
			}
		}
		if worker == 0 {
			continue // the control plane
		}
		if out[kind] == nil {
			out[kind] = map[string]*roleMem{}
		}
		for _, pid := range tree {
			if k, ok := forked[pid]; ok {
				add(k, forkedRole[pid], pid)
				continue
			}
			add(kind, roleOf(pid, child, worker), pid)
		}
	}
	return out
}

func roleOf(pid, top, worker int) string {
	switch {
	case pid == worker:
		return roleWorker
	case cmdline(pid)[0] == sandbox.InitInSandbox:
		return roleReaper
	case filepath.Base(cmdline(pid)[0]) != "bwrap":
		return roleOther
	case pid == top:
		return roleMonitor
	}
	return roleInit
}

// workerKind is the runtime of the worker's function (the benchmark names its
// Functions after their runtime), or which spare it is.
func workerKind(pid int, args []string) string {
	if fn, ok := lambda.WorkerFunction(pid); ok {
		return functionKind(fn)
	}
	if slices.Contains(args, lambda.PythonWorkerMarker) {
		return "spare (python)"
	}
	return "spare (javascript or jsonnet)"
}

// functionKind is the runtime of a benchmark's Function (named after it).
func functionKind(fn string) string {
	name := strings.TrimPrefix(fn, namespace+"/")
	for _, r := range benchkit.Runtimes {
		if strings.HasPrefix(name, r+"-") {
			return r
		}
	}
	return "other function"
}

func cmdline(pid int) []string {
	raw, _ := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/cmdline")
	return strings.Split(string(raw), "\x00")
}

// print writes the mean memory of a process of each role, per kind of worker,
// and the mean of a whole worker (all its processes).
func (s memSplit) print(w io.Writer, state string) {
	kinds := make([]string, 0, len(s))
	for k := range s {
		kinds = append(kinds, k)
	}
	slices.Sort(kinds)
	fmt.Fprintf(w, "memory of one worker's processes %s, mean per process (MiB)\n", state)
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintln(tw, "worker\tprocess\tprocesses\tPrivate_Dirty\tPss_Anon\tPss_File\tPss\t")
	for _, k := range kinds {
		var whole procMem
		workers := 0
		for _, role := range roles {
			r := s[k][role]
			if r == nil {
				continue
			}
			if role == roleWorker {
				workers = r.processes
			}
			whole.add(r.mem)
			m := r.mem
			n := float64(r.processes)
			fmt.Fprintf(tw, "%s\t%s\t%d\t%.2f\t%.2f\t%.2f\t%.2f\t\n", k, role, r.processes, mib(m.privateDirty)/n, mib(m.pssAnon)/n, mib(m.pssFile)/n, mib(m.pss)/n)
		}
		if workers > 0 {
			n := float64(workers)
			fmt.Fprintf(tw, "%s\tall, per worker\t%d\t%.2f\t%.2f\t%.2f\t%.2f\t\n", k, workers, mib(whole.privateDirty)/n, mib(whole.pssAnon)/n, mib(whole.pssFile)/n, mib(whole.pss)/n)
		}
	}
	tw.Flush()
}
