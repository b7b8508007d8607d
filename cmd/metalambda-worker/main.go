// Command metalambda-worker is the executable the gateway starts its sandboxed
// processes from, installed beside it (bin/ after make build, /usr/bin in the
// image): as the sandbox's launcher it bounds each worker and executes it, and it
// serves JavaScript and Jsonnet functions as their worker. The gateway can do
// both itself, but it links the Kubernetes client, the dashboard and the rest,
// whose initialization the Go runtime runs before any of it: started from this
// executable a worker answers its first call about 15 ms sooner.
//
// make build and the gateway's image build it twice more, once per runtime and
// without the other (build tags nojsonnet and nojavascript), as
// metalambda-worker-javascript and metalambda-worker-jsonnet, which the gateway
// prefers: a Jsonnet worker that does not link goja starts in 4 ms less
// processor time and holds 0.5 MiB less memory of its own.
//
// main hands the process to lambda.ServeWorker, which takes either role from the
// first argument (sandbox.LauncherMarker, lambda.ScriptWorkerMarker); it returns
// only when the program is started by hand.
package main

import (
	"fmt"
	"os"

	"github.com/metalambda/metalambda/internal/gateway/lambda"
)

func main() {
	lambda.ServeWorker()
	fmt.Fprintln(os.Stderr, "metalambda-worker: the gateway starts this program for its sandboxed workers, with arguments and descriptors of its own; it does nothing when started by hand")
	os.Exit(2)
}
