package sandbox

import _ "embed"

//go:generate sh reaper/build.sh

// reaperProgram is metalambda-init for amd64 (reaper/reaper.c, built by
// reaper/build.sh).
//
//go:embed reaper/reaper-linux-amd64
var reaperProgram []byte

// spawnProgram is metalambda-spawn for amd64 (reaper/spawn.c, built by
// reaper/build.sh).
//
//go:embed reaper/spawn-linux-amd64
var spawnProgram []byte
