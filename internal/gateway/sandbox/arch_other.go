//go:build !amd64 && !arm64

package sandbox

// auditArch is zero where the seccomp filter does not know the architecture.
const auditArch = 0

// archRefused are the calls of refusedCalls that only some architectures have.
var archRefused []refusal
