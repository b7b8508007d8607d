// Package version says which build of Metalambda is running.
package version

import (
	"runtime/debug"
	"sync"
)

// version is set at link time by the images and `make build`:
//
//	go build -ldflags "-X github.com/metalambda/metalambda/internal/version.version=v0.3.0"
var version string

var fromBuild = sync.OnceValue(func() string {
	if version != "" {
		return version
	}
	info, ok := debug.ReadBuildInfo()
	if !ok {
		return "devel"
	}
	rev, dirty := "", false
	for _, s := range info.Settings {
		switch s.Key {
		case "vcs.revision":
			rev = s.Value
		case "vcs.modified":
			dirty = s.Value == "true"
		}
	}
	if rev == "" {
		return "devel"
	}
	if len(rev) > 12 {
		rev = rev[:12]
	}
	if dirty {
		rev += "-dirty"
	}
	return "devel-" + rev
})

// Get returns the version the binary was built as: the linked-in version, else
// "devel-<commit>" from the VCS information Go records, else "devel".
func Get() string { return fromBuild() }
