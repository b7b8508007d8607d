package sandbox

import (
	"bufio"
	"errors"
	"fmt"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"time"
	"unsafe"
)

// cgroupV1Controllers are the cgroup v1 hierarchies a command gets a cgroup in:
// memory, pids and cpu bound it, cpuacct counts its processor time.
var cgroupV1Controllers = []string{"memory", "pids", "cpu", "cpuacct"}

// cgroupV1Needed are the hierarchies without which commands get no cgroup.
var cgroupV1Needed = []string{"memory", "pids", "cpu"}

// cgroups is where a sandbox makes each command a cgroup of its own: a directory
// metalambda-<pid> under the caller's own cgroup, in every cgroup v1 hierarchy
// of cgroupV1Controllers, or in the cgroup v2 tree with the memory, pids and cpu
// controllers enabled. The caller must be allowed to create cgroups there (root
// on a host; in a container, only where the runtime delegated its cgroup).
type cgroups struct {
	v2      bool
	parents map[string]string // controller (v1) or "" (v2) → the caller's metalambda-<pid> directory
	reason  error             // why there are none, when parents is empty
}

// cgroupRoot is where cgroup file systems are mounted.
var cgroupRoot = "/sys/fs/cgroup"

// newCgroups finds where commands can get cgroups; without a place, commands
// run in the caller's cgroup and reason says why.
func newCgroups() *cgroups {
	own, err := ownCgroups()
	if err != nil {
		return &cgroups{reason: err}
	}
	name := parentName()
	parentUsers.Lock()
	defer parentUsers.Unlock()
	cs, err := v1Cgroups(own, name)
	if err != nil {
		v2, v2err := v2Cgroups(own, name)
		if v2err != nil {
			return &cgroups{reason: fmt.Errorf("cgroup v1: %v; cgroup v2: %v", err, v2err)}
		}
		cs = v2
	}
	for _, dir := range cs.parents {
		parentUsers.n[dir]++
	}
	return cs
}

// parentUsers counts the sandboxes of the process that use each of its
// metalambda-<pid> directories, which the last one to close removes.
var parentUsers = struct {
	sync.Mutex
	n map[string]int
}{n: map[string]int{}}

// close removes the caller's metalambda-<pid> directories once no sandbox of
// the process uses them, waiting a few seconds for the cgroups of commands that
// have just exited to go.
func (cs *cgroups) close() {
	if cs == nil {
		return
	}
	parentUsers.Lock()
	defer parentUsers.Unlock()
	deadline := time.Now().Add(5 * time.Second)
	for _, dir := range cs.parents {
		if parentUsers.n[dir]--; parentUsers.n[dir] > 0 {
			continue
		}
		delete(parentUsers.n, dir)
		for syscall.Rmdir(dir) == syscall.EBUSY && time.Now().Before(deadline) {
			time.Sleep(20 * time.Millisecond)
		}
	}
}

// Cgroups reports whether commands get cgroups of their own, and why not.
func (s *Sandbox) Cgroups() (bool, error) {
	if s.cgroups == nil || len(s.cgroups.parents) == 0 {
		if s.cgroups == nil {
			return false, errors.New("no cgroups")
		}
		return false, s.cgroups.reason
	}
	return true, nil
}

// describe names where commands' cgroups are made.
func (cs *cgroups) describe() string {
	if cs.v2 {
		return "v2 under " + cs.parents[""]
	}
	return "v1 under " + cs.parents["memory"] + " and the other hierarchies"
}

// ownCgroups reads /proc/self/cgroup: each controller's (or "" for v2) path.
func ownCgroups() (map[string]string, error) {
	f, err := os.Open("/proc/self/cgroup")
	if err != nil {
		return nil, err
	}
	defer f.Close()
	own := map[string]string{}
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		parts := strings.SplitN(sc.Text(), ":", 3)
		if len(parts) != 3 {
			continue
		}
		if parts[1] == "" {
			own[""] = parts[2]
			continue
		}
		for _, c := range strings.Split(parts[1], ",") {
			own[c] = parts[2]
		}
	}
	return own, sc.Err()
}

// v1Cgroups makes name under the caller's cgroup in each v1 hierarchy.
func v1Cgroups(own map[string]string, name string) (*cgroups, error) {
	cs := &cgroups{parents: map[string]string{}}
	for _, c := range cgroupV1Controllers {
		dir := v1Dir(own, c, name)
		if dir == "" {
			continue
		}
		if err := os.Mkdir(dir, 0o755); err != nil && !errors.Is(err, os.ErrExist) {
			cs.removeParents()
			return nil, fmt.Errorf("creating %s: %w", dir, err)
		}
		cs.parents[c] = dir
	}
	for _, c := range cgroupV1Needed {
		if cs.parents[c] == "" {
			cs.removeParents()
			return nil, fmt.Errorf("no %s hierarchy under %s", c, cgroupRoot)
		}
	}
	removeStale(cs.parents)
	return cs, nil
}

// v2Cgroups makes name under the caller's cgroup of the v2 tree, with the
// memory, pids and cpu controllers enabled for its children.
func v2Cgroups(own map[string]string, name string) (*cgroups, error) {
	dir := v2Dir(own, name)
	if dir == "" {
		return nil, errors.New("the process is in no cgroup v2")
	}
	if err := os.Mkdir(dir, 0o755); err != nil && !errors.Is(err, os.ErrExist) {
		return nil, fmt.Errorf("creating %s: %w", dir, err)
	}
	cs := &cgroups{v2: true, parents: map[string]string{"": dir}}
	if err := os.WriteFile(filepath.Join(dir, "cgroup.subtree_control"), []byte("+memory +pids +cpu"), 0); err != nil {
		cs.removeParents()
		return nil, fmt.Errorf("enabling the memory, pids and cpu controllers in %s (they must be enabled in the cgroups above it): %w", dir, err)
	}
	removeStale(cs.parents)
	return cs, nil
}

// v1Dir is name under the caller's cgroup in the v1 hierarchy of controller
// c; "" where there is no such hierarchy. Co-mounted controllers (cpu,cpuacct)
// share a directory, reached through a link named for each.
func v1Dir(own map[string]string, c, name string) string {
	path, ok := own[c]
	mount, err := filepath.EvalSymlinks(filepath.Join(cgroupRoot, c))
	if _, statErr := os.Stat(filepath.Join(mount, "cgroup.procs")); !ok || err != nil || statErr != nil {
		return ""
	}
	return filepath.Join(mount, path, name)
}

// v2Dir is name under the caller's cgroup of the v2 tree; "" where the
// process is in none.
func v2Dir(own map[string]string, name string) string {
	path, ok := own[""]
	if !ok {
		return ""
	}
	mount := cgroupRoot
	if _, err := os.Stat(filepath.Join(mount, "cgroup.controllers")); err != nil {
		mount = filepath.Join(cgroupRoot, "unified")
	}
	return filepath.Join(mount, path, name)
}

// MemoryCgroupDir is the directory in which this process's sandboxes make
// their commands' memory cgroups (the metalambda-<pid> of the memory
// hierarchy, or of the v2 tree), and whether it is cgroup v2; "" while there
// is none. For benchmarks and tools that read what the commands use.
func MemoryCgroupDir() (dir string, v2 bool) {
	own, err := ownCgroups()
	if err != nil {
		return "", false
	}
	name := parentName()
	if dir := v1Dir(own, "memory", name); dir != "" && isDir(dir) {
		return dir, false
	}
	if dir := v2Dir(own, name); dir != "" && isDir(dir) {
		return dir, true
	}
	return "", false
}

// parentName is the name of this process's directory in each hierarchy.
func parentName() string { return "metalambda-" + strconv.Itoa(os.Getpid()) }

func isDir(p string) bool {
	fi, err := os.Stat(p)
	return err == nil && fi.IsDir()
}

func (cs *cgroups) removeParents() {
	for _, dir := range cs.parents {
		_ = syscall.Rmdir(dir)
	}
}

var staleOnce sync.Once

// removeStale removes, once per process, the cgroups that gateways which have
// exited left beside parents (metalambda-<pid> of a pid that is gone).
func removeStale(parents map[string]string) {
	staleOnce.Do(func() {
		for _, dir := range parents {
			siblings, _ := filepath.Glob(filepath.Join(filepath.Dir(dir), "metalambda-*"))
			for _, s := range siblings {
				pid, err := strconv.Atoi(strings.TrimPrefix(filepath.Base(s), "metalambda-"))
				if err != nil || pid == os.Getpid() || syscall.Kill(pid, 0) == nil {
					continue
				}
				children, _ := filepath.Glob(filepath.Join(s, "w-*"))
				for _, c := range children {
					_ = syscall.Rmdir(c)
				}
				_ = syscall.Rmdir(s)
			}
		}
	})
}

// cgroup is one command's cgroup: a directory per v1 hierarchy, or one v2
// directory.
type cgroup struct {
	v2   bool
	dirs map[string]string // controller (v1) or "" (v2) → directory

	mu       sync.Mutex
	counters [3]*os.File // pids.current, the processor time's and the memory's files, opened by usage
	removed  bool

	background atomic.Bool // started at backgroundWeight (Limits.Background), until foreground
}

// The processor weights of a command started in the background and of any
// other, in cgroup v1's cpu.shares and v2's cpu.weight (whose defaults are
// 1024 and 100): an eighth.
const (
	backgroundShares, foregroundShares = "128", "1024"
	backgroundWeight, foregroundWeight = "12", "100"
)

// create makes a cgroup bounded by l: memory, tasks (Processes) and processor
// time (CPU). A nil cgroups makes none, and a nil cgroup does nothing.
func (cs *cgroups) create(l Limits) (*cgroup, error) {
	if cs == nil || len(cs.parents) == 0 {
		return nil, nil
	}
	name := "w-" + randomName()
	cg := &cgroup{v2: cs.v2, dirs: map[string]string{}}
	for c, parent := range cs.parents {
		dir := filepath.Join(parent, name)
		if slices.Contains(slices.Collect(maps.Values(cg.dirs)), dir) {
			cg.dirs[c] = dir // a co-mounted controller's
			continue
		}
		if err := os.Mkdir(dir, 0o755); err != nil {
			cg.remove()
			return nil, fmt.Errorf("sandbox: the command's cgroup: %w", err)
		}
		cg.dirs[c] = dir
	}
	if err := cg.limit(l); err != nil {
		cg.remove()
		return nil, fmt.Errorf("sandbox: the command's cgroup: %w", err)
	}
	return cg, nil
}

// cpuPeriod is the CFS period of a command's processor-time bound, in µs.
const cpuPeriod = 100000

func (cg *cgroup) limit(l Limits) error {
	var writes [][2]string
	quota := strconv.FormatInt(l.CPU*cpuPeriod/1000, 10)
	if cg.v2 {
		writes = [][2]string{{"memory.max", limitText(l.Memory, "max")}, {"memory.swap.max", "0"}, {"pids.max", limitText(l.Processes, "max")}}
		if l.CPU > 0 {
			writes = append(writes, [2]string{"cpu.max", quota + " " + strconv.Itoa(cpuPeriod)})
		}
		if l.Background {
			writes = append(writes, [2]string{"cpu.weight", backgroundWeight})
		}
	} else {
		writes = [][2]string{{"memory/memory.limit_in_bytes", limitText(l.Memory, "-1")}, {"memory/memory.memsw.limit_in_bytes", limitText(l.Memory, "-1")}, {"pids/pids.max", limitText(l.Processes, "max")}}
		if l.CPU > 0 {
			writes = append(writes, [2]string{"cpu/cpu.cfs_period_us", strconv.Itoa(cpuPeriod)}, [2]string{"cpu/cpu.cfs_quota_us", quota})
		}
		if l.Background {
			writes = append(writes, [2]string{"cpu/cpu.shares", backgroundShares})
		}
	}
	cg.background.Store(l.Background)
	for _, w := range writes {
		path := cg.file(w[0])
		err := os.WriteFile(path, []byte(w[1]), 0)
		if errors.Is(err, os.ErrNotExist) && (strings.Contains(w[0], "swap") || strings.Contains(w[0], "memsw")) {
			continue // the kernel does not account swap
		}
		if err != nil {
			return fmt.Errorf("writing %s to %s: %w", w[1], path, err)
		}
	}
	return nil
}

// foreground gives a cgroup made in the background the usual processor
// weight; after a failure, the next call tries again.
func (cg *cgroup) foreground() error {
	if cg == nil || !cg.background.Load() {
		return nil
	}
	name, weight := "cpu/cpu.shares", foregroundShares
	if cg.v2 {
		name, weight = "cpu.weight", foregroundWeight
	}
	if err := os.WriteFile(cg.file(name), []byte(weight), 0); err != nil {
		return fmt.Errorf("sandbox: the command's processor weight: %w", err)
	}
	cg.background.Store(false)
	return nil
}

func limitText(v int64, none string) string {
	if v < 0 {
		return none
	}
	return strconv.FormatInt(v, 10)
}

// file is a file of the cgroup: "controller/name" in v1, "name" in v2.
func (cg *cgroup) file(name string) string {
	if cg.v2 {
		return filepath.Join(cg.dirs[""], name)
	}
	c, f, _ := strings.Cut(name, "/")
	return filepath.Join(cg.dirs[c], f)
}

// procs are the files a command's launcher joins its cgroup through: v1's
// tasks, where writing 0 moves the writing thread alone, which then executes the
// command (cgroup.procs moves the whole thread group under a lock that waits for
// an RCU grace period, 10 ms and more on a small machine); v2's cgroup.procs.
func (cg *cgroup) procs() []string {
	if cg == nil {
		return nil
	}
	name := "tasks"
	if cg.v2 {
		name = "cgroup.procs"
	}
	var files []string
	for _, dir := range cg.dirs {
		if f := filepath.Join(dir, name); !slices.Contains(files, f) {
			files = append(files, f)
		}
	}
	return files
}

// pids lists the processes in the cgroup.
func (cg *cgroup) pids() []int {
	raw, err := os.ReadFile(cg.file(cg.countFile("cgroup.procs")))
	if err != nil {
		return nil
	}
	var pids []int
	for _, f := range strings.Fields(string(raw)) {
		if pid, err := strconv.Atoi(f); err == nil {
			pids = append(pids, pid)
		}
	}
	return pids
}

// roots are the processes of the cgroup whose parent is outside it.
func (cg *cgroup) roots() []int {
	pids := cg.pids()
	in := map[int]bool{}
	for _, pid := range pids {
		in[pid] = true
	}
	var out []int
	for _, pid := range pids {
		if ppid, ok := parentOf(pid); ok && !in[ppid] {
			out = append(out, pid)
		}
	}
	return out
}

// parentOf reads a process's parent from /proc/<pid>/stat, whose second field
// (the command's name, in parentheses) may hold spaces and parentheses.
func parentOf(pid int) (int, bool) {
	raw, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
	if err != nil {
		return 0, false
	}
	i := strings.LastIndexByte(string(raw), ')')
	if i < 0 {
		return 0, false
	}
	fields := strings.Fields(string(raw[i+1:]))
	if len(fields) < 2 {
		return 0, false
	}
	ppid, err := strconv.Atoi(fields[1])
	return ppid, err == nil
}

// countFile names a file of the pids hierarchy in v1.
func (cg *cgroup) countFile(name string) string {
	if cg.v2 {
		return name
	}
	return "pids/" + name
}

// kill sends SIGKILL to every process in the cgroup, without waiting for them
// to exit: at once with cgroup.kill in v2; in v1 to each process listed (one
// forked meanwhile is killed by remove, which kills again until the cgroup is
// empty; pids.max bounds how many there can be).
func (cg *cgroup) kill() {
	if cg == nil {
		return
	}
	if cg.v2 && os.WriteFile(cg.file("cgroup.kill"), []byte("1"), 0) == nil {
		return
	}
	for _, pid := range cg.pids() {
		_ = syscall.Kill(pid, syscall.SIGKILL)
	}
}

// remove removes the cgroup once its processes are gone, waiting up to a few
// seconds for killed ones to exit.
func (cg *cgroup) remove() {
	if cg == nil {
		return
	}
	cg.mu.Lock()
	cg.closeCounters()
	cg.removed = true
	cg.mu.Unlock()
	deadline := time.Now().Add(5 * time.Second)
	for _, dir := range cg.dirs { // never changed after create: kill reads it meanwhile
		for {
			err := syscall.Rmdir(dir)
			if err == nil || errors.Is(err, syscall.ENOENT) || time.Now().After(deadline) {
				break
			}
			cg.kill()
			time.Sleep(10 * time.Millisecond)
		}
	}
}

// usage reads the cgroup's task count and processor time from descriptors it
// keeps open, without allocating: the gateway reads them after every call.
func (cg *cgroup) usage() (Usage, bool) {
	if cg == nil {
		return Usage{}, false
	}
	cg.mu.Lock()
	defer cg.mu.Unlock()
	if cg.removed {
		return Usage{}, false
	}
	if cg.counters[0] == nil {
		if err := cg.openCounters(); err != nil {
			return Usage{}, false
		}
	}
	var buf [512]byte
	n, err := cg.counters[0].ReadAt(buf[:], 0)
	if n == 0 && err != nil {
		return Usage{}, false
	}
	tasks, _ := leadingInt(buf[:n])
	n, err = cg.counters[1].ReadAt(buf[:], 0)
	if n == 0 && err != nil {
		return Usage{}, false
	}
	if !cg.v2 {
		ns, _ := leadingInt(buf[:n])
		return Usage{Tasks: int(tasks), CPU: time.Duration(ns)}, true
	}
	// cpu.stat starts with "usage_usec <n>".
	rest, ok := strings.CutPrefix(unsafeString(buf[:n]), "usage_usec ")
	if !ok {
		return Usage{}, false
	}
	us, _ := leadingInt([]byte(rest))
	return Usage{Tasks: int(tasks), CPU: time.Duration(us) * time.Microsecond}, true
}

// tasks reads the cgroup's task count alone.
func (cg *cgroup) tasks() (int, bool) {
	n, ok := cg.readCounter(0)
	return int(n), ok
}

// memory reads the memory charged to the cgroup from a descriptor it keeps
// open; the memory budget reads it, not every call.
func (cg *cgroup) memory() (int64, bool) {
	return cg.readCounter(2)
}

// readCounter reads the number that counter i (openCounters) starts with.
func (cg *cgroup) readCounter(i int) (int64, bool) {
	if cg == nil {
		return 0, false
	}
	cg.mu.Lock()
	defer cg.mu.Unlock()
	if cg.removed {
		return 0, false
	}
	if cg.counters[0] == nil {
		if err := cg.openCounters(); err != nil {
			return 0, false
		}
	}
	var buf [64]byte
	n, err := cg.counters[i].ReadAt(buf[:], 0)
	if n == 0 && err != nil {
		return 0, false
	}
	return leadingInt(buf[:n])
}

// openCounters opens the files usage reads.
func (cg *cgroup) openCounters() error {
	names := [3]string{"pids/pids.current", "cpuacct/cpuacct.usage", "memory/memory.usage_in_bytes"}
	if cg.v2 {
		names = [3]string{"pids.current", "cpu.stat", "memory.current"}
	}
	for i, name := range names {
		f, err := os.Open(cg.file(name))
		if err != nil {
			cg.closeCounters()
			return err
		}
		cg.counters[i] = f
	}
	return nil
}

func (cg *cgroup) closeCounters() {
	for i, f := range cg.counters {
		if f != nil {
			f.Close()
			cg.counters[i] = nil
		}
	}
}

// leadingInt parses the decimal number at the start of b.
func leadingInt(b []byte) (int64, bool) {
	var v int64
	i := 0
	for ; i < len(b) && b[i] >= '0' && b[i] <= '9'; i++ {
		v = v*10 + int64(b[i]-'0')
	}
	return v, i > 0
}

func unsafeString(b []byte) string {
	return unsafe.String(unsafe.SliceData(b), len(b))
}

// MemoryLimit is the smallest memory limit of the caller's cgroup and those
// above it that it can see (a container's own limit under a cgroup namespace);
// false when there is none.
func MemoryLimit() (int64, bool) {
	own, err := ownCgroups()
	if err != nil {
		return 0, false
	}
	file, path := "memory.max", own[""] // v2
	dir := cgroupRoot
	if p, ok := own["memory"]; ok {
		file, path, dir = "memory.limit_in_bytes", p, filepath.Join(cgroupRoot, "memory")
	} else if _, ok := own[""]; !ok {
		return 0, false
	}
	limit, found := int64(0), false
	for p := filepath.Clean("/" + path); ; p = filepath.Dir(p) {
		if v, ok := readLimit(filepath.Join(dir, p, file)); ok && (!found || v < limit) {
			limit, found = v, true
		}
		if p == "/" {
			return limit, found
		}
	}
}

// readLimit reads a memory limit file: a number of bytes, or "max" or a number
// near 2^63 (v1's way of saying none) for no limit.
func readLimit(path string) (int64, bool) {
	raw, err := os.ReadFile(path)
	if err != nil {
		return 0, false
	}
	v, err := strconv.ParseInt(strings.TrimSpace(string(raw)), 10, 64)
	if err != nil || v <= 0 || v >= 1<<62 {
		return 0, false
	}
	return v, true
}
