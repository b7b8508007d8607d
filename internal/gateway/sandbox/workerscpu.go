package sandbox

import (
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"time"
)

// WorkersCPU is the processor time used so far by every command that the
// sandboxes of this process started in cgroups of their own, running or
// exited: the count of the metalambda-<pid> cgroup above theirs, which keeps
// what its removed children used. False where commands get no cgroups, or
// before the first sandbox made that cgroup.
func WorkersCPU() (time.Duration, bool) {
	own, err := ownCgroups()
	if err != nil {
		return 0, false
	}
	name := "metalambda-" + strconv.Itoa(os.Getpid())
	if path, ok := own["cpuacct"]; ok {
		mount, err := filepath.EvalSymlinks(filepath.Join(cgroupRoot, "cpuacct"))
		if raw, readErr := os.ReadFile(filepath.Join(mount, path, name, "cpuacct.usage")); err == nil && readErr == nil {
			ns, ok := leadingInt(raw)
			return time.Duration(ns), ok
		}
	}
	path, ok := own[""]
	if !ok {
		return 0, false
	}
	for _, mount := range []string{cgroupRoot, filepath.Join(cgroupRoot, "unified")} {
		raw, err := os.ReadFile(filepath.Join(mount, path, name, "cpu.stat"))
		if err != nil {
			continue
		}
		if rest, found := strings.CutPrefix(string(raw), "usage_usec "); found {
			us, ok := leadingInt([]byte(rest))
			return time.Duration(us) * time.Microsecond, ok
		}
	}
	return 0, false
}
