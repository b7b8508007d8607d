package v1alpha1

import (
	"fmt"
	"strings"
)

// reservedEnvPrefixes and reservedEnvNames are the variables a Function may not
// set: they steer the dynamic loader or the C library of whatever process reads
// them (glibc ignores them in setuid programs for that reason). A function's
// environment is set only at the execution of its own sandboxed worker, so none
// of them can reach a process that builds a sandbox; refusing them is defence
// in depth, and spares a function a library loaded into its own worker.
var (
	reservedEnvPrefixes = []string{"LD_", "MALLOC_"}
	reservedEnvNames    = []string{"GLIBC_TUNABLES", "GCONV_PATH", "GETCONF_DIR", "HOSTALIASES", "LOCALDOMAIN", "LOCPATH", "NIS_PATH", "NLSPATH", "RESOLV_HOST_CONF", "RES_OPTIONS", "TZDIR"}
)

// ReservedEnvNames describes the variables a Function may not set, for messages.
const ReservedEnvNames = "LD_*, MALLOC_*, GLIBC_TUNABLES, GCONV_PATH, GETCONF_DIR, HOSTALIASES, LOCALDOMAIN, LOCPATH, NIS_PATH, NLSPATH, RESOLV_HOST_CONF, RES_OPTIONS, TZDIR"

// ReservedEnvError says why a variable may not be set; nil when it may.
func ReservedEnvError(name string) error {
	for _, p := range reservedEnvPrefixes {
		if strings.HasPrefix(name, p) {
			return fmt.Errorf("variable %s is reserved: names that steer the dynamic loader or the C library (%s) cannot be set", name, ReservedEnvNames)
		}
	}
	for _, n := range reservedEnvNames {
		if name == n {
			return fmt.Errorf("variable %s is reserved: names that steer the dynamic loader or the C library (%s) cannot be set", name, ReservedEnvNames)
		}
	}
	return nil
}
