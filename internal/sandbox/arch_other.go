//go:build !amd64 && !arm64

package sandbox

// auditArch is zero where the seccomp filter does not know the architecture.
const auditArch = 0
