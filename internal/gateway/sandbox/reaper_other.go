//go:build !amd64

package sandbox

// reaperProgram is empty where no reaper is committed (arm64 among others:
// this project's machines have no compiler for it): the init of a zygote's
// child stays the zygote's own (the Python zygote's serve_init), a forked
// interpreter.
var reaperProgram []byte
