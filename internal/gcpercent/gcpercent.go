// Package gcpercent sets a binary's garbage-collection target from its
// --gc-percent flag, which the GOGC environment variable overrides, the same way
// for the engine and the gateway; and the runtime's soft memory limit from a flag or
// the container's memory limit, which GOMEMLIMIT overrides.
package gcpercent

import (
	"os"
	"runtime/debug"
	"strconv"
)

// Set sets the garbage-collection target to percent unless GOGC is set (the
// runtime has applied it already), and returns the target in effect for the
// start-up log ("GOGC=<value>" when the environment decides). GOMEMLIMIT, when
// set, applies as well: the runtime reads it itself.
func Set(percent int) string {
	if env, ok := os.LookupEnv("GOGC"); ok {
		return "GOGC=" + env
	}
	debug.SetGCPercent(percent)
	return strconv.Itoa(percent)
}
