package main

import (
	"fmt"
	"io"
	"os"
	"path/filepath"
	"runtime"
	"runtime/pprof"
	"strings"
	"text/tabwriter"
)

// goMem is this process's Go memory at each state: the gateway's share of the
// PSS it prints, split the way the Go runtime sees it.
type goMem struct {
	states []string
	stats  []runtime.MemStats
}

// record reads the runtime's statistics for state and, with -memprofile, writes
// the heap profile (of live objects at the last collection) and the goroutines'
// stacks.
func (g *goMem) record(state string) {
	var m runtime.MemStats
	runtime.ReadMemStats(&m)
	g.states, g.stats = append(g.states, state), append(g.stats, m)
	if memProfile == "" {
		return
	}
	name := slug(state) + ".pprof"
	f, err := os.Create(filepath.Join(memProfile, name))
	if err == nil {
		err = pprof.Lookup("heap").WriteTo(f, 0)
		if cerr := f.Close(); err == nil {
			err = cerr
		}
	}
	if err == nil {
		f, err = os.Create(filepath.Join(memProfile, strings.TrimSuffix(name, ".pprof")+".goroutines.txt"))
		if err == nil {
			err = pprof.Lookup("goroutine").WriteTo(f, 1)
			if cerr := f.Close(); err == nil {
				err = cerr
			}
		}
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, "bench-density: profile:", err)
	}
}

func (g *goMem) print(w io.Writer) {
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintln(tw, "this process's Go memory (MiB)\theap in use\theap free, not returned\tgoroutine stacks\truntime's own\tgoroutines at the end\t")
	for i, m := range g.stats {
		fmt.Fprintf(tw, "%s\t%.1f\t%.1f\t%.1f\t%.1f\t\t\n", g.states[i], mib(int64(m.HeapInuse)), mib(int64(m.HeapIdle-m.HeapReleased)),
			mib(int64(m.StackInuse)), mib(int64(m.MSpanInuse+m.MCacheInuse+m.GCSys+m.OtherSys+m.BuckHashSys)))
	}
	fmt.Fprintf(tw, "\t\t\t\t\t%d\t\n", runtime.NumGoroutine())
	tw.Flush()
}
