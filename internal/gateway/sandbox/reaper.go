package sandbox

import (
	"errors"
	"fmt"
	"os"

	"golang.org/x/sys/unix"
)

// The reaper (metalambda-init, reaper/reaper.c) is what a zygote's child runs
// as the init of its worker's PID namespace, instead of staying a forked copy
// of the zygote: a static program of a few hundred bytes that reaps orphans
// and exits with the worker's status, so that an init costs a few pages, not
// a forked interpreter's copied pages.
//
// Who can reach it, and why that is safe:
//   - The gateway writes it into a memfd (it has no seccomp filter; the
//     zygote's refuses memfd_create) and seals it: F_SEAL_WRITE, F_SEAL_SHRINK
//     and F_SEAL_GROW make its content final for every holder, whatever mode
//     a descriptor is opened in (even one reopened through /proc/<pid>/fd),
//     and F_SEAL_SEAL forbids undoing that. Its mode is r-x for all, and
//     its inode is owned by the host's root, which no user namespace of the
//     sandbox maps, so no zygote can change that mode either.
//   - The zygote holds the descriptor (close-on-exec) for as long as it
//     lives, beside its control socket; it runs no function's code.
//   - A forked worker inherits it at the fork and closes it, with every
//     descriptor but 0-2, before it reads anything of a function
//     (become_worker in the Python zygote).
//   - The init executes it only after it has dropped every capability (an
//     empty bounding set, securebits locked with SECBIT_NOROOT, no ambient
//     set), set no_new_privs and installed the seccomp filter: executing as
//     root of the zygote's user namespace then gains nothing, and the
//     descriptor, close-on-exec, is gone once it runs. The program, once
//     running, makes itself not dumpable and then makes no call but wait4
//     and exit_group.
//   - The worker, another user of that namespace, may neither signal nor
//     trace its init (nor read its /proc files); a function could at best
//     read the program, which is public and holds nothing.
//
// bubblewrap also runs it, as "metalambda-init -- LAUNCHER ARG...", as the
// first process of every namespace sandbox (see InitInSandbox).
//
// Neither the zygote's seccomp filter nor the one the init installs refuses
// execve or execveat. Where the descriptor cannot be made (no committed reaper
// for the architecture, a kernel that refuses executable memfds), the zygote
// gets none and each init keeps serving as the zygote's own code; an init
// whose execution fails does the same.

// reaperSeals are the seals of a reaper's memfd: its content final, and its
// seals too.
const reaperSeals = unix.F_SEAL_SEAL | unix.F_SEAL_SHRINK | unix.F_SEAL_GROW | unix.F_SEAL_WRITE

// reaperFile is a sealed, read-only, executable memfd holding the reaper, to
// hand to a zygote; nil where no reaper is committed for the architecture.
func reaperFile() (*os.File, error) {
	return sealedProgram("metalambda-init", reaperProgram)
}

// SpawnProgram is the name metalambda-spawn runs under (its argv[0]): the init
// of a worker a script zygote forked, whose command line holds the worker's.
const SpawnProgram = "metalambda-spawn"

// SpawnAvailable reports whether metalambda-spawn exists for this
// architecture (amd64): elsewhere a script zygote's children specialize
// themselves in the zygote's interpreter.
func SpawnAvailable() bool { return len(spawnProgram) > 0 }

// SetSpawnProgramForTest has the zygotes started from now on hand program over
// as metalambda-spawn, until restore is called: a test's host that refuses to
// execute it. Not safe beside a zygote's start.
func SetSpawnProgramForTest(program []byte) (restore func()) {
	old := spawnProgram
	spawnProgram = program
	return func() { spawnProgram = old }
}

// spawnFile is a sealed, read-only, executable memfd holding metalambda-spawn
// (reaper/spawn.c), sealed as the reaper's, to hand to a zygote whose children
// execute a program; nil where none is committed for the architecture.
func spawnFile() (*os.File, error) {
	return sealedProgram(SpawnProgram, spawnProgram)
}

// sealedProgram is a sealed, read-only, executable memfd named name holding
// program; nil when program is empty.
func sealedProgram(name string, program []byte) (*os.File, error) {
	if len(program) == 0 {
		return nil, nil
	}
	// MFD_EXEC (Linux 6.3) keeps it executable where vm.memfd_noexec would
	// make memfds non-executable by default; older kernels refuse the flag
	// and make every memfd executable.
	fd, err := unix.MemfdCreate(name, unix.MFD_CLOEXEC|unix.MFD_ALLOW_SEALING|unix.MFD_EXEC)
	if errors.Is(err, unix.EINVAL) {
		fd, err = unix.MemfdCreate(name, unix.MFD_CLOEXEC|unix.MFD_ALLOW_SEALING)
	}
	if err != nil {
		return nil, fmt.Errorf("sandbox: the memfd of %s: %w", name, err)
	}
	f := os.NewFile(uintptr(fd), name)
	if err := writeSealed(f, program); err != nil {
		f.Close()
		return nil, fmt.Errorf("sandbox: the memfd of %s: %w", name, err)
	}
	return f, nil
}

func writeSealed(f *os.File, program []byte) error {
	if _, err := f.Write(program); err != nil {
		return err
	}
	if err := f.Chmod(0o555); err != nil {
		return err
	}
	_, err := unix.FcntlInt(f.Fd(), unix.F_ADD_SEALS, reaperSeals)
	return err
}
