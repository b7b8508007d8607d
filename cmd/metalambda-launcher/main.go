// Command metalambda-launcher is the executable the gateway's sandbox starts
// first for every sandboxed process, installed beside the gateway (bin/ after
// make build, /usr/bin in the image): it bounds the process (its user, cgroups,
// limits, Landlock and seccomp; see internal/gateway/sandbox) and executes the
// command, or starts a Python zygote and stays its parent.
//
// It links the sandbox package alone. metalambda-worker can launch too, but it
// links the JavaScript and Jsonnet runtimes, whose packages the Go runtime
// initializes at every start: started from this executable, a launcher takes
// about a third of the processor time.
package main

import (
	"fmt"
	"os"

	"github.com/metalambda/metalambda/internal/gateway/sandbox"
)

func main() {
	sandbox.ServeLauncher()
	fmt.Fprintln(os.Stderr, "metalambda-launcher: the gateway's sandbox starts this program, with arguments and descriptors of its own; it does nothing when started by hand")
	os.Exit(2)
}
