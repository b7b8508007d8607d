package node

import (
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// containerObs is what the node observed of one container.
type containerObs struct {
	name, image, imageID, containerID string
	state, last                       corev1.ContainerState
	ready, started                    bool
	restarts                          int32
}

// podObs is what the node observed of one pod.
type podObs struct {
	podIP, hostIP string
	startTime     time.Time
	sandboxReady  bool
	message       string
	restartPolicy corev1.RestartPolicy
	containers    []containerObs
	// inits are the init containers; initializing is true until they all succeeded.
	inits        []containerObs
	initializing bool
}

// buildStatus computes a pod's status as a kubelet would report it, keeping the
// fields the node does not own and the transition times of unchanged conditions.
func buildStatus(old corev1.PodStatus, o podObs, now time.Time) corev1.PodStatus {
	s := *old.DeepCopy()
	s.HostIP = o.hostIP
	s.HostIPs = nil
	if o.hostIP != "" {
		s.HostIPs = []corev1.HostIP{{IP: o.hostIP}}
	}
	s.PodIP, s.PodIPs = o.podIP, nil
	if o.podIP != "" {
		s.PodIPs = []corev1.PodIP{{IP: o.podIP}}
	}
	if s.StartTime == nil && !o.startTime.IsZero() {
		s.StartTime = ptrTime(o.startTime)
	}
	s.Message = o.message
	s.ContainerStatuses = make([]corev1.ContainerStatus, 0, len(o.containers))
	allReady := len(o.containers) > 0
	for _, c := range o.containers {
		s.ContainerStatuses = append(s.ContainerStatuses, corev1.ContainerStatus{
			Name: c.name, Image: c.image, ImageID: c.imageID, ContainerID: c.containerID,
			State: c.state, LastTerminationState: c.last, Ready: c.ready,
			Started: &c.started, RestartCount: c.restarts,
		})
		allReady = allReady && c.ready
	}
	s.InitContainerStatuses = nil
	for _, c := range o.inits {
		s.InitContainerStatuses = append(s.InitContainerStatuses, corev1.ContainerStatus{
			Name: c.name, Image: c.image, ImageID: c.imageID, ContainerID: c.containerID,
			State: c.state, LastTerminationState: c.last, Ready: c.state.Terminated != nil && c.state.Terminated.ExitCode == 0,
			Started: &c.started, RestartCount: c.restarts,
		})
	}
	s.Phase = podPhase(o)
	set := func(t corev1.PodConditionType, ok bool, reason string) {
		s.Conditions = setCondition(s.Conditions, t, ok, reason, now)
	}
	set(corev1.PodReadyToStartContainers, o.sandboxReady, "")
	initReason := ""
	if o.initializing {
		initReason = "ContainersNotInitialized"
	}
	set(corev1.PodInitialized, o.sandboxReady && !o.initializing, initReason)
	notReady := ""
	if !allReady {
		notReady = "ContainersNotReady"
	}
	set(corev1.ContainersReady, allReady, notReady)
	set(corev1.PodReady, allReady, notReady)
	return s
}

// podPhase computes the phase as a kubelet does: Pending until the sandbox is up,
// the init containers have succeeded (Failed when one failed under restartPolicy
// Never) and every container has started once; Running while a container runs or will be
// restarted (always with restartPolicy Always, after a failure with OnFailure);
// Succeeded when every container exited 0 for good; Failed when every container
// stopped for good (restartPolicy Never) and one of them failed.
func podPhase(o podObs) corev1.PodPhase {
	if !o.sandboxReady {
		return corev1.PodPending
	}
	if o.initializing {
		for _, c := range o.inits {
			if t := c.state.Terminated; t != nil && t.ExitCode != 0 && o.restartPolicy == corev1.RestartPolicyNever {
				return corev1.PodFailed
			}
		}
		return corev1.PodPending
	}
	running, stopped, succeeded := 0, 0, 0
	for _, c := range o.containers {
		switch {
		case c.state.Running != nil:
			running++
		case c.state.Terminated != nil:
			stopped++
			if c.state.Terminated.ExitCode == 0 {
				succeeded++
			}
		case c.last.Terminated != nil || c.restarts > 0:
			stopped++ // waiting to restart
		default:
			return corev1.PodPending
		}
	}
	switch {
	case running > 0 || stopped == 0:
		return corev1.PodRunning
	case o.restartPolicy == corev1.RestartPolicyAlways || o.restartPolicy == "":
		return corev1.PodRunning
	case stopped == succeeded:
		return corev1.PodSucceeded
	case o.restartPolicy == corev1.RestartPolicyNever:
		return corev1.PodFailed
	}
	return corev1.PodRunning
}

// setCondition sets a condition, keeping its transition time when its status is
// unchanged.
func setCondition(conds []corev1.PodCondition, t corev1.PodConditionType, ok bool, reason string, now time.Time) []corev1.PodCondition {
	status := corev1.ConditionFalse
	if ok {
		status = corev1.ConditionTrue
	}
	for i := range conds {
		if conds[i].Type != t {
			continue
		}
		if conds[i].Status != status {
			conds[i].LastTransitionTime = *ptrTime(now)
		}
		conds[i].Status, conds[i].Reason = status, reason
		return conds
	}
	return append(conds, corev1.PodCondition{Type: t, Status: status, Reason: reason, LastTransitionTime: *ptrTime(now)})
}

// ptrTime returns a Kubernetes time at second precision (what the API stores), so
// statuses compare equal after a round trip.
func ptrTime(t time.Time) *metav1.Time {
	mt := metav1.NewTime(t.Truncate(time.Second))
	return &mt
}

// tail returns the last n lines of s.
func tail(s string, n int) string {
	lines := strings.Split(strings.TrimRight(s, "\n"), "\n")
	if len(lines) > n {
		lines = lines[len(lines)-n:]
	}
	return strings.Join(lines, "\n")
}
