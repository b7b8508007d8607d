//go:build integration

package main

import (
	"bytes"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/metalambda/metalambda/internal/kubetest"
)

// The engine binary, built once per test package into the control plane's data
// directory, which Stop removes.
var (
	buildOnce   sync.Once
	engineBin   string
	engineBuild error
)

func engineBinary(t *testing.T) string {
	t.Helper()
	buildOnce.Do(func() {
		engineBin = filepath.Join(env.Cluster.DataDir, "bin", "engine")
		start := time.Now()
		out, err := exec.Command("go", "build", "-o", engineBin, ".").CombinedOutput()
		if err != nil {
			engineBuild = fmt.Errorf("go build the engine: %v\n%s", err, out)
			return
		}
		t.Logf("built the engine in %s", time.Since(start).Round(time.Millisecond))
	})
	if engineBuild != nil {
		t.Fatal(engineBuild)
	}
	return engineBin
}

// engineProcess is the engine binary running as a child process against the test
// control plane, on free ports. Its output goes to a log file that is copied into the
// test log when the test fails; the process is killed when the test ends.
type engineProcess struct {
	t       *testing.T
	name    string
	args    []string
	metrics string // host:port of /metrics
	health  string // host:port of /healthz and /readyz
	logPath string

	cmd  *exec.Cmd
	done chan struct{}
	err  error // exit status, valid once done is closed
}

var notFileName = regexp.MustCompile(`[^A-Za-z0-9_.-]+`)

// startEngineProcess runs the engine with args after its kubeconfig and addresses.
func startEngineProcess(t *testing.T, name string, args ...string) *engineProcess {
	t.Helper()
	p := &engineProcess{
		t: t, name: name, args: args,
		metrics: kubetest.FreeAddr(t), health: kubetest.FreeAddr(t),
		logPath: filepath.Join(env.Cluster.DataDir, "logs", notFileName.ReplaceAllString(t.Name()+"-"+name, "_")+".log"),
	}
	t.Cleanup(func() {
		p.kill()
		if t.Failed() {
			t.Logf("==> engine %s (%s) <==\n%s", p.name, p.logPath, p.logTail(150))
		}
	})
	p.start()
	return p
}

// start runs the process again, with the same flags and ports, appending to its log.
func (p *engineProcess) start() {
	p.t.Helper()
	logFile, err := os.OpenFile(p.logPath, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o600)
	if err != nil {
		p.t.Fatal(err)
	}
	args := append([]string{"--kubeconfig=" + env.Cluster.KubeconfigPath, "--metrics-address=" + p.metrics, "--health-probe-bind-address=" + p.health}, p.args...)
	fmt.Fprintf(logFile, "--- %s engine %q\n", time.Now().Format(time.RFC3339Nano), args)
	cmd := exec.Command(engineBinary(p.t), args...)
	cmd.Stdout, cmd.Stderr = logFile, logFile
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	if err := cmd.Start(); err != nil {
		logFile.Close()
		p.t.Fatalf("start engine %s: %v", p.name, err)
	}
	p.cmd, p.done = cmd, make(chan struct{})
	done := p.done
	go func() {
		p.err = cmd.Wait()
		logFile.Close()
		close(done)
	}()
}

// running reports whether the process has not exited.
func (p *engineProcess) running() bool {
	select {
	case <-p.done:
		return false
	default:
		return true
	}
}

// kill ends the process with SIGKILL, as a node failure or an OOM kill would.
func (p *engineProcess) kill() {
	if p.cmd == nil || !p.running() {
		return
	}
	_ = p.cmd.Process.Signal(syscall.SIGKILL)
	<-p.done
}

// signal sends sig to the process.
func (p *engineProcess) signal(sig syscall.Signal) {
	p.t.Helper()
	if err := p.cmd.Process.Signal(sig); err != nil {
		p.t.Fatalf("signal engine %s: %v", p.name, err)
	}
}

// terminate sends SIGTERM, as the kubelet does, and returns the exit status.
func (p *engineProcess) terminate(timeout time.Duration) error {
	p.t.Helper()
	if err := p.cmd.Process.Signal(syscall.SIGTERM); err != nil {
		return err
	}
	select {
	case <-p.done:
		return p.err
	case <-time.After(timeout):
		p.kill()
		return fmt.Errorf("engine %s still running %s after SIGTERM", p.name, timeout)
	}
}

// metric sums the samples of a metric family whose labels include every given
// name="value" pair.
func (p *engineProcess) metric(family string, labels ...string) (float64, error) {
	_, body, err := httpGet("http://" + p.metrics + "/metrics")
	if err != nil {
		return 0, err
	}
	return sumSamples(body, family, labels...)
}

func sumSamples(exposition, family string, labels ...string) (float64, error) {
	var sum float64
	for line := range strings.Lines(exposition) {
		name, rest, _ := strings.Cut(strings.TrimSpace(line), " ")
		series, seriesLabels, _ := strings.Cut(name, "{")
		if series != family || !hasLabels(seriesLabels, labels) {
			continue
		}
		fields := strings.Fields(rest)
		if len(fields) == 0 {
			continue
		}
		v, err := strconv.ParseFloat(fields[0], 64)
		if err != nil {
			return 0, fmt.Errorf("metric line %q: %w", line, err)
		}
		sum += v
	}
	return sum, nil
}

func hasLabels(series string, want []string) bool {
	for _, l := range want {
		k, v, _ := strings.Cut(l, "=")
		if !strings.Contains(series, k+`="`+v+`"`) {
			return false
		}
	}
	return true
}

// writes sums the engine's API requests that change something, on the given
// resources ("parents/status" for a status subresource).
func (p *engineProcess) writes(resources ...string) (float64, error) {
	var sum float64
	for _, r := range resources {
		for _, verb := range []string{"create", "update", "patch", "apply", "delete"} {
			n, err := p.metric("metalambda_engine_api_requests_total", "verb="+verb, "resource="+r)
			if err != nil {
				return 0, err
			}
			sum += n
		}
	}
	return sum, nil
}

// readyz returns the status code and body of /readyz.
func (p *engineProcess) readyz() (int, string, error) {
	return httpGet("http://" + p.health + "/readyz")
}

func (p *engineProcess) logTail(n int) string {
	data, err := os.ReadFile(p.logPath)
	if err != nil {
		return fmt.Sprintf("(cannot read the log: %v)", err)
	}
	lines := bytes.Split(bytes.TrimRight(data, "\n"), []byte("\n"))
	if len(lines) > n {
		lines = lines[len(lines)-n:]
	}
	return string(bytes.Join(lines, []byte("\n")))
}

// exitCode is the process's exit code, or -1 while it runs or when a signal ended it.
func (p *engineProcess) exitCode() int {
	if p.running() {
		return -1
	}
	var exit *exec.ExitError
	if errors.As(p.err, &exit) {
		return exit.ExitCode()
	}
	if p.err == nil {
		return 0
	}
	return -1
}
