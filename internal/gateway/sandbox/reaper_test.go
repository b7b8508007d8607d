package sandbox

import (
	"bytes"
	"errors"
	"io"
	"os"
	"os/exec"
	"strconv"
	"testing"

	"golang.org/x/sys/unix"
)

// reaperOrSkip is a reaper's memfd; the test is skipped where no reaper is
// committed for the architecture.
func reaperOrSkip(t *testing.T) *os.File {
	t.Helper()
	f, err := reaperFile()
	if err != nil {
		t.Fatal(err)
	}
	if f == nil {
		t.Skip("no reaper for this architecture")
	}
	t.Cleanup(func() { f.Close() })
	return f
}

// TestReaperFileIsSealed: the memfd handed to a zygote holds the reaper and
// nothing can change it, not even through a descriptor opened for writing
// anew (as /proc/<zygote>/fd/<n> would give one who may reach it).
func TestReaperFileIsSealed(t *testing.T) {
	f := reaperOrSkip(t)
	seals, err := unix.FcntlInt(f.Fd(), unix.F_GET_SEALS, 0)
	if err != nil {
		t.Fatal(err)
	}
	if seals&reaperSeals != reaperSeals {
		t.Errorf("seals %#x, want at least %#x", seals, reaperSeals)
	}
	fi, err := f.Stat()
	if err != nil {
		t.Fatal(err)
	}
	if fi.Mode().Perm() != 0o555 || fi.Size() != int64(len(reaperProgram)) {
		t.Errorf("mode %v, size %d: want r-xr-xr-x and %d bytes", fi.Mode().Perm(), fi.Size(), len(reaperProgram))
	}
	rw, err := os.OpenFile("/proc/self/fd/"+strconv.Itoa(int(f.Fd())), os.O_RDWR, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer rw.Close()
	if _, err := rw.WriteAt([]byte{0}, 0); !errors.Is(err, unix.EPERM) {
		t.Errorf("writing the reaper: %v, want EPERM", err)
	}
	if err := rw.Truncate(0); !errors.Is(err, unix.EPERM) {
		t.Errorf("truncating the reaper: %v, want EPERM", err)
	}
	if err := rw.Truncate(1 << 20); !errors.Is(err, unix.EPERM) {
		t.Errorf("growing the reaper: %v, want EPERM", err)
	}
	if _, err := unix.Mmap(int(rw.Fd()), 0, len(reaperProgram), unix.PROT_WRITE, unix.MAP_SHARED); !errors.Is(err, unix.EPERM) {
		t.Errorf("mapping the reaper writable: %v, want EPERM", err)
	}
	if _, err := unix.FcntlInt(rw.Fd(), unix.F_ADD_SEALS, 0); !errors.Is(err, unix.EPERM) {
		t.Errorf("changing the seals: %v, want EPERM", err)
	}
	got, err := io.ReadAll(io.NewSectionReader(f, 0, 1<<20))
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(got, reaperProgram) {
		t.Error("the memfd does not hold the reaper")
	}
}

// TestReaperProgram runs the reaper as a shell's replacement, its descriptor
// 3 the memfd: it exits with its worker's status as the Python init does
// (128+n for signal n), and reaps the other children it has meanwhile; given
// a command after "--", it forks that command as its worker.
func TestReaperProgram(t *testing.T) {
	f := reaperOrSkip(t)
	for _, tt := range []struct {
		name, script string
		want         int
	}{
		{"exit", `(exit 7) & exec /proc/self/fd/3 $!`, 7},
		{"exit 0", `true & exec /proc/self/fd/3 $!`, 0},
		{"killed", `sh -c 'kill -KILL $$' & exec /proc/self/fd/3 $!`, 128 + 9},
		{"terminated", `sh -c 'kill -TERM $$' & exec /proc/self/fd/3 $!`, 128 + 15},
		// The worker outlives two other children, which end first and must
		// be reaped, not taken for it.
		{"others first", `(exit 5) & (exit 6) & sleep 0.3 & w=$!; (sleep 0.5; exit 4) & exec /proc/self/fd/3 $w`, 0},
		{"no such child", `exec /proc/self/fd/3 99999`, 1},
		{"no pid", `exec /proc/self/fd/3`, 126},
		{"not a pid", `exec /proc/self/fd/3 2x`, 126},
		// Started with a command (a sandbox's first process), it forks
		// it and ends with it.
		{"command exit", `exec /proc/self/fd/3 -- /bin/sh -c 'exit 7'`, 7},
		{"command killed", `exec /proc/self/fd/3 -- /bin/sh -c 'kill -KILL $$'`, 128 + 9},
		{"command orphans first", `exec /proc/self/fd/3 -- /bin/sh -c '(exit 5) & sleep 0.2; exit 3'`, 3},
		{"command missing", `exec /proc/self/fd/3 -- /nonexistent`, 127},
		{"no command", `exec /proc/self/fd/3 --`, 126},
	} {
		t.Run(tt.name, func(t *testing.T) {
			cmd := exec.Command("/bin/sh", "-c", tt.script)
			cmd.ExtraFiles = []*os.File{f}
			err := cmd.Run()
			var exit *exec.ExitError
			code := 0
			if errors.As(err, &exit) {
				code = exit.ExitCode()
			} else if err != nil {
				t.Fatal(err)
			}
			if code != tt.want {
				t.Errorf("%s: exit status %d, want %d", tt.script, code, tt.want)
			}
		})
	}
}
