package node

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"syscall"
	"time"

	corev1 "k8s.io/api/core/v1"

	"github.com/metalambda/metalambda/internal/gateway/sandbox"
)

// container runs one container of a pod as a host process group, restarting it by
// the pod's restartPolicy with exponential back-off.
type container struct {
	w       *podWorker
	spec    *corev1.Container
	kind    runtimeKind
	image   imageRun
	mounts  []bindMount
	id      identity // who it runs as
	logPath string

	mu       sync.Mutex
	state    corev1.ContainerState
	last     corev1.ContainerState
	restarts int32
	ready    bool
	started  bool
	pid      int              // the running sandbox's first process (nsenter, then bwrap)
	cmd      *sandbox.Command // the running sandbox
	gen      int              // increments at every start, so probes notice restarts
	exited   chan struct{}
	stopping bool
	launched bool // run or runToCompletion began: done will be closed
	stopCh   chan struct{}
	done     chan struct{}
	// startedCh wakes the readiness probe when the process starts.
	startedCh chan struct{}
}

func newContainer(w *podWorker, spec *corev1.Container) *container {
	run := w.n.opts.mapImage(spec.Image)
	return &container{
		w: w, spec: spec, kind: run.kind, image: run,
		logPath: filepath.Join(w.dir, "logs", spec.Name+".log"),
		state:   corev1.ContainerState{Waiting: &corev1.ContainerStateWaiting{Reason: "ContainerCreating"}},
		stopCh:  make(chan struct{}),
		done:    make(chan struct{}),

		startedCh: make(chan struct{}, 1),
	}
}

// run starts the process and restarts it until the pod stops or the policy says no.
func (c *container) run(ctx context.Context) {
	if !c.launch() {
		return
	}
	defer close(c.done)
	go c.probeLoop(ctx, c.spec.ReadinessProbe, c.setReady, true)
	go c.probeLoop(ctx, c.spec.LivenessProbe, c.liveness, false)
	opts := c.w.n.opts
	backoff := opts.BackoffInitial
	for first := true; ; first = false {
		if !first {
			c.mu.Lock()
			c.restarts++
			c.mu.Unlock()
		}
		started := time.Now()
		exit := c.runOnce(ctx)
		c.w.notify()
		if c.isStopping() || !shouldRestart(c.w.current().Spec.RestartPolicy, exit) {
			return
		}
		if time.Since(started) > 10*time.Minute {
			backoff = opts.BackoffInitial
		}
		c.setBackOff(backoff)
		select {
		case <-c.stopCh:
			return
		case <-time.After(backoff):
		}
		backoff = min(2*backoff, opts.BackoffMax)
	}
}

func shouldRestart(policy corev1.RestartPolicy, exitCode int) bool {
	switch policy {
	case corev1.RestartPolicyNever:
		return false
	case corev1.RestartPolicyOnFailure:
		return exitCode != 0
	}
	return true
}

// runOnce runs the process to its end and records how it ended; it returns the exit
// code (-1 if it could not start).
func (c *container) runOnce(ctx context.Context) int {
	cmd, logFile, err := c.command(ctx)
	if err == nil {
		err = c.start(cmd)
		logFile.Close()
	}
	if err != nil {
		reason := "RunContainerError"
		if invalid := (*invalidSpecError)(nil); errors.As(err, &invalid) {
			reason = "CreateContainerConfigError" // as a kubelet's for a subPath it cannot prepare
		}
		c.mu.Lock()
		c.state = corev1.ContainerState{Waiting: &corev1.ContainerStateWaiting{Reason: reason, Message: err.Error()}}
		c.mu.Unlock()
		return -1
	}
	if c.kind == runtimePlaceholder && cmd.Process != nil && c.observe().restarts == 0 {
		c.w.n.event(ctx, c.w.current(), corev1.EventTypeNormal, "Started", "Started placeholder for container "+c.spec.Name)
	}
	c.w.notify()
	err = cmd.Wait()
	code := cmd.ProcessState.ExitCode()
	if ws, ok := cmd.ProcessState.Sys().(syscall.WaitStatus); ok && ws.Signaled() {
		code = 128 + int(ws.Signal())
	}
	_ = err // the exit status is in ProcessState
	c.exitedWith(code)
	return code
}

// command builds the sandbox the container runs in, writing its output to its
// log.
func (c *container) command(ctx context.Context) (*sandbox.Command, *os.File, error) {
	pod := c.w.podWithIP()
	env, err := containerEnv(ctx, c.w.n, pod, c.spec)
	if err != nil {
		return nil, nil, err
	}
	mounts, err := c.openMounts()
	if err != nil {
		return nil, nil, err
	}
	defer closeMounts(mounts)
	logFile, err := os.OpenFile(c.logPath, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		return nil, nil, err
	}
	cmd, err := c.w.n.sandbox.Command(c.sandboxSpec(pod, mounts, env, argv(c.spec, c.image)))
	if err != nil {
		logFile.Close()
		return nil, nil, err
	}
	cmd.Stdout, cmd.Stderr = logFile, logFile
	return cmd, logFile, nil
}

// openMounts checks the container's mounts for links again (its own earlier
// run may have left some) and opens their volumes' directories and subPaths,
// for one start; the caller closes them (closeMounts) once the sandbox command
// is made.
func (c *container) openMounts() ([]bindMount, error) {
	c.w.mu.Lock()
	dirs, owner := c.w.volumeDirs, c.w.owner
	c.w.mu.Unlock()
	if err := checkNoSymlinks(c.spec.Name, c.mounts, dirs); err != nil {
		return nil, err
	}
	mounts := slices.Clone(c.mounts)
	for i, m := range mounts {
		if m.volume == "" {
			continue // the node's own file
		}
		// A whole volume too: a claim's directory is reached through paths
		// the node does not own.
		f, err := openSubPath(dirs[m.volume], m.subPath, owner)
		if err != nil {
			closeMounts(mounts)
			return nil, fmt.Errorf("container %s: volumeMount %s: %w", c.spec.Name, m.volume, err)
		}
		mounts[i].from = f
	}
	return mounts, nil
}

func closeMounts(mounts []bindMount) {
	for _, m := range mounts {
		if m.from != nil {
			m.from.Close()
		}
	}
}

// sandboxSpec is how the container's command args runs with mounts: see
// containerSpec.
func (c *container) sandboxSpec(pod *corev1.Pod, mounts []bindMount, env, args []string) sandbox.Spec {
	return containerSpec(c.spec, containerRun{
		id: c.id, hostPaths: c.image.hostPaths, mounts: mounts,
		netns: netnsPath(c.w.netns), hostname: pod.Name, openFiles: c.w.n.openFiles,
	}, env, args)
}

// containerRun is what a container's sandbox is made of besides its spec.
type containerRun struct {
	id        identity    // who it runs as
	hostPaths []string    // host paths of its runtime it sees read-only
	mounts    []bindMount // its volumes
	netns     string      // the pod's network namespace
	hostname  string      // the pod's name
	openFiles int64       // RLIMIT_NOFILE
}

// containerSpec is the sandbox of a container: args run as run.id in the pod's
// network namespace, with a read-only view of the system directories and
// run.hostPaths, its mounts at their targets (read-only where they say so), a
// private /tmp, its workingDir (the root without one, as an image without a
// WORKDIR), the pod's name as its hostname, and cgroup
// bounds from its resources.limits.
func containerSpec(c *corev1.Container, run containerRun, env, args []string) sandbox.Spec {
	user := run.id.user
	spec := sandbox.Spec{
		Args: args, Env: env, ReadOnly: outsideSystemDirs(run.hostPaths),
		User: &user, Capabilities: run.id.caps, Dir: cmp.Or(c.WorkingDir, "/"), NetNS: run.netns,
		Hostname: hostnameOf(run.hostname), Limits: containerLimits(c.Resources, run.openFiles),
	}
	for _, m := range run.mounts {
		spec.Binds = append(spec.Binds, sandbox.Bind{Source: m.source, Target: m.target, Writable: !m.readOnly, From: m.from})
	}
	return spec
}

// hostnameOf is a pod's name as a hostname: at most 63 characters, as a
// kubelet cuts it.
func hostnameOf(name string) string {
	if len(name) > 63 {
		name = strings.TrimRight(name[:63], "-.")
	}
	return name
}

func (c *container) start(cmd *sandbox.Command) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.stopping {
		return errors.New("pod is stopping")
	}
	if err := cmd.Start(); err != nil {
		return err
	}
	c.w.n.recordStarted(cmd.Process.Pid)
	c.pid, c.cmd, c.started, c.ready = cmd.Process.Pid, cmd, true, false
	c.gen++
	c.exited = make(chan struct{})
	c.state = corev1.ContainerState{Running: &corev1.ContainerStateRunning{StartedAt: *ptrTime(time.Now())}}
	select {
	case c.startedCh <- struct{}{}:
	default:
	}
	return nil
}

func (c *container) exitedWith(code int) {
	logTail := ""
	if b, err := readTail(c.logPath, 4096); err == nil {
		logTail = tail(string(b), 10)
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	reason := "Completed"
	if code != 0 {
		reason = "Error"
	}
	term := &corev1.ContainerStateTerminated{
		ExitCode: int32(code), Reason: reason, Message: logTail,
		FinishedAt: *ptrTime(time.Now()), ContainerID: c.containerID(),
	}
	if c.state.Running != nil {
		term.StartedAt = c.state.Running.StartedAt
	}
	c.state = corev1.ContainerState{Terminated: term}
	c.ready, c.pid, c.cmd = false, 0, nil
	close(c.exited)
}

func (c *container) setBackOff(d time.Duration) {
	c.mu.Lock()
	if w := c.state.Waiting; w != nil && w.Reason == "CreateContainerConfigError" {
		// A start refused for its spec keeps saying why, as a kubelet's does.
		c.mu.Unlock()
		return
	}
	c.last = c.state
	c.state = corev1.ContainerState{Waiting: &corev1.ContainerStateWaiting{
		Reason:  "CrashLoopBackOff",
		Message: fmt.Sprintf("back-off %s restarting failed container=%s pod=%s", d, c.spec.Name, c.w.current().Name),
	}}
	c.mu.Unlock()
	c.w.notify()
}

func (c *container) containerID() string {
	return fmt.Sprintf("metalambda-local://%s-%s-%d", c.w.netns, c.spec.Name, c.gen)
}

func (c *container) isStopping() bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.stopping
}

// launch marks the container as launched; false when it is already stopping.
func (c *container) launch() bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.stopping {
		return false
	}
	c.launched = true
	return true
}

// terminate stops the container for good: SIGTERM to its command, SIGKILL to its
// whole sandbox after the grace period. A container never launched (its pod's
// init containers had not finished) just stays stopped.
func (c *container) terminate(grace time.Duration) {
	c.mu.Lock()
	if !c.stopping {
		c.stopping = true
		close(c.stopCh)
	}
	cmd, exited, launched := c.cmd, c.exited, c.launched
	c.mu.Unlock()
	if !launched {
		return
	}
	if cmd != nil {
		_ = cmd.Signal(syscall.SIGTERM)
		select {
		case <-exited:
		case <-time.After(grace):
			cmd.Kill()
		}
	}
	<-c.done
}

// kill ends the current sandbox (a failed liveness probe); run restarts it.
func (c *container) kill() {
	c.mu.Lock()
	cmd := c.cmd
	c.mu.Unlock()
	if cmd != nil {
		cmd.Kill()
	}
}

func (c *container) observe() containerObs {
	c.mu.Lock()
	defer c.mu.Unlock()
	o := containerObs{
		name: c.spec.Name, image: c.spec.Image, imageID: "metalambda-local://" + c.spec.Image,
		state: *c.state.DeepCopy(), last: *c.last.DeepCopy(), restarts: c.restarts,
		started: c.state.Running != nil,
	}
	if c.kind == runtimePlaceholder {
		o.imageID = "metalambda-local://placeholder"
	}
	if c.started {
		o.containerID = c.containerID()
	}
	o.ready = c.state.Running != nil && (c.spec.ReadinessProbe == nil || c.ready)
	return o
}

// readTail reads up to n bytes from the end of a file.
func readTail(path string, n int64) ([]byte, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	info, err := f.Stat()
	if err != nil {
		return nil, err
	}
	if info.Size() > n {
		if _, err := f.Seek(-n, io.SeekEnd); err != nil {
			return nil, err
		}
	}
	return io.ReadAll(f)
}
