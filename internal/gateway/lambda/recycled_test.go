package lambda

import (
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"
)

// TestDeadWorkersGroupIsNotKilledOnceRecycled: a worker that exits by itself
// after answering (its function ends its process) is reaped at once, but only
// replaced when its function is next called, which kills its process group.
// By then the group's number may be another process group's: a function can
// see the pids it is given and spin them round (fork and exit) until the next
// one is its dead worker's, so that the gateway's next worker, another
// function's, leads a group of that number, and then call its own function
// again. The gateway, which may signal every worker (the same user, or root
// with CAP_KILL), must not kill that group. The test makes the decoy group with
// the kernel's ns_last_pid, as the spinning would.
func TestDeadWorkersGroupIsNotKilledOnceRecycled(t *testing.T) {
	if os.Geteuid() != 0 || inLandlockChild() {
		t.Skip("choosing the next pid (ns_last_pid) needs root")
	}
	// A worker with its own interpreter (the Landlock sandbox's, and any where a
	// fork fails): a forked one leads no process group of the gateway's, and is
	// killed through a pidfd and its cgroup.
	opts := sandboxed(t, Options{PythonPoolSize: 1, PythonZygote: ZygoteOff})
	rt := NewPython(opts)
	c := mustCompile(t, rt, pyFn("quitter", pyEcho))
	if _, err := invoke(t, c, echoRequest("x")); err != nil {
		t.Fatal(err)
	}
	pids := workerProcesses("test/quitter")
	if len(pids) != 1 {
		t.Fatalf("workers of the function: %v, want one", pids)
	}
	group := launchedAs(t, pids[0]) // the group the gateway kills: its child's
	// The worker dies while idle, unknown to the gateway (as one whose function
	// armed a timer would: killed here, so that a loaded machine cannot make it
	// die before its answer).
	if err := syscall.Kill(pids[0], syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}

	for deadline := time.Now().Add(10 * time.Second); groupLives(group); time.Sleep(20 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("the worker's process group %d outlived it", group)
		}
	}
	decoy := decoyWithPID(t, group)
	done := make(chan struct{})
	go func() { _ = decoy.Wait(); close(done) }()
	if _, err := invoke(t, c, echoRequest("y")); err != nil { // replaces the dead worker
		t.Fatal(err)
	}
	select {
	case <-done:
		t.Fatalf("replacing the dead worker killed process group %d, another's by then", group)
	case <-time.After(time.Second): // the kill, if any, came before the call's answer
	}
}

// launchedAs is the process the gateway started for the worker pid (its
// ancestor that is this process's child), which leads the worker's process
// group.
func launchedAs(t *testing.T, pid int) int {
	for pid > 1 {
		raw, err := os.ReadFile(filepath.Join("/proc", strconv.Itoa(pid), "stat"))
		if err != nil {
			t.Fatal(err)
		}
		s := string(raw)
		ppid, err := strconv.Atoi(strings.Fields(s[strings.LastIndexByte(s, ')')+1:])[1])
		if err != nil {
			t.Fatal(err)
		}
		if ppid == os.Getpid() {
			return pid
		}
		pid = ppid
	}
	t.Fatal("the worker is not a descendant of this process")
	return 0
}

// groupLives reports whether any process (or its pid) holds the number group.
func groupLives(group int) bool {
	if _, err := os.Stat(filepath.Join("/proc", strconv.Itoa(group))); err == nil {
		return true
	}
	return syscall.Kill(-group, 0) == nil
}

// decoyWithPID starts a sleeping process that leads a process group of the
// number pid, choosing it as the next pid through ns_last_pid; other processes
// of the host may take it first, so it tries a few times.
func decoyWithPID(t *testing.T, pid int) *exec.Cmd {
	for range 50 {
		if err := os.WriteFile("/proc/sys/kernel/ns_last_pid", []byte(strconv.Itoa(pid-1)), 0); err != nil {
			t.Skipf("choosing the next pid: %v", err)
		}
		cmd := exec.Command("/usr/bin/sleep", "60")
		cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		if cmd.Process.Pid == pid {
			t.Cleanup(func() { _ = cmd.Process.Kill() })
			return cmd
		}
		_ = cmd.Process.Kill()
		_ = cmd.Wait()
	}
	t.Skipf("pid %d was always taken by another process first", pid)
	return nil
}

// TestUnsandboxedWorkerGroupIsNotSignalledOnceReaped: an unsandboxed worker
// that exited is killed when the pool drops it, after it may have been reaped,
// when its process group's number may be another group's. Its command is a
// sandbox.Plain command, whose group is killed when it exits, before it is
// reaped, and never signalled after (sandbox's TestKillSignalsNoReapedGroup,
// on a Plain command).
func TestUnsandboxedWorkerGroupIsNotSignalledOnceReaped(t *testing.T) {
	fn := pyFn("exits", pyEchoUnless("import os; os._exit(3)"))
	c := mustCompile(t, NewPython(Options{PythonBinary: "/usr/bin/python3", InsecureNoSandbox: true, PythonPoolSize: 1}), fn)
	defer c.Close()
	for range 3 {
		_, err := invoke(t, c, echoRequest("bad"))
		assertInvokeError(t, err, ReasonCrash, "exit status 3")
		assertEcho(t, c, "after")
	}
	w, err := c.(*pyFunction).acquire(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	defer c.(*pyFunction).pool.put(w, true)
	if w.sb == nil || w.fk != nil {
		t.Errorf("an unsandboxed worker's command is not a sandbox.Command, whose group kill waits for its exit and stops before its reaping")
	}
}
