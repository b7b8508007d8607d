package sandbox

import (
	"encoding/binary"
	"fmt"
	"os"
	"runtime"
	"syscall"
	"unsafe"

	"golang.org/x/net/bpf"
	"golang.org/x/sys/unix"
)

// x32Bit marks the system calls of the x32 ABI, which shares AUDIT_ARCH_X86_64.
const x32Bit = 0x40000000

// refusal is a system call that a filter refuses, whatever its arguments, and
// the error it then returns.
type refusal struct {
	nr    uint32
	errno syscall.Errno
}

// userNamespaceFilter is a seccomp program for bubblewrap's --seccomp that refuses
// new user namespaces: unshare and clone with CLONE_NEWUSER fail with EPERM, and
// clone3, whose flags a filter cannot read, with ENOSYS (libc then falls back to
// clone); so does every system call of another ABI (32-bit, x32). Nil on an
// architecture it does not know.
func userNamespaceFilter() ([]byte, error) {
	return filterProgram(nil)
}

// landlockFilter is the seccomp program of a Landlock sandbox: userNamespaceFilter
// that also refuses setsid and setpgid, so that every descendant of a command stays
// in its process group and dies with it, and, without network, socket, so that no
// socket of any family (UDP, netlink, a UNIX socket of the host) can be made.
func landlockFilter(network bool) ([]byte, error) {
	refused := []refusal{{unix.SYS_SETSID, syscall.EPERM}, {unix.SYS_SETPGID, syscall.EPERM}}
	if !network {
		refused = append(refused, refusal{unix.SYS_SOCKET, syscall.EACCES})
	}
	return filterProgram(refused)
}

// noLandlockFilter is userNamespaceFilter that also answers Landlock's system
// calls with ENOSYS, as a kernel without Landlock does.
func noLandlockFilter() ([]byte, error) {
	return filterProgram([]refusal{
		{unix.SYS_LANDLOCK_CREATE_RULESET, syscall.ENOSYS},
		{unix.SYS_LANDLOCK_ADD_RULE, syscall.ENOSYS},
		{unix.SYS_LANDLOCK_RESTRICT_SELF, syscall.ENOSYS},
	})
}

// filterProgram assembles userNamespaceFilter with the refusals before it.
func filterProgram(refused []refusal) ([]byte, error) {
	if auditArch == 0 {
		return nil, nil
	}
	errno := func(e syscall.Errno) bpf.Instruction { return bpf.RetConstant{Val: unix.SECCOMP_RET_ERRNO | uint32(e)} }
	prog := []bpf.Instruction{
		bpf.LoadAbsolute{Off: 4, Size: 4}, // arch
		bpf.JumpIf{Cond: bpf.JumpEqual, Val: auditArch, SkipTrue: 1},
		errno(syscall.ENOSYS),
		bpf.LoadAbsolute{Off: 0, Size: 4}, // nr
		bpf.JumpIf{Cond: bpf.JumpGreaterOrEqual, Val: x32Bit, SkipFalse: 1},
		errno(syscall.ENOSYS),
	}
	for _, r := range refused {
		prog = append(prog, bpf.JumpIf{Cond: bpf.JumpEqual, Val: r.nr, SkipFalse: 1}, errno(r.errno))
	}
	prog = append(prog,
		bpf.JumpIf{Cond: bpf.JumpEqual, Val: unix.SYS_CLONE3, SkipFalse: 1},
		errno(syscall.ENOSYS),
		bpf.JumpIf{Cond: bpf.JumpEqual, Val: unix.SYS_UNSHARE, SkipTrue: 1},
		bpf.JumpIf{Cond: bpf.JumpEqual, Val: unix.SYS_CLONE, SkipFalse: 3},
		bpf.LoadAbsolute{Off: 16, Size: 4}, // the low half of the first argument, the flags
		bpf.JumpIf{Cond: bpf.JumpBitsSet, Val: unix.CLONE_NEWUSER, SkipFalse: 1},
		errno(syscall.EPERM),
		bpf.RetConstant{Val: unix.SECCOMP_RET_ALLOW},
	)
	raw, err := bpf.Assemble(prog)
	if err != nil {
		return nil, fmt.Errorf("sandbox: assembling the seccomp filter: %w", err)
	}
	out := make([]byte, 0, 8*len(raw))
	for _, ins := range raw {
		out = binary.NativeEndian.AppendUint16(out, ins.Op)
		out = append(out, ins.Jt, ins.Jf)
		out = binary.NativeEndian.AppendUint32(out, ins.K)
	}
	return out, nil
}

// filter is a seccomp program ready to install.
type filter struct {
	insns []unix.SockFilter
	prog  unix.SockFprog
}

// newFilter decodes prog, as filterProgram returns it; nil installs nothing.
func newFilter(prog []byte) *filter {
	if len(prog) == 0 {
		return nil
	}
	f := &filter{insns: make([]unix.SockFilter, len(prog)/8)}
	for i := range f.insns {
		ins := prog[8*i : 8*i+8]
		f.insns[i] = unix.SockFilter{Code: binary.NativeEndian.Uint16(ins), Jt: ins[2], Jf: ins[3], K: binary.NativeEndian.Uint32(ins[4:])}
	}
	f.prog = unix.SockFprog{Len: uint16(len(f.insns)), Filter: &f.insns[0]}
	return f
}

// install installs f on every thread of the calling process, which must have
// no_new_privs, without allocating.
func (f *filter) install() error {
	if f == nil {
		return nil
	}
	thread, _, errno := unix.RawSyscall(unix.SYS_SECCOMP, unix.SECCOMP_SET_MODE_FILTER, unix.SECCOMP_FILTER_FLAG_TSYNC, uintptr(unsafe.Pointer(&f.prog)))
	runtime.KeepAlive(f)
	if errno != 0 {
		return fmt.Errorf("installing the seccomp filter: %w", errno)
	}
	if thread != 0 {
		return fmt.Errorf("installing the seccomp filter: thread %d cannot take it", thread)
	}
	return nil
}

// filterPipe returns the read end of a pipe that holds prog, for bubblewrap to
// read at start.
func filterPipe(prog []byte) (*os.File, error) {
	r, w, err := os.Pipe()
	if err != nil {
		return nil, err
	}
	defer w.Close()
	if _, err := w.Write(prog); err != nil {
		r.Close()
		return nil, err
	}
	return r, nil
}
