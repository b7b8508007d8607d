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

// firstUnknownSyscall is one past the newest system call the filter was written
// for (file_setattr, 469, on amd64 and arm64 alike, which share the numbers of
// calls added since Linux 5.1).
const firstUnknownSyscall = unix.SYS_FILE_SETATTR + 1

// refusal is a system call that a filter refuses, whatever its arguments, the
// error it then returns, and why.
type refusal struct {
	name   string
	nr     uint32
	errno  syscall.Errno
	reason string
}

// Reasons of refusedCalls, which docs/security.md repeats.
const (
	whySysVIPC = "SysV shared memory, queues and semaphores outlive the command and count against no process's memory (and, without an IPC namespace, are shared with the host)"
	whyIOURing = "io_uring runs socket, file and other operations that a seccomp filter never sees, and is a large kernel attack surface"
	whyTrace   = "reads and writes other processes' memory"
	whyKernel  = "a large kernel attack surface that functions do not need"
	whyKeys    = "kernel keyrings are not namespaced: a user's keyring is shared by every process of that user"
	whyUFFD    = "userfaultfd stalls kernel accesses to memory at will, a common step of kernel exploits"
	whyMount   = "mount namespaces and mounts are the sandbox's file system view"
	whyNS      = "joining or making namespaces would leave the sandbox's"
	whyHost    = "acts on the whole host (needs privileges a command never has: refused before the kernel checks)"
	whyMemfd   = "memory files are held by descriptors, counted by no address-space limit"
	whyHandle  = "file handles open files by inode, past the sandbox's view of paths"
	whyNUMA    = "moves other processes' pages and sets memory policy"
	whyTee     = "reads a pipe without taking what it read: a worker could read a call's request, leave it in its stdin and die, and the gateway would give the call to another worker as one never read"
)

// refusedCalls are refused in every sandbox, whatever the mode: the one list of
// system calls a function may not make, with the reason for each.
var refusedCalls = append([]refusal{
	{"shmget", unix.SYS_SHMGET, syscall.EPERM, whySysVIPC},
	{"shmat", unix.SYS_SHMAT, syscall.EPERM, whySysVIPC},
	{"shmctl", unix.SYS_SHMCTL, syscall.EPERM, whySysVIPC},
	{"msgget", unix.SYS_MSGGET, syscall.EPERM, whySysVIPC},
	{"msgsnd", unix.SYS_MSGSND, syscall.EPERM, whySysVIPC},
	{"msgrcv", unix.SYS_MSGRCV, syscall.EPERM, whySysVIPC},
	{"msgctl", unix.SYS_MSGCTL, syscall.EPERM, whySysVIPC},
	{"semget", unix.SYS_SEMGET, syscall.EPERM, whySysVIPC},
	{"semop", unix.SYS_SEMOP, syscall.EPERM, whySysVIPC},
	{"semtimedop", unix.SYS_SEMTIMEDOP, syscall.EPERM, whySysVIPC},
	{"semctl", unix.SYS_SEMCTL, syscall.EPERM, whySysVIPC},
	{"io_uring_setup", unix.SYS_IO_URING_SETUP, syscall.EPERM, whyIOURing},
	{"io_uring_enter", unix.SYS_IO_URING_ENTER, syscall.EPERM, whyIOURing},
	{"io_uring_register", unix.SYS_IO_URING_REGISTER, syscall.EPERM, whyIOURing},
	{"ptrace", unix.SYS_PTRACE, syscall.EPERM, whyTrace},
	{"process_vm_readv", unix.SYS_PROCESS_VM_READV, syscall.EPERM, whyTrace},
	{"process_vm_writev", unix.SYS_PROCESS_VM_WRITEV, syscall.EPERM, whyTrace},
	{"pidfd_getfd", unix.SYS_PIDFD_GETFD, syscall.EPERM, whyTrace},
	{"kcmp", unix.SYS_KCMP, syscall.EPERM, whyTrace},
	{"perf_event_open", unix.SYS_PERF_EVENT_OPEN, syscall.EPERM, whyKernel},
	{"bpf", unix.SYS_BPF, syscall.EPERM, whyKernel},
	{"add_key", unix.SYS_ADD_KEY, syscall.EPERM, whyKeys},
	{"request_key", unix.SYS_REQUEST_KEY, syscall.EPERM, whyKeys},
	{"keyctl", unix.SYS_KEYCTL, syscall.EPERM, whyKeys},
	{"userfaultfd", unix.SYS_USERFAULTFD, syscall.EPERM, whyUFFD},
	{"mount", unix.SYS_MOUNT, syscall.EPERM, whyMount},
	{"umount2", unix.SYS_UMOUNT2, syscall.EPERM, whyMount},
	{"pivot_root", unix.SYS_PIVOT_ROOT, syscall.EPERM, whyMount},
	{"open_tree", unix.SYS_OPEN_TREE, syscall.EPERM, whyMount},
	{"move_mount", unix.SYS_MOVE_MOUNT, syscall.EPERM, whyMount},
	{"fsopen", unix.SYS_FSOPEN, syscall.EPERM, whyMount},
	{"fsconfig", unix.SYS_FSCONFIG, syscall.EPERM, whyMount},
	{"fsmount", unix.SYS_FSMOUNT, syscall.EPERM, whyMount},
	{"fspick", unix.SYS_FSPICK, syscall.EPERM, whyMount},
	{"mount_setattr", unix.SYS_MOUNT_SETATTR, syscall.EPERM, whyMount},
	{"open_tree_attr", unix.SYS_OPEN_TREE_ATTR, syscall.EPERM, whyMount},
	{"setns", unix.SYS_SETNS, syscall.EPERM, whyNS},
	{"unshare", unix.SYS_UNSHARE, syscall.EPERM, whyNS},
	{"memfd_create", unix.SYS_MEMFD_CREATE, syscall.EPERM, whyMemfd},
	{"memfd_secret", unix.SYS_MEMFD_SECRET, syscall.EPERM, whyMemfd},
	{"name_to_handle_at", unix.SYS_NAME_TO_HANDLE_AT, syscall.EPERM, whyHandle},
	{"open_by_handle_at", unix.SYS_OPEN_BY_HANDLE_AT, syscall.EPERM, whyHandle},
	{"move_pages", unix.SYS_MOVE_PAGES, syscall.EPERM, whyNUMA},
	{"migrate_pages", unix.SYS_MIGRATE_PAGES, syscall.EPERM, whyNUMA},
	{"mbind", unix.SYS_MBIND, syscall.EPERM, whyNUMA},
	{"set_mempolicy", unix.SYS_SET_MEMPOLICY, syscall.EPERM, whyNUMA},
	{"tee", unix.SYS_TEE, syscall.EPERM, whyTee},
	{"kexec_load", unix.SYS_KEXEC_LOAD, syscall.EPERM, whyHost},
	{"kexec_file_load", unix.SYS_KEXEC_FILE_LOAD, syscall.EPERM, whyHost},
	{"init_module", unix.SYS_INIT_MODULE, syscall.EPERM, whyHost},
	{"finit_module", unix.SYS_FINIT_MODULE, syscall.EPERM, whyHost},
	{"delete_module", unix.SYS_DELETE_MODULE, syscall.EPERM, whyHost},
	{"reboot", unix.SYS_REBOOT, syscall.EPERM, whyHost},
	{"swapon", unix.SYS_SWAPON, syscall.EPERM, whyHost},
	{"swapoff", unix.SYS_SWAPOFF, syscall.EPERM, whyHost},
	{"acct", unix.SYS_ACCT, syscall.EPERM, whyHost},
	{"syslog", unix.SYS_SYSLOG, syscall.EPERM, whyHost},
	{"quotactl", unix.SYS_QUOTACTL, syscall.EPERM, whyHost},
	{"fanotify_init", unix.SYS_FANOTIFY_INIT, syscall.EPERM, whyHost},
	{"settimeofday", unix.SYS_SETTIMEOFDAY, syscall.EPERM, whyHost},
	{"clock_settime", unix.SYS_CLOCK_SETTIME, syscall.EPERM, whyHost},
	{"clock_adjtime", unix.SYS_CLOCK_ADJTIME, syscall.EPERM, whyHost},
	{"adjtimex", unix.SYS_ADJTIMEX, syscall.EPERM, whyHost},
	{"vhangup", unix.SYS_VHANGUP, syscall.EPERM, whyHost},
}, archRefused...)

// RefusedCall is a system call every sandbox refuses, and why.
type RefusedCall struct{ Name, Reason string }

// RefusedCalls lists the system calls every sandbox refuses, whatever the mode,
// with the reason for each.
func RefusedCalls() []RefusedCall {
	out := make([]RefusedCall, len(refusedCalls))
	for i, r := range refusedCalls {
		out[i] = RefusedCall{r.name, r.reason}
	}
	return out
}

// socketFamilies are the socket families a sandbox without network may make:
// UNIX sockets among its own processes, and IP on its own loopback. Netlink
// (the kernel's routing, audit and other interfaces), packet and every other
// family fail with EAFNOSUPPORT.
var socketFamilies = []uint32{unix.AF_UNIX, unix.AF_INET, unix.AF_INET6}

// userNamespaceFilter is the seccomp program of a namespace sandbox, for
// bubblewrap's --seccomp: refusedCalls; new user namespaces refused (clone with
// CLONE_NEWUSER fails with EPERM, and clone3, whose flags a filter cannot read,
// with ENOSYS, so that libc falls back to clone); every system call of another
// ABI (32-bit, x32) refused; and, without network, sockets only of
// socketFamilies. Nil on an architecture it does not know.
func userNamespaceFilter(network bool) ([]byte, error) {
	return filterProgram(refusedCalls, familiesUnless(network))
}

func familiesUnless(network bool) []uint32 {
	if network {
		return nil
	}
	return socketFamilies
}

// landlockFilter is the seccomp program of a Landlock sandbox: userNamespaceFilter
// that also refuses setsid and setpgid, so that every descendant of a command stays
// in its process group and dies with it, selfOnlyCalls on any process but the
// caller, and, without network, socket, so that no socket of any family (UDP,
// netlink, a UNIX socket of the host) can be made; with network, sockets of
// networkFamilies only.
func landlockFilter(network bool) ([]byte, error) {
	refused := append([]refusal{
		{"setsid", unix.SYS_SETSID, syscall.EPERM, "keeps every process in the command's process group"},
		{"setpgid", unix.SYS_SETPGID, syscall.EPERM, "keeps every process in the command's process group"},
	}, refusedCalls...)
	if !network {
		refused = append(refused, refusal{"socket", unix.SYS_SOCKET, syscall.EACCES, "no network"})
		return filterProgram(refused, nil, selfOnlyCalls...)
	}
	return filterProgram(refused, networkFamilies, selfOnlyCalls...)
}

// networkFamilies are the socket families of a Landlock command with network:
// IP, and netlink to read the interfaces. Not UNIX: Landlock does not confine
// connecting to a socket's path, so a UNIX socket would reach every socket of
// the host's file system that the command's user may write (a container
// runtime's, a database's), which a namespace sandbox does not show.
var networkFamilies = []uint32{unix.AF_INET, unix.AF_INET6, unix.AF_NETLINK}

// selfOnly is a system call that a Landlock sandbox allows only on the calling
// process: each argument of args (its index, and the value of its low half) must
// be as given, else the call fails with EPERM.
type selfOnly struct {
	name string
	nr   uint32
	args [][2]uint32
}

// selfOnlyCalls act on a process the caller names, which the kernel allows for
// any process of the caller's user and Landlock does not scope. A Landlock
// command of a caller that is not root runs as the caller's user, in its PID
// namespace: it could set the gateway's resource limits (RLIMIT_CPU ends it),
// its priority, processor affinity and scheduling policy, and those of other
// functions' workers. It may still set its own (a pid of 0).
var selfOnlyCalls = []selfOnly{
	{"prlimit64", unix.SYS_PRLIMIT64, [][2]uint32{{0, 0}}},
	{"setpriority", unix.SYS_SETPRIORITY, [][2]uint32{{0, unix.PRIO_PROCESS}, {1, 0}}},
	{"sched_setaffinity", unix.SYS_SCHED_SETAFFINITY, [][2]uint32{{0, 0}}},
	{"sched_setscheduler", unix.SYS_SCHED_SETSCHEDULER, [][2]uint32{{0, 0}}},
	{"sched_setparam", unix.SYS_SCHED_SETPARAM, [][2]uint32{{0, 0}}},
	{"sched_setattr", unix.SYS_SCHED_SETATTR, [][2]uint32{{0, 0}}},
	{"ioprio_set", unix.SYS_IOPRIO_SET, [][2]uint32{{0, 1 /* IOPRIO_WHO_PROCESS */}, {1, 0}}},
}

// noLandlockFilter is the filter of a container runtime's RuntimeDefault
// profile for RestrictedCommand: new user namespaces refused, and Landlock's
// system calls answered with ENOSYS, as a kernel without Landlock does.
func noLandlockFilter() ([]byte, error) {
	return filterProgram([]refusal{
		{"landlock_create_ruleset", unix.SYS_LANDLOCK_CREATE_RULESET, syscall.ENOSYS, ""},
		{"landlock_add_rule", unix.SYS_LANDLOCK_ADD_RULE, syscall.ENOSYS, ""},
		{"landlock_restrict_self", unix.SYS_LANDLOCK_RESTRICT_SELF, syscall.ENOSYS, ""},
	}, nil)
}

// runtimeDefaultFilter is a container runtime's RuntimeDefault profile as far
// as RestrictedCommand needs it: new user namespaces refused.
func runtimeDefaultFilter() ([]byte, error) {
	return filterProgram(nil, nil)
}

// filterProgram assembles a filter that refuses the calls of refused, allows
// those of self only with their arguments, limits sockets to families unless nil,
// and refuses new user namespaces.
func filterProgram(refused []refusal, families []uint32, self ...selfOnly) ([]byte, error) {
	if auditArch == 0 {
		return nil, nil
	}
	errno := func(e syscall.Errno) bpf.Instruction { return bpf.RetConstant{Val: unix.SECCOMP_RET_ERRNO | uint32(e)} }
	allow := bpf.RetConstant{Val: unix.SECCOMP_RET_ALLOW}
	prog := []bpf.Instruction{
		bpf.LoadAbsolute{Off: 4, Size: 4}, // arch
		bpf.JumpIf{Cond: bpf.JumpEqual, Val: auditArch, SkipTrue: 1},
		errno(syscall.ENOSYS),
		bpf.LoadAbsolute{Off: 0, Size: 4}, // nr
		bpf.JumpIf{Cond: bpf.JumpGreaterOrEqual, Val: x32Bit, SkipFalse: 1},
		errno(syscall.ENOSYS),
		// A system call newer than this filter knows (after file_setattr, Linux
		// 6.17) is refused as a kernel without it would: it was reviewed by no one.
		bpf.JumpIf{Cond: bpf.JumpGreaterOrEqual, Val: firstUnknownSyscall, SkipFalse: 1},
		errno(syscall.ENOSYS),
	}
	for _, r := range refused {
		prog = append(prog, bpf.JumpIf{Cond: bpf.JumpEqual, Val: r.nr, SkipFalse: 1}, errno(r.errno))
	}
	for _, c := range self {
		// Another call skips the block; this one returns from it.
		n := len(c.args)
		prog = append(prog, bpf.JumpIf{Cond: bpf.JumpEqual, Val: c.nr, SkipFalse: uint8(2*n + 2)})
		for i, a := range c.args {
			prog = append(prog,
				bpf.LoadAbsolute{Off: 16 + 8*a[0], Size: 4}, // the low half of the argument
				bpf.JumpIf{Cond: bpf.JumpEqual, Val: a[1], SkipFalse: uint8(2*(n-i-1) + 1)})
		}
		prog = append(prog, allow, errno(syscall.EPERM))
	}
	if len(families) > 0 {
		n := len(families)
		prog = append(prog,
			bpf.JumpIf{Cond: bpf.JumpEqual, Val: unix.SYS_SOCKET, SkipFalse: uint8(n + 3)},
			bpf.LoadAbsolute{Off: 16, Size: 4}, // the low half of the first argument, the family
		)
		for i, f := range families {
			prog = append(prog, bpf.JumpIf{Cond: bpf.JumpEqual, Val: f, SkipTrue: uint8(n - i)})
		}
		prog = append(prog, errno(syscall.EAFNOSUPPORT), allow,
			bpf.LoadAbsolute{Off: 0, Size: 4}) // nr again, for what follows
	}
	prog = append(prog,
		bpf.JumpIf{Cond: bpf.JumpEqual, Val: unix.SYS_CLONE3, SkipFalse: 1},
		errno(syscall.ENOSYS),
		bpf.JumpIf{Cond: bpf.JumpEqual, Val: unix.SYS_UNSHARE, SkipTrue: 1},
		bpf.JumpIf{Cond: bpf.JumpEqual, Val: unix.SYS_CLONE, SkipFalse: 3},
		bpf.LoadAbsolute{Off: 16, Size: 4}, // the low half of the first argument, the flags
		bpf.JumpIf{Cond: bpf.JumpBitsSet, Val: unix.CLONE_NEWUSER, SkipFalse: 1},
		errno(syscall.EPERM),
		allow,
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

// dataPipe is the read end of a pipe holding data, for bubblewrap to read
// (data must fit in a pipe's smallest buffer, one page, so that writing it
// never waits).
func dataPipe(data []byte) (*os.File, error) {
	if len(data) > os.Getpagesize() {
		return nil, fmt.Errorf("%d bytes do not fit in a pipe's buffer", len(data))
	}
	r, w, err := os.Pipe()
	if err != nil {
		return nil, err
	}
	_, err = w.Write(data)
	if cerr := w.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		r.Close()
		return nil, err
	}
	return r, nil
}

// filterPipe returns the read end of a pipe that holds prog, for bubblewrap or
// the launcher to read at start. Its reader starts after this returns, and prog
// (a launch carries a Function's environment) may be larger than a pipe's
// buffer, so what the buffer does not take is written as the reader reads; the
// write ends, with EPIPE, once no process holds the read end.
func filterPipe(prog []byte) (*os.File, error) {
	r, w, err := os.Pipe()
	if err != nil {
		return nil, err
	}
	go func() {
		_, _ = w.Write(prog)
		w.Close()
	}()
	return r, nil
}
