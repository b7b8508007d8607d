package sandbox

import (
	"encoding/binary"
	"fmt"
	"os"
	"syscall"

	"golang.org/x/net/bpf"
	"golang.org/x/sys/unix"
)

// x32Bit marks the system calls of the x32 ABI, which shares AUDIT_ARCH_X86_64.
const x32Bit = 0x40000000

// userNamespaceFilter is a seccomp program for bubblewrap's --seccomp that refuses
// new user namespaces: unshare and clone with CLONE_NEWUSER fail with EPERM, and
// clone3, whose flags a filter cannot read, with ENOSYS (libc then falls back to
// clone); so does every system call of another ABI (32-bit, x32). Nil on an
// architecture it does not know.
func userNamespaceFilter() ([]byte, error) {
	if auditArch == 0 {
		return nil, nil
	}
	errno := func(e syscall.Errno) bpf.Instruction { return bpf.RetConstant{Val: unix.SECCOMP_RET_ERRNO | uint32(e)} }
	raw, err := bpf.Assemble([]bpf.Instruction{
		bpf.LoadAbsolute{Off: 4, Size: 4}, // arch
		bpf.JumpIf{Cond: bpf.JumpEqual, Val: auditArch, SkipTrue: 1},
		errno(syscall.ENOSYS),
		bpf.LoadAbsolute{Off: 0, Size: 4}, // nr
		bpf.JumpIf{Cond: bpf.JumpGreaterOrEqual, Val: x32Bit, SkipFalse: 1},
		errno(syscall.ENOSYS),
		bpf.JumpIf{Cond: bpf.JumpEqual, Val: unix.SYS_CLONE3, SkipFalse: 1},
		errno(syscall.ENOSYS),
		bpf.JumpIf{Cond: bpf.JumpEqual, Val: unix.SYS_UNSHARE, SkipTrue: 1},
		bpf.JumpIf{Cond: bpf.JumpEqual, Val: unix.SYS_CLONE, SkipFalse: 3},
		bpf.LoadAbsolute{Off: 16, Size: 4}, // the low half of the first argument, the flags
		bpf.JumpIf{Cond: bpf.JumpBitsSet, Val: unix.CLONE_NEWUSER, SkipFalse: 1},
		errno(syscall.EPERM),
		bpf.RetConstant{Val: unix.SECCOMP_RET_ALLOW},
	})
	if err != nil {
		return nil, fmt.Errorf("sandbox: assembling the seccomp filter: %w", err)
	}
	prog := make([]byte, 0, 8*len(raw))
	for _, ins := range raw {
		prog = binary.NativeEndian.AppendUint16(prog, ins.Op)
		prog = append(prog, ins.Jt, ins.Jf)
		prog = binary.NativeEndian.AppendUint32(prog, ins.K)
	}
	return prog, nil
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
