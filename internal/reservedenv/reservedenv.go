// Package reservedenv names the environment variables a Function may not set. It
// is a leaf, so that a worker that checks them links nothing else.
package reservedenv

import (
	"fmt"
	"strings"
)

// prefixes and names are the variables a Function may not
// set: they steer the dynamic loader or the C library of whatever process reads
// them (glibc ignores them in setuid programs for that reason). A function's
// environment is set only at the execution of its own sandboxed worker, so none
// of them can reach a process that builds a sandbox; refusing them is defence
// in depth, and spares a function a library loaded into its own worker.
var (
	prefixes = []string{"LD_", "MALLOC_"}
	names    = []string{"GLIBC_TUNABLES", "GCONV_PATH", "GETCONF_DIR", "HOSTALIASES", "LOCALDOMAIN", "LOCPATH", "NIS_PATH", "NLSPATH", "RESOLV_HOST_CONF", "RES_OPTIONS", "TZDIR"}
)

// Names describes the variables a Function may not set, for messages.
const Names = "LD_*, MALLOC_*, GLIBC_TUNABLES, GCONV_PATH, GETCONF_DIR, HOSTALIASES, LOCALDOMAIN, LOCPATH, NIS_PATH, NLSPATH, RESOLV_HOST_CONF, RES_OPTIONS, TZDIR"

// Error says why a variable may not be set; nil when it may.
func Error(name string) error {
	for _, p := range prefixes {
		if strings.HasPrefix(name, p) {
			return fmt.Errorf("variable %s is reserved: names that steer the dynamic loader or the C library (%s) cannot be set", name, Names)
		}
	}
	for _, n := range names {
		if name == n {
			return fmt.Errorf("variable %s is reserved: names that steer the dynamic loader or the C library (%s) cannot be set", name, Names)
		}
	}
	return nil
}
