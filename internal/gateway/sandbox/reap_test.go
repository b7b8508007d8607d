package sandbox

import (
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"golang.org/x/sys/unix"
)

// TestOrphansAreReaped: a gateway that is its container's entrypoint (the first
// process of its PID namespace) adopts every process whose parent exits. A
// function that forks twice, its child exiting first, hands it one such process
// per fork; nothing waited for them, so each stayed a zombie of the gateway for
// good: a pid, and a task its user's process limit counts. The test makes
// itself a subreaper, which adopts as the first process does.
func TestOrphansAreReaped(t *testing.T) {
	if err := unix.Prctl(unix.PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0); err != nil {
		t.Fatal(err)
	}
	defer unix.Prctl(unix.PR_SET_CHILD_SUBREAPER, 0, 0, 0, 0)
	for name, command := range modes(t) {
		t.Run(name, func(t *testing.T) {
			run(t, command, Spec{}, `import os
for _ in range(10):
    if os.fork() == 0:
        if os.fork() == 0:
            os._exit(0)
        os._exit(0)
    os.wait()
`)
			var left []string
			for deadline := time.Now().Add(5 * time.Second); time.Now().Before(deadline); time.Sleep(20 * time.Millisecond) {
				if left = zombieChildren(); len(left) == 0 {
					return
				}
			}
			t.Errorf("%d zombies left to the caller: %v", len(left), left)
		})
	}
}

// zombieChildren are the exited, unreaped children of the test process.
func zombieChildren() []string {
	var out []string
	stats, _ := filepath.Glob("/proc/[0-9]*/stat")
	for _, p := range stats {
		raw, err := os.ReadFile(p)
		if err != nil {
			continue
		}
		s := string(raw)
		end := strings.LastIndexByte(s, ')')
		if f := strings.Fields(s[end+1:]); len(f) > 2 && f[0] == "Z" && f[1] == strconv.Itoa(os.Getpid()) {
			out = append(out, s[:end+1]+" pgrp "+f[2])
		}
	}
	return out
}

// TestWaitExitLeavesTheProcessToBeReaped: WaitExit, through a pidfd or by
// looking now and then when no descriptor is to be had, returns once its child
// has exited and not before, and leaves its status to the child's Wait.
func TestWaitExitLeavesTheProcessToBeReaped(t *testing.T) {
	for name, wait := range map[string]func(int){
		"pidfd":   WaitExit,
		"polling": func(pid int) { pollExit(pid, 10*time.Millisecond) },
	} {
		t.Run(name, func(t *testing.T) {
			cmd := exec.Command("sh", "-c", "read line; exit 7")
			stdin, err := cmd.StdinPipe()
			if err != nil {
				t.Fatal(err)
			}
			if err := cmd.Start(); err != nil {
				t.Fatal(err)
			}
			done := make(chan struct{})
			go func() {
				wait(cmd.Process.Pid)
				close(done)
			}()
			select {
			case <-done:
				t.Fatal("WaitExit returned while its process ran")
			case <-time.After(200 * time.Millisecond):
			}
			stdin.Close()
			select {
			case <-done:
			case <-time.After(10 * time.Second):
				t.Fatal("WaitExit did not return 10 s after its process exited")
			}
			err = cmd.Wait()
			if code := cmd.ProcessState.ExitCode(); code != 7 {
				t.Errorf("Wait after WaitExit: exit code %d (%v), want 7", code, err)
			}
		})
	}
}

// TestKillSignalsNoReapedGroup: a Kill that races with its command's exit
// signals the command's process group before the process can be reaped, never
// after: once reaped, the group's number may be another worker's (pid_max is
// often 32768, and a worker can fork through that many in a few seconds).
func TestKillSignalsNoReapedGroup(t *testing.T) {
	cmd := exec.Command("sh", "-c", "read line")
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	stdin, err := cmd.StdinPipe()
	if err != nil {
		t.Fatal(err)
	}
	c := Plain(cmd)
	if err := c.Start(); err != nil {
		t.Fatal(err)
	}
	orig := killGroup
	t.Cleanup(func() { killGroup = orig })
	inKill := make(chan struct{})
	var late atomic.Bool
	var calls atomic.Int32
	killGroup = func(pgid int) {
		if calls.Add(1) == 1 { // Kill's: the process exits meanwhile
			close(inKill)
			time.Sleep(300 * time.Millisecond)
			select {
			case <-c.Exited():
				late.Store(true) // it may have been reaped already
			default:
			}
		}
		orig(pgid)
	}
	killed := make(chan struct{})
	go func() {
		c.Kill()
		close(killed)
	}()
	<-inKill
	stdin.Close()
	<-killed
	<-c.Exited()
	_ = cmd.Wait()
	if late.Load() {
		t.Error("Kill signalled the process group after its process could be reaped")
	}
}

// TestWaitReapsAfterTheGroupIsKilled: a command's Wait reaps its process only
// once its process group was killed, so that the kill cannot reach a process
// group that took the freed number.
func TestWaitReapsAfterTheGroupIsKilled(t *testing.T) {
	cmd := exec.Command("sh", "-c", "exit 0")
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	orig := killGroup
	t.Cleanup(func() { killGroup = orig })
	var killed atomic.Bool
	killGroup = func(pgid int) {
		time.Sleep(300 * time.Millisecond) // the process has exited: Wait could reap it now
		orig(pgid)
		killed.Store(true)
	}
	c := Plain(cmd)
	if err := c.Start(); err != nil {
		t.Fatal(err)
	}
	if err := c.Wait(); err != nil {
		t.Fatal(err)
	}
	if !killed.Load() {
		t.Error("Wait reaped the process before its process group was killed")
	}
}

// TestSignalAfterExitSignalsNoPid: a command whose process has exited, and may
// have been reaped (its pid another process's), is signalled no more.
func TestSignalAfterExitSignalsNoPid(t *testing.T) {
	cmd := exec.Command("sh", "-c", "exit 0")
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	c := Plain(cmd)
	if err := c.Start(); err != nil {
		t.Fatal(err)
	}
	_ = c.Wait()
	if err := c.Signal(syscall.SIGTERM); !errors.Is(err, os.ErrProcessDone) {
		t.Errorf("Signal after the command exited and was reaped: %v, want %v", err, os.ErrProcessDone)
	}
}
