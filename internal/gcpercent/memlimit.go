package gcpercent

import (
	"fmt"
	"math"
	"os"
	"runtime/debug"
	"strconv"
	"strings"
)

// MemoryLimitShare is the share of a container's memory limit that SetMemoryLimit
// gives the Go runtime as its soft limit: the rest is for what the runtime does not
// count (the pages of the binary, thread stacks) and for overshoot.
const MemoryLimitShare = 0.9

// cgroupLimitFiles hold the memory limit of the process's container: cgroup v2's
// unified hierarchy, then v1's memory controller.
var cgroupLimitFiles = []string{"/sys/fs/cgroup/memory.max", "/sys/fs/cgroup/memory/memory.limit_in_bytes"}

// SetMemoryLimit sets the runtime's soft memory limit, under which the collector
// works harder as the heap nears it, so that a garbage-collection target above
// Go's default cannot take the process past its container's limit. The limit is
// limitBytes when positive, else MemoryLimitShare of the container's memory limit
// (cgroup v2 or v1), else none. GOMEMLIMIT in the environment wins (the runtime has
// applied it already). It returns the limit in effect for the start-up log.
func SetMemoryLimit(limitBytes int64) string {
	if env, ok := os.LookupEnv("GOMEMLIMIT"); ok {
		return "GOMEMLIMIT=" + env
	}
	source := "--memory-limit"
	if limitBytes <= 0 {
		container, file := containerLimit(cgroupLimitFiles)
		if container <= 0 {
			return "none"
		}
		limitBytes, source = int64(float64(container)*MemoryLimitShare), fmt.Sprintf("%.0f%% of %s", MemoryLimitShare*100, file)
	}
	debug.SetMemoryLimit(limitBytes)
	return fmt.Sprintf("%dMiB (%s)", limitBytes>>20, source)
}

// containerLimit reads the first of files that holds a memory limit, in bytes; 0 when
// none does ("max", v1's near-MaxInt64 for no limit, or no such file).
func containerLimit(files []string) (limit int64, file string) {
	for _, f := range files {
		data, err := os.ReadFile(f)
		if err != nil {
			continue
		}
		v, err := strconv.ParseInt(strings.TrimSpace(string(data)), 10, 64)
		if err != nil || v <= 0 || v >= math.MaxInt64/2 {
			return 0, "" // "max", or v1's page-rounded MaxInt64: no limit
		}
		return v, f
	}
	return 0, ""
}
