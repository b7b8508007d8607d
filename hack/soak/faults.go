package main

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"slices"
	"strings"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/wait"

	"github.com/metalambda/metalambda/internal/local/platform"
)

// The fault kinds.
const (
	faultEngineLeader = "engine-leader"  // the leading engine pod, deleted at once (grace 0)
	faultGateway      = "gateway"        // a gateway replica pod, deleted as a roll does (its grace)
	faultLambda       = "pythonlambda"   // a PythonLambda's pod, deleted with its grace
	faultAPIServer    = "kube-apiserver" // SIGKILL, restarted by the platform
	faultEtcd         = "etcd"           // SIGKILL, restarted by the platform
	faultNode         = "node"           // the local node stopped and started again: every pod restarts
)

var allFaults = []string{faultEngineLeader, faultGateway, faultLambda, faultAPIServer, faultEtcd, faultNode}

func isFault(kind string) bool { return slices.Contains(allFaults, kind) }

// windowTail is how long a fault's window lasts after its component is back:
// informers watch again and queued retries run.
const windowTail = 5 * time.Second

// recoveryTimeout bounds the wait for a component to come back.
const recoveryTimeout = 3 * time.Minute

// window is one fault: from its injection to windowTail after its component is back.
type window struct {
	kind      string
	target    int // the PythonLambda's index (faultLambda), else -1
	detail    string
	start     time.Time
	recovered time.Time
	err       string // the fault could not be injected, or did not recover
}

func (w window) end() time.Time { return w.recovered.Add(windowTail) }

func (w window) contains(t time.Time) bool { return !t.Before(w.start) && !t.After(w.end()) }

// injector injects one fault at a time until its context ends: it waits an
// exponentially distributed time (mean FaultInterval) after the previous window,
// injects the next kind of a shuffled round of the kinds (each kind once per round),
// and waits until the component is back.
type injector struct {
	s *soak
	// outer is the whole run's context: a fault injected before the end of the load
	// is seen through unless the run itself is cancelled.
	outer context.Context
	mu    sync.Mutex
	ws    []window
}

func newInjector(s *soak, outer context.Context) *injector { return &injector{s: s, outer: outer} }

func (in *injector) run(ctx context.Context) {
	var round []string
	for {
		mean := float64(in.s.cfg.FaultInterval)
		wait := time.Duration(in.s.random(func(r *rand.Rand) int { return int(r.ExpFloat64() * mean) }))
		select {
		case <-ctx.Done():
			return
		case <-time.After(wait):
		}
		if len(round) == 0 {
			round = slices.Clone(in.s.cfg.Faults)
			in.s.rngMu.Lock()
			in.s.rng.Shuffle(len(round), func(i, j int) { round[i], round[j] = round[j], round[i] })
			in.s.rngMu.Unlock()
		}
		kind := round[0]
		round = round[1:]
		w := in.inject(in.outer, kind)
		in.s.log("fault %s %s: back after %.1fs %s", w.kind, w.detail, w.recovered.Sub(w.start).Seconds(), w.err)
		in.mu.Lock()
		in.ws = append(in.ws, w)
		in.mu.Unlock()
		select { // the next fault comes after this one's window
		case <-ctx.Done():
			return
		case <-time.After(time.Until(w.end())):
		}
	}
}

func (in *injector) windows() []window {
	in.mu.Lock()
	defer in.mu.Unlock()
	return slices.Clone(in.ws)
}

// inject injects one fault and waits until its component is back.
func (in *injector) inject(ctx context.Context, kind string) window {
	w := window{kind: kind, target: -1, start: time.Now()}
	ctx, cancel := context.WithTimeout(ctx, recoveryTimeout)
	defer cancel()
	var err error
	switch kind {
	case faultEngineLeader:
		err = in.killLeader(ctx, &w)
	case faultGateway:
		err = in.killPod(ctx, &w, platform.GatewayNamespace, platform.GatewayService+"-", 2)
	case faultLambda:
		w.target = in.s.random(func(r *rand.Rand) int { return r.IntN(in.s.cfg.Lambdas) })
		err = in.killPod(ctx, &w, lambdaNS, lambdaName(w.target)+"-", 1)
	case faultAPIServer:
		err = in.s.p.RestartAPIServer(ctx, 0)
	case faultEtcd:
		if err = in.s.p.RestartEtcd(ctx, 0); err == nil {
			err = in.apiAnswers(ctx)
		}
	case faultNode:
		if err = in.s.p.RestartNode(); err == nil {
			err = in.allPodsBack(ctx, w.start)
		}
	}
	w.recovered = time.Now()
	if err != nil {
		w.err = err.Error()
	}
	return w
}

// killLeader deletes the leading engine pod at once (grace 0, a crash) and waits
// until the other pod leads and the Deployment has two fresh, ready pods again.
func (in *injector) killLeader(ctx context.Context, w *window) error {
	var uid, name string
	err := wait.PollUntilContextCancel(ctx, 200*time.Millisecond, true, func(context.Context) (bool, error) {
		u, n := in.s.engines.leaderPod()
		uid, name = string(u), n
		return uid != "", nil
	})
	if err != nil {
		return fmt.Errorf("no engine pod leads: %w", err)
	}
	w.detail = name
	zero := int64(0)
	if err := in.s.kube.CoreV1().Pods(platform.GatewayNamespace).Delete(ctx, name, metav1.DeleteOptions{GracePeriodSeconds: &zero}); err != nil {
		return err
	}
	err = wait.PollUntilContextCancel(ctx, 200*time.Millisecond, true, func(context.Context) (bool, error) {
		u, _ := in.s.engines.leaderPod()
		return u != "" && string(u) != uid, nil
	})
	if err != nil {
		return fmt.Errorf("no new leader: %w", err)
	}
	return in.podsBack(ctx, platform.GatewayNamespace, "metalambda-engine-", 2, types.UID(uid), time.Time{})
}

// killPod deletes a random pod named prefix* with its grace period, as a roll or a
// drain does, and waits until want fresh, ready pods of that name run again and the
// deleted one is gone.
func (in *injector) killPod(ctx context.Context, w *window, ns, prefix string, want int) error {
	pods, err := in.pods(ctx, ns, prefix)
	if err != nil {
		return err
	}
	if len(pods) == 0 {
		return fmt.Errorf("no pod %s* in %s", prefix, ns)
	}
	victim := pods[in.s.random(func(r *rand.Rand) int { return r.IntN(len(pods)) })]
	w.detail = victim.Name
	if err := in.s.kube.CoreV1().Pods(ns).Delete(ctx, victim.Name, metav1.DeleteOptions{}); err != nil {
		return err
	}
	return in.podsBack(ctx, ns, prefix, want, victim.UID, time.Time{})
}

// podsBack waits until exactly want pods named prefix* exist, each ready, none of
// them the victim's (deleted) UID, and, with since set, every container of each
// started since (the pods the new node started again).
func (in *injector) podsBack(ctx context.Context, ns, prefix string, want int, victim types.UID, since time.Time) error {
	var last string
	err := wait.PollUntilContextCancel(ctx, 250*time.Millisecond, true, func(ctx context.Context) (bool, error) {
		pods, err := in.pods(ctx, ns, prefix)
		if err != nil {
			last = err.Error()
			return false, nil
		}
		back := 0
		for _, pod := range pods {
			if pod.UID != victim && podReady(&pod, since) {
				back++
			}
		}
		last = fmt.Sprintf("%d pods, %d of them ready (and started since the fault)", len(pods), back)
		return len(pods) == want && back == want, nil
	})
	if err != nil {
		return fmt.Errorf("%s* in %s not back: %s", prefix, ns, last)
	}
	return nil
}

func (in *injector) pods(ctx context.Context, ns, prefix string) ([]corev1.Pod, error) {
	list, err := in.s.kube.CoreV1().Pods(ns).List(ctx, metav1.ListOptions{})
	if err != nil {
		return nil, err
	}
	var out []corev1.Pod
	for _, pod := range list.Items {
		if strings.HasPrefix(pod.Name, prefix) && pod.Status.Phase != corev1.PodSucceeded && pod.Status.Phase != corev1.PodFailed {
			out = append(out, pod)
		}
	}
	return out, nil
}

// podReady: not being deleted, Ready, and every container running since since (the
// API's times have a one-second resolution).
func podReady(pod *corev1.Pod, since time.Time) bool {
	if pod.DeletionTimestamp != nil || len(pod.Status.ContainerStatuses) == 0 {
		return false
	}
	ready := false
	for _, c := range pod.Status.Conditions {
		ready = ready || (c.Type == corev1.PodReady && c.Status == corev1.ConditionTrue)
	}
	for _, c := range pod.Status.ContainerStatuses {
		if c.State.Running == nil || c.State.Running.StartedAt.Time.Before(since.Truncate(time.Second)) {
			return false
		}
	}
	return ready
}

// allPodsBack waits until the engines, the gateways and every PythonLambda run
// again, and an engine leads.
func (in *injector) allPodsBack(ctx context.Context, since time.Time) error {
	var errs []error
	errs = append(errs, in.podsBack(ctx, platform.GatewayNamespace, "metalambda-engine-", 2, "", since))
	errs = append(errs, in.podsBack(ctx, platform.GatewayNamespace, platform.GatewayService+"-", 2, "", since))
	errs = append(errs, in.podsBack(ctx, lambdaNS, "pl-", in.s.cfg.Lambdas, "", since))
	errs = append(errs, wait.PollUntilContextCancel(ctx, 200*time.Millisecond, true, func(context.Context) (bool, error) {
		u, _ := in.s.engines.leaderPod()
		return u != "", nil
	}))
	return errors.Join(errs...)
}

// apiAnswers waits until the API server reads from etcd again.
func (in *injector) apiAnswers(ctx context.Context) error {
	return wait.PollUntilContextCancel(ctx, 100*time.Millisecond, true, func(ctx context.Context) (bool, error) {
		_, err := in.s.kube.CoreV1().Namespaces().Get(ctx, parentNS, metav1.GetOptions{})
		return err == nil || apierrors.IsNotFound(err), nil
	})
}
