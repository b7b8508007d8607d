package benchkit

import (
	"flag"
	"os"
	"path/filepath"
	"strings"

	"github.com/metalambda/metalambda/internal/gateway/sandbox"
)

// Executables are the launcher and worker executables a benchmark's gateway
// starts its workers from: by default the ones make build puts in bin/, which a
// gateway deployed from this repository runs, so that a benchmark measures them
// and not the benchmark's own executable (which links everything the benchmark
// does, Kubernetes' clients included).
type Executables struct {
	// Worker serves a runtime whose own executable is missing.
	Worker string
	// WorkersDir holds each runtime's own worker executable; empty: Worker
	// serves every runtime.
	WorkersDir string
	// Launcher is the sandbox's launcher; Worker when missing.
	Launcher string
}

// RegisterFlags registers -worker, -workers-dir and -launcher, which set e,
// with make build's bin/ as their defaults.
func (e *Executables) RegisterFlags(fs *flag.FlagSet) {
	fs.StringVar(&e.Worker, "worker", "bin/"+sandbox.WorkerExecutable, "the worker executable of both runtimes (make build puts it in bin/), for a runtime whose own is missing; the benchmark's own when missing")
	fs.StringVar(&e.WorkersDir, "workers-dir", "bin", "where each runtime's worker executable is ("+sandbox.WorkerExecutableFor("<runtime>")+"; make build puts them in bin/); none: -worker for every runtime")
	fs.StringVar(&e.Launcher, "launcher", "bin/"+sandbox.LauncherExecutable, "the sandbox's launcher (make build puts it in bin/); the worker executable when missing")
}

// Sandbox returns a sandbox that starts workers from e's executables, to close
// when done, and says which ones in a few words. When none of them exists it
// returns nil: the gateway's default sandbox starts the benchmark's own
// executable (which must call lambda.ServeWorker first thing).
func (e Executables) Sandbox() (*sandbox.Sandbox, string, error) {
	workers := map[string]string{}
	for _, rt := range sandbox.WorkerRuntimes {
		if exe := filepath.Join(e.WorkersDir, sandbox.WorkerExecutableFor(rt)); e.WorkersDir != "" && fileExists(exe) {
			workers[rt] = exe
		}
	}
	worker, launcher := e.Worker, e.Launcher
	if !fileExists(worker) {
		worker = ""
	}
	if worker == "" && len(workers) == 0 {
		return nil, "the benchmark's own executable", nil
	}
	if !fileExists(launcher) {
		launcher = worker
	}
	sb, err := sandbox.New(sandbox.Options{Launcher: launcher, Worker: worker, Workers: workers})
	if err != nil {
		return nil, "", err
	}
	var exes []string
	for _, rt := range sandbox.WorkerRuntimes {
		exes = append(exes, sb.WorkerFor(rt))
	}
	return sb, strings.Join(exes, " and ") + " launched by " + sb.Launcher(), nil
}

// fileExists reports whether path names a file.
func fileExists(path string) bool {
	_, err := os.Stat(path)
	return path != "" && err == nil
}
