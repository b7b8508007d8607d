package sandbox

import (
	"context"
	"fmt"
	"os"
	"strconv"
	"strings"
	"sync"
	"syscall"

	"golang.org/x/sys/unix"
)

// Forked is a zygote's child.
type Forked struct {
	// Stdin, Stdout and Stderr are the caller's ends of the child's.
	Stdin  *os.File
	Stdout *os.File
	Stderr *os.File

	pid    int // the host pid of the child, its worker's init
	pidfd  int // a pidfd of pid, which Kill signals through (0: none)
	cgroup *cgroup
	zygote *Zygote
	uid    int
	mu     sync.Mutex // guards pidfd

	once   sync.Once
	exited chan struct{}
	status syscall.WaitStatus
	known  bool // status was reported by the zygote
}

// PID is the child's host pid, 0 when not known: the init of the child's PID
// namespace, whose child (Worker) is the worker.
func (f *Forked) PID() int { return f.pid }

// Worker is the host pid of the child's worker (its init's child), 0 when
// not known (or not yet forked).
func (f *Forked) Worker() int {
	if f.pid == 0 {
		return 0
	}
	raw, _ := os.ReadFile(fmt.Sprintf("/proc/%d/task/%d/children", f.pid, f.pid))
	fields := strings.Fields(string(raw))
	if len(fields) == 0 {
		return 0
	}
	pid, _ := strconv.Atoi(fields[0])
	return pid
}

// exit records the child's end and cleans what it held.
func (f *Forked) exit(status syscall.WaitStatus, known bool) {
	f.once.Do(func() {
		f.status, f.known = status, known
		close(f.exited)
		f.mu.Lock()
		if f.pidfd != 0 {
			_ = unix.Close(f.pidfd)
			f.pidfd = 0
		}
		f.mu.Unlock()
		go func() {
			f.cgroup.kill()
			f.cgroup.remove()
			releaseUID(f.uid)
		}()
	})
}

// Wait waits for the child to exit and returns how it ended.
func (f *Forked) Wait(ctx context.Context) (syscall.WaitStatus, bool) {
	select {
	case <-f.exited:
		return f.status, f.known
	case <-ctx.Done():
		return 0, false
	}
}

// Exited is closed once the child has exited.
func (f *Forked) Exited() <-chan struct{} { return f.exited }

// Zygote is the zygote that forked the child.
func (f *Forked) Zygote() *Zygote { return f.zygote }

// ended reports whether the child has exited, or its init has: its zygote
// may not have reported it yet (a stopped zygote reports nothing).
func (f *Forked) ended() bool {
	select {
	case <-f.exited:
		return true
	default:
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.pidfd == 0 {
		return false
	}
	fds := []unix.PollFd{{Fd: int32(f.pidfd), Events: unix.POLLIN}}
	n, err := unix.Poll(fds, 0)
	return err == nil && n > 0
}

// Kill kills every process of the child.
func (f *Forked) Kill() {
	// Through the pidfd: the pid may be another process's once the zygote
	// has reaped the child. Its init's end ends its PID namespace.
	f.mu.Lock()
	if f.pidfd != 0 {
		_ = unix.PidfdSendSignal(f.pidfd, unix.SIGKILL, nil, 0)
	}
	f.mu.Unlock()
	f.cgroup.kill()
}

// Usage reports what the child's processes hold, from its cgroup.
func (f *Forked) Usage() (Usage, bool) { return f.cgroup.usage() }

// Foreground gives a child forked in the background (Limits.Background) the
// usual processor weight; for any other it does nothing.
func (f *Forked) Foreground() error { return f.cgroup.foreground() }

// Memory is the memory charged to the child's cgroup.
func (f *Forked) Memory() (int64, bool) { return f.cgroup.memory() }

// Tasks is the number of threads and processes in the forked worker's cgroup
// (its init counted); false without one.
func (f *Forked) Tasks() (int, bool) { return f.cgroup.tasks() }

// lockedTail keeps the last 8 KiB written to it.
type lockedTail struct {
	mu  sync.Mutex
	buf []byte
}

func (t *lockedTail) Write(p []byte) (int, error) {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.buf = append(t.buf, p...)
	if len(t.buf) > 8<<10 {
		t.buf = t.buf[len(t.buf)-8<<10:]
	}
	return len(p), nil
}

func (t *lockedTail) String() string {
	t.mu.Lock()
	defer t.mu.Unlock()
	return string(t.buf)
}
