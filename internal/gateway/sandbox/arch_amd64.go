package sandbox

import (
	"syscall"

	"golang.org/x/sys/unix"
)

const auditArch = unix.AUDIT_ARCH_X86_64

// archRefused are the calls of refusedCalls that only amd64 has.
var archRefused = []refusal{
	{"iopl", unix.SYS_IOPL, syscall.EPERM, whyHost},
	{"ioperm", unix.SYS_IOPERM, syscall.EPERM, whyHost},
	{"uselib", unix.SYS_USELIB, syscall.EPERM, whyKernel},
	{"_sysctl", unix.SYS__SYSCTL, syscall.EPERM, whyKernel},
}
