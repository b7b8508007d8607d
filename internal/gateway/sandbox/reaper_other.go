//go:build !amd64

package sandbox

// reaperProgram is empty where no reaper is committed (arm64 among others:
// this project's machines have no compiler for it): the init of a zygote's
// child stays the zygote's own (the Python zygote's serve_init), a forked
// interpreter.
var reaperProgram []byte

// spawnProgram is empty there too: the children of a zygote whose workers
// execute a program (ZygoteSpec.Executable) specialize themselves in Python
// before they execute it.
var spawnProgram []byte
