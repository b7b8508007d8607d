package main

import (
	"bufio"
	"bytes"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"text/tabwriter"

	"github.com/metalambda/metalambda/internal/gateway/lambda"
	"github.com/metalambda/metalambda/internal/gateway/sandbox"
)

// What the memory budget counts is each worker's and each zygote's cgroup
// memory (lambda.MemoryBudget): the pages charged to it, and the kernel's own
// memory for its processes (their page tables, kernel stacks, namespaces),
// which no process's PSS shows. The gateway's sandbox puts them in cgroups
// below metalambda-<its pid>, itself below the gateway's own cgroup.

// cgroupKinds are the kinds of cgroups below the gateway's: a zygote's is
// told by its first process's command line.
var cgroupKinds = []string{"worker or spare", "python zygote", "script zygote"}

// cgroupMem is the memory of the cgroups of one kind.
type cgroupMem struct {
	cgroups       int
	usage, kernel int64 // bytes
}

// budgetView is the memory of the gateway's worker and zygote cgroups, by
// kind; nil where there are none to read (no cgroups).
type budgetView map[string]*cgroupMem

// readBudgetView reads the cgroups of this process's sandboxes.
func readBudgetView() budgetView {
	dir, v2 := sandbox.MemoryCgroupDir()
	if dir == "" {
		return nil
	}
	entries, err := os.ReadDir(dir)
	if err != nil {
		return nil
	}
	view := budgetView{}
	for _, e := range entries {
		if !e.IsDir() {
			continue
		}
		cg := filepath.Join(dir, e.Name())
		usage, kernel, ok := cgroupMemory(cg, v2)
		if !ok {
			continue
		}
		kind := cgroupKind(cg)
		m := view[kind]
		if m == nil {
			m = &cgroupMem{}
			view[kind] = m
		}
		m.cgroups++
		m.usage += usage
		m.kernel += kernel
	}
	return view
}

// cgroupMemory is the memory charged to a cgroup, and how much of it is the
// kernel's.
func cgroupMemory(dir string, v2 bool) (usage, kernel int64, ok bool) {
	if !v2 {
		usage, ok = readInt(filepath.Join(dir, "memory.usage_in_bytes"))
		kernel, _ = readInt(filepath.Join(dir, "memory.kmem.usage_in_bytes"))
		return usage, kernel, ok
	}
	usage, ok = readInt(filepath.Join(dir, "memory.current"))
	if stat, err := os.ReadFile(filepath.Join(dir, "memory.stat")); err == nil {
		sc := bufio.NewScanner(bytes.NewReader(stat))
		for sc.Scan() {
			if v, found := strings.CutPrefix(sc.Text(), "kernel "); found {
				kernel, _ = strconv.ParseInt(v, 10, 64)
			}
		}
	}
	return usage, kernel, ok
}

func readInt(path string) (int64, bool) {
	raw, err := os.ReadFile(path)
	if err != nil {
		return 0, false
	}
	v, err := strconv.ParseInt(strings.TrimSpace(string(raw)), 10, 64)
	return v, err == nil
}

// cgroupKind tells a zygote's cgroup by its first process's command line.
func cgroupKind(dir string) string {
	procs, err := os.ReadFile(filepath.Join(dir, "cgroup.procs"))
	if err != nil {
		return cgroupKinds[0]
	}
	first, _, _ := strings.Cut(strings.TrimSpace(string(procs)), "\n")
	pid, err := strconv.Atoi(first)
	if err != nil {
		return cgroupKinds[0]
	}
	switch args := cmdline(pid); {
	case slices.Contains(args, lambda.PythonZygoteMarker):
		return cgroupKinds[1]
	case slices.Contains(args, lambda.ScriptZygoteMarker):
		return cgroupKinds[2]
	}
	return cgroupKinds[0]
}

// print writes the view as a table.
func (v budgetView) print(w io.Writer, state string) {
	if v == nil {
		fmt.Fprintf(w, "what the memory budget counts %s: no cgroups to read\n", state)
		return
	}
	fmt.Fprintf(w, "what the memory budget counts %s: the cgroups' memory, the kernel's part of it (page tables, kernel stacks, namespaces) included\n", state)
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintln(tw, "cgroups of\tcgroups\tmemory (MiB)\tof which the kernel's (MiB)\tper cgroup (KiB)\tthe kernel's per cgroup (KiB)\t")
	var all cgroupMem
	for _, kind := range cgroupKinds {
		m := v[kind]
		if m == nil {
			continue
		}
		all.cgroups += m.cgroups
		all.usage += m.usage
		all.kernel += m.kernel
		fmt.Fprintf(tw, "%s\t%d\t%.1f\t%.1f\t%.0f\t%.0f\t\n", kind, m.cgroups, mib(m.usage), mib(m.kernel),
			float64(m.usage)/1024/float64(m.cgroups), float64(m.kernel)/1024/float64(m.cgroups))
	}
	fmt.Fprintf(tw, "all\t%d\t%.1f\t%.1f\t\t\t\n", all.cgroups, mib(all.usage), mib(all.kernel))
	tw.Flush()
}
