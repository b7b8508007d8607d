package sandbox

import "golang.org/x/sys/unix"

const auditArch = unix.AUDIT_ARCH_AARCH64

// archRefused are the calls of refusedCalls that only some architectures have.
var archRefused []refusal
