package sandbox

import (
	"os"
	"os/signal"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	"golang.org/x/sys/unix"
)

// reapOrphans starts, once per process, the reaping of the processes of
// sandboxed commands that were orphaned and then adopted by the caller: a
// caller that is the first process of its PID namespace (the gateway as a
// container's entrypoint) or a subreaper adopts every process whose parent
// exits, and a function that forks twice leaves one. Nothing else waits for
// them: each exited one stayed a zombie, holding a pid and counting against its
// user's process limit, for as long as the caller ran.
//
// Only an adopted process is reaped: one in a process group neither of its own
// nor of the caller's, or one in a PID namespace below the caller's (the first
// process of a namespace sandbox, which bubblewrap leaves unreaped). A process
// the caller started itself is in the caller's PID namespace and leads a group
// of its own (the sandbox's commands, and any with Setpgid) or stays in the
// caller's, and is left to whoever waits for it (exec.Cmd.Wait).
func reapOrphans() {
	reaper.Do(func() {
		ch := make(chan os.Signal, 1)
		signal.Notify(ch, syscall.SIGCHLD)
		go func() {
			tick := time.NewTicker(time.Minute)
			defer tick.Stop()
			for {
				select {
				case <-ch:
				case <-tick.C:
				}
				reapAdopted()
			}
		}()
	})
}

var reaper sync.Once

// reapAdopted reaps the exited processes that the caller adopted.
func reapAdopted() {
	self, group := os.Getpid(), unix.Getpgrp()
	for _, p := range childStats() {
		raw, err := os.ReadFile(p)
		if err != nil {
			continue
		}
		// pid (comm) state ppid pgrp ...; comm may hold spaces and parentheses.
		s := string(raw)
		end := strings.LastIndexByte(s, ')')
		if end < 0 {
			continue
		}
		f := strings.Fields(s[end+1:])
		if len(f) < 3 || f[0] != "Z" || f[1] != strconv.Itoa(self) {
			continue
		}
		pid, err1 := strconv.Atoi(strings.TrimSpace(s[:strings.IndexByte(s, ' ')]))
		pgrp, err2 := strconv.Atoi(f[2])
		if err1 != nil || err2 != nil || (pgrp == pid || pgrp == group) && !nestedPID(pid) {
			continue
		}
		var ws unix.WaitStatus
		_, _ = unix.Wait4(pid, &ws, unix.WNOHANG, nil)
	}
}

// childStats names the stat files of the caller's children: those its threads
// list in /proc/self/task/*/children, which is a few files however many
// processes the host runs. A kernel without that list (CONFIG_PROC_CHILDREN)
// gets every process's, and reapAdopted picks the children by their parent. The
// kernel may leave out a child that comes or goes while a list is read; a
// zombie left out is reaped at the next SIGCHLD or the next minute's pass.
func childStats() []string {
	lists, _ := filepath.Glob("/proc/self/task/[0-9]*/children")
	var stats []string
	read := false
	for _, l := range lists {
		raw, err := os.ReadFile(l)
		if err != nil {
			continue
		}
		read = true
		for _, pid := range strings.Fields(string(raw)) {
			stats = append(stats, "/proc/"+pid+"/stat")
		}
	}
	if !read {
		stats, _ = filepath.Glob("/proc/[0-9]*/stat")
	}
	return stats
}

// Children lists the child processes of pid, from each of its threads' list
// (/proc/PID/task/*/children; none where the kernel keeps no such list). The
// kernel may leave out a child that comes or goes while a list is read.
func Children(pid int) []int {
	var out []int
	lists, _ := filepath.Glob("/proc/" + strconv.Itoa(pid) + "/task/*/children")
	for _, l := range lists {
		raw, err := os.ReadFile(l)
		if err != nil {
			continue
		}
		for _, f := range strings.Fields(string(raw)) {
			if c, err := strconv.Atoi(f); err == nil {
				out = append(out, c)
			}
		}
	}
	return out
}

// nestedPID reports whether the process pid lives in a PID namespace below the
// caller's: its status names more than one pid.
func nestedPID(pid int) bool {
	raw, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/status")
	if err != nil {
		return false
	}
	for _, line := range strings.Split(string(raw), "\n") {
		if rest, ok := strings.CutPrefix(line, "NSpid:"); ok {
			return len(strings.Fields(rest)) > 1
		}
	}
	return false
}
