package node

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/klog/v2"
)

// podWorker runs one pod: its network namespace, volumes, containers and status.
type podWorker struct {
	n     *Node
	netns string
	dir   string
	// uid is the user of the pod's namespace (namespaceUID): its containers' user
	// and group unless their securityContext names others.
	uid int64

	mu         sync.Mutex
	pod        *corev1.Pod
	podIP      string
	startTime  time.Time
	sandbox    bool
	setupErr   string
	specErr    string // the spec cannot run: containers wait with this message
	volumeDirs map[string]string
	owner      volumeOwner // of the volumes the node writes
	containers []*container
	// inits are the init containers, run one after the other to completion before
	// the containers start; initialized is set once they all succeeded.
	inits       []*container
	initialized bool
	lastWritten *corev1.PodStatus
	tornDown    bool

	kick     chan struct{}
	stopCh   chan struct{}
	stopOnce sync.Once
}

// newPodWorker makes the worker of pod; the caller holds n.mu.
func newPodWorker(n *Node, pod *corev1.Pod) *podWorker {
	uid := strings.ReplaceAll(string(pod.UID), "-", "")
	if len(uid) > 12 {
		uid = uid[:12]
	}
	users := map[int64]string{}
	for _, w := range n.workers {
		users[w.uid] = w.current().Namespace
	}
	return &podWorker{
		n: n, pod: pod, netns: "ml-" + uid, uid: namespaceUID(pod.Namespace, users),
		dir:    filepath.Join(n.opts.StateDir, "pods", string(pod.UID)),
		kick:   make(chan struct{}, 1),
		stopCh: make(chan struct{}),
	}
}

// update hands the worker the pod's latest state.
func (w *podWorker) update(pod *corev1.Pod) {
	w.mu.Lock()
	w.pod = pod
	w.mu.Unlock()
	w.notify()
}

func (w *podWorker) notify() {
	select {
	case w.kick <- struct{}{}:
	default:
	}
}

// stop ends the worker without deleting the Pod object (node shutdown, pod gone).
func (w *podWorker) stop() { w.stopOnce.Do(func() { close(w.stopCh) }) }

func (w *podWorker) current() *corev1.Pod {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.pod
}

func (w *podWorker) log(ctx context.Context) klog.Logger {
	p := w.current()
	return klog.FromContext(ctx).WithValues("pod", klog.KObj(p))
}

// run is the pod's life: set up, run containers and report status until the pod is
// deleted or the worker stopped, then tear everything down.
func (w *podWorker) run(ctx context.Context) {
	defer w.teardown(ctx)
	if !w.setupUntilDone(ctx) {
		if w.current().DeletionTimestamp != nil {
			w.finish(ctx)
		}
		return
	}
	initDone := make(chan bool, 1)
	go func() { initDone <- w.runInits(ctx) }()
	tick := time.NewTicker(time.Second)
	defer tick.Stop()
	for {
		select {
		case ok := <-initDone:
			if ok {
				w.startContainers(ctx)
			}
		default:
		}
		w.syncStatus(ctx)
		if err := w.refreshTokens(ctx, w.n); err != nil {
			w.log(ctx).Error(err, "Cannot refresh a service account token")
		}
		if w.current().DeletionTimestamp != nil {
			w.finish(ctx)
			return
		}
		select {
		case <-w.stopCh:
			w.stopContainers(10 * time.Second)
			return
		case <-w.kick:
		case <-tick.C:
		case ok := <-initDone:
			if ok {
				w.startContainers(ctx)
			}
		}
	}
}

// setupUntilDone retries the pod's setup until it works; false if the pod was
// deleted or the worker stopped first.
func (w *podWorker) setupUntilDone(ctx context.Context) bool {
	for {
		if w.current().DeletionTimestamp != nil {
			return false
		}
		err := w.setup(ctx)
		if err == nil {
			return true
		}
		if invalid := (*invalidSpecError)(nil); errors.As(err, &invalid) {
			return w.refuse(ctx, err)
		}
		w.setupFailed(ctx, err)
		select {
		case <-w.stopCh:
			return false
		case <-time.After(2 * time.Second):
		}
	}
}

// refuse reports a pod the node can never run, in an event and its status, and
// waits without retrying until the pod is deleted or the worker stopped.
func (w *podWorker) refuse(ctx context.Context, err error) bool {
	w.log(ctx).Info("Pod cannot run", "err", err)
	w.mu.Lock()
	w.setupErr, w.specErr = err.Error(), err.Error()
	w.mu.Unlock()
	w.n.event(ctx, w.current(), corev1.EventTypeWarning, "Failed", "Error: "+err.Error())
	for {
		w.syncStatus(ctx)
		if w.current().DeletionTimestamp != nil {
			return false
		}
		select {
		case <-w.stopCh:
			return false
		case <-w.kick:
		}
	}
}

// setupFailed reports why setup failed in the pod's status message; a pod waiting
// for a claim also gets a FailedMount event, once for every new reason.
func (w *podWorker) setupFailed(ctx context.Context, err error) {
	var wait *claimWaitError
	waiting := errors.As(err, &wait)
	if waiting {
		w.log(ctx).V(1).Info("Pod waits for a claim", "err", err)
	} else {
		w.log(ctx).Error(err, "Pod setup failed; retrying")
	}
	w.mu.Lock()
	changed := w.setupErr != err.Error()
	w.setupErr = err.Error()
	w.mu.Unlock()
	if waiting && changed {
		w.n.event(ctx, w.current(), corev1.EventTypeWarning, "FailedMount", err.Error())
	}
	w.syncStatus(ctx)
}

// setup creates the network namespace, attaches it, materialises volumes and
// prepares the containers.
func (w *podWorker) setup(ctx context.Context) error {
	pod := w.current()
	w.mu.Lock()
	if w.startTime.IsZero() {
		w.startTime = time.Now()
	}
	w.mu.Unlock()
	if w.podIP == "" {
		ip, err := w.n.net.attach(ctx, w.netns, string(pod.UID))
		if err != nil {
			return err
		}
		w.mu.Lock()
		w.podIP = ip
		w.mu.Unlock()
	}
	ids, err := w.identities(pod)
	if err != nil {
		return err
	}
	owner := podVolumeOwner(pod, slices.Collect(maps.Values(ids)), w.uid)
	dirs, err := materializeVolumes(ctx, w.n, pod, filepath.Join(w.dir, "volumes"), owner)
	if err != nil {
		return err
	}
	if err := os.MkdirAll(filepath.Join(w.dir, "logs"), 0o755); err != nil {
		return err
	}
	resolv, err := w.n.resolvConf(pod, w.dir)
	if err != nil {
		return err
	}
	inits, err := w.prepare(pod.Spec.InitContainers, dirs, resolv, false)
	if err != nil {
		return err
	}
	containers, err := w.prepare(pod.Spec.Containers, dirs, resolv, true)
	if err != nil {
		return err
	}
	for _, c := range append(inits, containers...) {
		c.id = ids[c.spec.Name]
	}
	if len(inits) > 0 {
		for _, c := range containers {
			c.state = corev1.ContainerState{Waiting: &corev1.ContainerStateWaiting{Reason: "PodInitializing"}}
		}
	}
	w.mu.Lock()
	w.volumeDirs, w.owner, w.containers, w.inits, w.sandbox, w.setupErr = dirs, owner, containers, inits, true, ""
	w.mu.Unlock()
	for _, c := range append(inits, containers...) {
		if c.kind == runtimePlaceholder {
			w.n.event(ctx, pod, corev1.EventTypeWarning, "PlaceholderImage", c.image.message)
		}
	}
	return nil
}

// identities are who the pod's containers (init containers too) run as, by name;
// a container the node refuses to run is an *invalidSpecError.
func (w *podWorker) identities(pod *corev1.Pod) (map[string]identity, error) {
	ids := map[string]identity{}
	for _, specs := range [][]corev1.Container{pod.Spec.InitContainers, pod.Spec.Containers} {
		for i := range specs {
			id, err := containerIdentity(pod, &specs[i], w.uid)
			if err != nil {
				return nil, err
			}
			ids[specs[i].Name] = id
		}
	}
	return ids, nil
}

// prepare builds the containers of specs with their mounts. Mount points are
// made inside each container's sandbox, never on the host. together says
// whether specs run at the same time (the pod's containers) or one at a time
// (its init containers).
func (w *podWorker) prepare(specs []corev1.Container, dirs map[string]string, resolv bindMount, together bool) ([]*container, error) {
	pod := w.current()
	readOnly := readOnlyVolumes(pod)
	var out []*container
	for i := range specs {
		c := newContainer(w, &specs[i])
		mounts, err := containerMounts(c.spec, dirs)
		if err != nil {
			return nil, err
		}
		if err := checkNoSymlinks(c.spec.Name, mounts, dirs); err != nil {
			return nil, err
		}
		var alongside []corev1.Container
		if together {
			alongside = specs
		}
		if err := checkNesting(pod, c.spec, append(slices.Clone(mounts), resolv), alongside); err != nil {
			return nil, err
		}
		for j, m := range mounts {
			mounts[j].readOnly = m.readOnly || readOnly[m.volume]
		}
		if c.mounts, err = orderMounts(c.spec.Name, append(mounts, resolv)); err != nil {
			return nil, err
		}
		out = append(out, c)
	}
	return out, nil
}

// finish stops the containers of a deleted pod within its grace period and deletes
// the Pod object.
func (w *podWorker) finish(ctx context.Context) {
	pod := w.current()
	w.stopContainers(gracePeriod(pod))
	w.teardown(ctx)
	zero := int64(0)
	err := w.n.kube.CoreV1().Pods(pod.Namespace).Delete(ctx, pod.Name, metav1.DeleteOptions{
		GracePeriodSeconds: &zero, Preconditions: metav1.NewUIDPreconditions(string(pod.UID)),
	})
	if err != nil && !apierrors.IsNotFound(err) && !apierrors.IsConflict(err) {
		w.log(ctx).Error(err, "Cannot delete the pod")
	}
}

func gracePeriod(pod *corev1.Pod) time.Duration {
	switch {
	case pod.DeletionGracePeriodSeconds != nil:
		return time.Duration(*pod.DeletionGracePeriodSeconds) * time.Second
	case pod.Spec.TerminationGracePeriodSeconds != nil:
		return time.Duration(*pod.Spec.TerminationGracePeriodSeconds) * time.Second
	}
	return 30 * time.Second
}

func (w *podWorker) stopContainers(grace time.Duration) {
	w.mu.Lock()
	cs := append(slices.Clone(w.inits), w.containers...)
	w.mu.Unlock()
	var wg sync.WaitGroup
	for _, c := range cs {
		wg.Add(1)
		go func() {
			defer wg.Done()
			c.terminate(grace)
		}()
	}
	wg.Wait()
}

// teardown releases the pod's address and network namespace and removes its
// directories. It is idempotent.
func (w *podWorker) teardown(ctx context.Context) {
	w.mu.Lock()
	done := w.tornDown
	w.tornDown = true
	w.mu.Unlock()
	if done {
		return
	}
	w.n.tokens.forget(w.current().UID)
	if err := w.n.net.detach(ctx, w.netns, string(w.current().UID)); err != nil {
		w.log(ctx).Error(err, "Cannot release the pod network")
	}
	if err := os.RemoveAll(w.dir); err != nil {
		w.log(ctx).Error(err, "Cannot remove the pod directory")
	}
}

// syncStatus writes the pod status if it changed.
func (w *podWorker) syncStatus(ctx context.Context) {
	pod := w.current()
	if pod.DeletionTimestamp != nil {
		return
	}
	status := buildStatus(pod.Status, w.observe(), time.Now())
	w.mu.Lock()
	unchanged := equality.Semantic.DeepEqual(status, pod.Status) ||
		(w.lastWritten != nil && equality.Semantic.DeepEqual(status, *w.lastWritten))
	w.mu.Unlock()
	if unchanged {
		return
	}
	pods := w.n.kube.CoreV1().Pods(pod.Namespace)
	update := pod.DeepCopy()
	update.Status = status
	_, err := pods.UpdateStatus(ctx, update, metav1.UpdateOptions{})
	if apierrors.IsConflict(err) {
		if fresh, gerr := pods.Get(ctx, pod.Name, metav1.GetOptions{}); gerr == nil && fresh.UID == pod.UID {
			fresh.Status = buildStatus(fresh.Status, w.observe(), time.Now())
			_, err = pods.UpdateStatus(ctx, fresh, metav1.UpdateOptions{})
		}
	}
	if err != nil {
		if !apierrors.IsNotFound(err) {
			w.log(ctx).V(1).Info("Cannot write pod status", "err", err)
		}
		return
	}
	w.mu.Lock()
	w.lastWritten = &status
	w.mu.Unlock()
}

// observe collects what the status reports.
func (w *podWorker) observe() podObs {
	w.mu.Lock()
	o := podObs{podIP: w.podIP, hostIP: w.n.net.gw.String(), startTime: w.startTime, sandboxReady: w.sandbox, message: w.setupErr,
		restartPolicy: w.pod.Spec.RestartPolicy}
	cs, specErr, inits := w.containers, w.specErr, w.inits
	o.initializing = !w.initialized && len(w.inits) > 0
	w.mu.Unlock()
	for _, c := range inits {
		o.inits = append(o.inits, c.observe())
	}
	var msgs []string
	if o.message != "" {
		msgs = append(msgs, o.message)
	}
	for _, c := range cs {
		o.containers = append(o.containers, c.observe())
		if c.kind == runtimePlaceholder {
			msgs = append(msgs, fmt.Sprintf("container %s: %s", c.spec.Name, c.image.message))
		}
	}
	o.message = strings.Join(msgs, "; ")
	if len(cs) == 0 {
		waiting := &corev1.ContainerStateWaiting{Reason: "ContainerCreating"}
		if specErr != "" {
			waiting = &corev1.ContainerStateWaiting{Reason: "CreateContainerConfigError", Message: specErr}
		}
		for _, c := range w.current().Spec.Containers {
			o.containers = append(o.containers, containerObs{name: c.Name, image: c.Image,
				state: corev1.ContainerState{Waiting: waiting.DeepCopy()}})
		}
	}
	return o
}

// podWithIP is the pod as env and probes see it: with the addresses the node gave it.
func (w *podWorker) podWithIP() *corev1.Pod {
	w.mu.Lock()
	defer w.mu.Unlock()
	p := w.pod.DeepCopy()
	p.Status.PodIP = w.podIP
	p.Status.PodIPs = []corev1.PodIP{{IP: w.podIP}}
	p.Status.HostIP = w.n.net.gw.String()
	return p
}

// event records an Event about a pod.
func (n *Node) event(ctx context.Context, pod *corev1.Pod, typ, reason, message string) {
	now := metav1.Now()
	ev := &corev1.Event{
		ObjectMeta: metav1.ObjectMeta{GenerateName: pod.Name + ".", Namespace: pod.Namespace},
		InvolvedObject: corev1.ObjectReference{
			Kind: "Pod", APIVersion: "v1", Namespace: pod.Namespace, Name: pod.Name, UID: pod.UID,
		},
		Reason: reason, Message: message, Type: typ, Count: 1,
		FirstTimestamp: now, LastTimestamp: now,
		Source: corev1.EventSource{Component: "kubelet", Host: n.opts.Name},
	}
	if _, err := n.kube.CoreV1().Events(pod.Namespace).Create(ctx, ev, metav1.CreateOptions{}); err != nil {
		klog.FromContext(ctx).V(1).Info("Cannot record event", "reason", reason, "err", err)
	}
}

// configMap and secret read referenced objects for env and volumes.
func (n *Node) configMap(ctx context.Context, ns, name string) (*corev1.ConfigMap, error) {
	return n.kube.CoreV1().ConfigMaps(ns).Get(ctx, name, metav1.GetOptions{})
}

func (n *Node) secret(ctx context.Context, ns, name string) (*corev1.Secret, error) {
	return n.kube.CoreV1().Secrets(ns).Get(ctx, name, metav1.GetOptions{})
}

// claim and volume resolve a pod's claims to the volumes bound to them.
func (n *Node) claim(ctx context.Context, ns, name string) (*corev1.PersistentVolumeClaim, error) {
	return n.kube.CoreV1().PersistentVolumeClaims(ns).Get(ctx, name, metav1.GetOptions{})
}

func (n *Node) volume(ctx context.Context, name string) (*corev1.PersistentVolume, error) {
	return n.kube.CoreV1().PersistentVolumes().Get(ctx, name, metav1.GetOptions{})
}
