package pythonlambda

import (
	"fmt"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/metalambda/metalambda/internal/hookapi"
)

// Keys of the observed children in the request.
var (
	configMapKey = hookapi.TypeKey("ConfigMap", "v1")
	serviceKey   = hookapi.TypeKey("Service", "v1")
	ingressKey   = hookapi.TypeKey("Ingress", "networking.k8s.io/v1")
	podKey       = hookapi.TypeKey("Pod", "v1")
)

// conditionReady is the type of the parent's only condition.
const conditionReady = "Ready"

// Reasons of the Ready condition.
const (
	ReasonAllPodsReady     = "AllPodsReady"     // True: every desired pod is current and ready
	ReasonScaledToZero     = "ScaledToZero"     // True: spec.replicas is 0, or the lambda is idle (spec.scaleToZero)
	ReasonCreating         = "Creating"         // a child is not there yet
	ReasonUpdating         = "Updating"         // pods with an old spec-hash are being replaced
	ReasonPodsStarting     = "PodsStarting"     // pods are pending or their containers are starting
	ReasonPodsNotReady     = "PodsNotReady"     // pods run but /healthz fails (a syntax error, say)
	ReasonPodCrashing      = "PodCrashing"      // a container crashes (CrashLoopBackOff, exit code not 0)
	ReasonImagePullFailed  = "ImagePullFailed"  // the image cannot be pulled
	ReasonPodUnschedulable = "PodUnschedulable" // no node takes the pod
	ReasonPodFailing       = "PodFailing"       // another error keeps a container from running
	// ReasonRequirementsFailed (requirements.go): pip cannot install spec.requirements
)

// maxMessage bounds the condition's message (the API allows 32768 bytes) and
// maxTermination each container termination message quoted in it.
const (
	maxMessage     = 4096
	maxTermination = 1024
)

// status is the parent's status as the hook writes it.
type status struct {
	ConfigMaps    int    `json:"configMaps"`
	Services      int    `json:"services"`
	Ingresses     int    `json:"ingresses"`
	Pods          int    `json:"pods"`
	Replicas      int32  `json:"replicas"`
	ReadyReplicas int32  `json:"readyReplicas"`
	URL           string `json:"url"`
	rolloutStatus
	// ConfigRevision identifies the Secrets and ConfigMaps the env reads as this sync
	// saw them (see config.go); omitted when the env reads none.
	ConfigRevision string             `json:"configRevision,omitempty"`
	Conditions     []metav1.Condition `json:"conditions"`
}

// podState is what one desired pod is doing, worst first.
type podState int

const (
	podFailing podState = iota
	podMissing
	podOutdated
	podNotReady
	podStarting
	podReady
)

// podReport is the state of one desired pod, with a reason and a detail when it is
// failing or not ready.
type podReport struct {
	name   string
	state  podState
	reason string
	detail string
}

// observed is what the request says exists.
type observed struct {
	configMaps, services, ingresses map[string]bool
	pods                            map[string]*corev1.Pod
	// configMapData is each observed ConfigMap's data, by name.
	configMapData map[string]map[string]string
}

func observe(children hookapi.Objects) (*observed, error) {
	pods, err := decodePods(children[podKey])
	if err != nil {
		return nil, err
	}
	data, err := decodeConfigMaps(children[configMapKey])
	if err != nil {
		return nil, err
	}
	return &observed{
		configMapData: data,
		configMaps:    namesOf(children[configMapKey]),
		services:      namesOf(children[serviceKey]),
		ingresses:     namesOf(children[ingressKey]),
		pods:          pods,
	}, nil
}

// namesOf lists objects by metadata.name: the request's keys hold the namespace too
// under hook v2.
func namesOf(objs hookapi.ObjectMap) map[string]bool {
	out := map[string]bool{}
	for _, obj := range objs {
		if meta, ok := obj["metadata"].(map[string]any); ok {
			if name, ok := meta["name"].(string); ok {
				out[name] = true
			}
		}
	}
	return out
}

func decodeConfigMaps(objs hookapi.ObjectMap) (map[string]map[string]string, error) {
	out := map[string]map[string]string{}
	for key, obj := range objs {
		var cm corev1.ConfigMap
		if err := roundTrip(obj, &cm); err != nil {
			return nil, fmt.Errorf("observed ConfigMap %s: %w", key, err)
		}
		out[cm.Name] = cm.Data
	}
	return out, nil
}

func decodePods(objs hookapi.ObjectMap) (map[string]*corev1.Pod, error) {
	out := map[string]*corev1.Pod{}
	for key, obj := range objs {
		var p corev1.Pod
		if err := roundTrip(obj, &p); err != nil {
			return nil, fmt.Errorf("observed pod %s: %w", key, err)
		}
		out[p.Name] = &p
	}
	return out, nil
}

// makeStatus reports the observed children and the Ready condition; now is the
// condition's lastTransitionTime when its status changes.
func makeStatus(l *lambda, n names, hash string, obs *observed, now time.Time) *status {
	reports := make([]podReport, 0, len(n.Pods))
	var ready int32
	for _, name := range n.Pods {
		r := reportPod(name, hash, obs.pods[name])
		if r.state == podReady {
			ready++
		}
		reports = append(reports, r)
	}
	cond := readiness(l, n, obs, reports)
	cond.ObservedGeneration = l.Generation
	cond.LastTransitionTime = transitionTime(l.Ready, cond.Status, now)
	url := ""
	if l.Spec.Host != "" {
		url = "http://" + l.Spec.Host + "/"
	}
	return &status{
		ConfigMaps: len(obs.configMaps), Services: len(obs.services), Ingresses: len(obs.ingresses), Pods: len(obs.pods),
		Replicas: l.replicas(), ReadyReplicas: ready, URL: url,
		rolloutStatus: makeRolloutStatus(hash, obs),
		Conditions:    []metav1.Condition{cond},
	}
}

// transitionTime keeps the previous condition's time while its status holds.
func transitionTime(prev *metav1.Condition, now metav1.ConditionStatus, at time.Time) metav1.Time {
	if prev != nil && prev.Status == now && !prev.LastTransitionTime.IsZero() {
		return prev.LastTransitionTime
	}
	return metav1.NewTime(at.UTC().Truncate(time.Second))
}

// readiness is the Ready condition, without its times: the worst problem wins.
func readiness(l *lambda, n names, obs *observed, pods []podReport) metav1.Condition {
	if failing := withState(pods, podFailing); len(failing) > 0 {
		return notReady(failing[0].reason, joinDetails(failing))
	}
	if missing := missingChildren(n, obs, pods); len(missing) > 0 {
		return notReady(ReasonCreating, "waiting for "+strings.Join(missing, ", ")+" to be created")
	}
	if outdated := withState(pods, podOutdated); len(outdated) > 0 {
		return notReady(ReasonUpdating, fmt.Sprintf("replacing %d of %d pods to run the new code, image, env or resources: %s",
			len(outdated), len(pods), joinDetails(outdated)))
	}
	if unready := withState(pods, podNotReady); len(unready) > 0 {
		return notReady(ReasonPodsNotReady, fmt.Sprintf("%d of %d pods run but are not ready: GET %s fails, as it does while spec.code has a syntax error (the pod's log shows it): %s",
			len(unready), len(pods), healthPath, joinDetails(unready)))
	}
	if starting := withState(pods, podStarting); len(starting) > 0 {
		return notReady(ReasonPodsStarting, fmt.Sprintf("%d of %d pods are starting: %s", len(starting), len(pods), joinDetails(starting)))
	}
	if l.replicas() == 0 {
		return metav1.Condition{Type: conditionReady, Status: metav1.ConditionTrue, Reason: ReasonScaledToZero, Message: zeroMessage(l)}
	}
	return metav1.Condition{Type: conditionReady, Status: metav1.ConditionTrue, Reason: ReasonAllPodsReady,
		Message: fmt.Sprintf("%d of %d pods are ready", len(pods), len(pods))}
}

func notReady(reason, message string) metav1.Condition {
	return metav1.Condition{Type: conditionReady, Status: metav1.ConditionFalse, Reason: reason, Message: truncate(message, maxMessage)}
}

func withState(pods []podReport, state podState) []podReport {
	var out []podReport
	for _, p := range pods {
		if p.state == state {
			out = append(out, p)
		}
	}
	return out
}

func joinDetails(pods []podReport) string {
	parts := make([]string, len(pods))
	for i, p := range pods {
		parts[i] = p.name
		if p.detail != "" {
			parts[i] += " (" + p.detail + ")"
		}
	}
	return strings.Join(parts, "; ")
}

// missingChildren names the desired children the request does not hold.
func missingChildren(n names, obs *observed, pods []podReport) []string {
	var out []string
	if !obs.configMaps[n.ConfigMap] {
		out = append(out, "ConfigMap "+n.ConfigMap)
	}
	if !obs.services[n.Service] {
		out = append(out, "Service "+n.Service)
	}
	if !obs.ingresses[n.Ingress] {
		out = append(out, "Ingress "+n.Ingress)
	}
	for _, p := range withState(pods, podMissing) {
		out = append(out, "Pod "+p.name)
	}
	return out
}

// reportPod says what the desired pod name, observed as p (nil when absent), is doing.
func reportPod(name, hash string, p *corev1.Pod) podReport {
	switch {
	case p == nil:
		return podReport{name: name, state: podMissing}
	case p.DeletionTimestamp != nil:
		return podReport{name: name, state: podOutdated, detail: "terminating"}
	case p.Annotations[SpecHashAnnotation] != hash:
		return podReport{name: name, state: podOutdated, detail: "old spec-hash " + p.Annotations[SpecHashAnnotation]}
	}
	if reason, detail := podFailure(p); reason != "" {
		return podReport{name: name, state: podFailing, reason: reason, detail: detail}
	}
	if isReady(p) {
		return podReport{name: name, state: podReady}
	}
	if p.Status.Phase == corev1.PodRunning {
		return podReport{name: name, state: podNotReady}
	}
	return podReport{name: name, state: podStarting, detail: startingDetail(p)}
}

func isReady(p *corev1.Pod) bool {
	for _, c := range p.Status.Conditions {
		if c.Type == corev1.PodReady {
			return c.Status == corev1.ConditionTrue
		}
	}
	return false
}

// Waiting reasons of a container that will not start by itself.
var (
	imagePullReasons = map[string]bool{"ErrImagePull": true, "ImagePullBackOff": true, "InvalidImageName": true, "ErrImageNeverPull": true}
	failingReasons   = map[string]bool{"CreateContainerConfigError": true, "CreateContainerError": true, "RunContainerError": true, "PreStartHookError": true}
)

// podFailure is the condition reason and a detail when the pod cannot serve without
// a change, or "" when it can still become ready.
func podFailure(p *corev1.Pod) (reason, detail string) {
	if p.Status.Phase == corev1.PodFailed {
		return ReasonPodFailing, strings.TrimSpace("failed: " + p.Status.Reason + " " + p.Status.Message)
	}
	for _, c := range p.Status.Conditions {
		if c.Type == corev1.PodScheduled && c.Status == corev1.ConditionFalse && c.Reason == corev1.PodReasonUnschedulable {
			return ReasonPodUnschedulable, "unschedulable: " + c.Message
		}
	}
	if reason, detail := installFailure(p); reason != "" {
		return reason, detail
	}
	for _, cs := range p.Status.ContainerStatuses {
		if reason, detail := containerFailure(cs); reason != "" {
			return reason, detail
		}
	}
	return "", ""
}

func containerFailure(cs corev1.ContainerStatus) (reason, detail string) {
	prefix := "container " + cs.Name + " "
	if w := cs.State.Waiting; w != nil {
		switch {
		case w.Reason == "CrashLoopBackOff":
			return ReasonPodCrashing, prefix + "is in CrashLoopBackOff" + lastTermination(cs.LastTerminationState.Terminated)
		case imagePullReasons[w.Reason]:
			return ReasonImagePullFailed, prefix + "cannot pull image " + cs.Image + ": " + w.Reason + waitingMessage(w)
		case failingReasons[w.Reason]:
			return ReasonPodFailing, prefix + "cannot start: " + w.Reason + waitingMessage(w)
		}
	}
	if t := cs.State.Terminated; t != nil && t.ExitCode != 0 {
		return ReasonPodCrashing, prefix + "terminated" + lastTermination(t)
	}
	return "", ""
}

func waitingMessage(w *corev1.ContainerStateWaiting) string {
	if w.Message == "" {
		return ""
	}
	return ": " + w.Message
}

// lastTermination quotes a termination: reason, exit code and the end of its
// message (with FallbackToLogsOnError, the end of the log: the Python error).
func lastTermination(t *corev1.ContainerStateTerminated) string {
	if t == nil {
		return ""
	}
	out := fmt.Sprintf("; last terminated with exit code %d", t.ExitCode)
	if t.Reason != "" {
		out += " (" + t.Reason + ")"
	}
	if msg := strings.TrimSpace(t.Message); msg != "" {
		out += ": " + tail(msg, maxTermination)
	}
	return out
}

// startingDetail says why a pending pod is not running yet.
func startingDetail(p *corev1.Pod) string {
	for _, cs := range p.Status.InitContainerStatuses {
		if cs.Name == requirementsContainer && cs.State.Running != nil {
			return "installing spec.requirements"
		}
	}
	for _, cs := range p.Status.ContainerStatuses {
		if cs.State.Waiting != nil && cs.State.Waiting.Reason != "" {
			return cs.State.Waiting.Reason
		}
	}
	if p.Status.Phase != "" {
		return string(p.Status.Phase)
	}
	return "no status yet"
}

// truncate keeps the first limit bytes of s, on a rune boundary.
func truncate(s string, limit int) string {
	if len(s) <= limit {
		return s
	}
	cut := limit - len("…")
	for cut > 0 && !isRuneStart(s[cut]) {
		cut--
	}
	return s[:cut] + "…"
}

// tail keeps the last limit bytes of s, on a rune boundary.
func tail(s string, limit int) string {
	if len(s) <= limit {
		return s
	}
	start := len(s) - limit + len("…")
	for start < len(s) && !isRuneStart(s[start]) {
		start++
	}
	return "…" + s[start:]
}

func isRuneStart(b byte) bool { return b&0xC0 != 0x80 }
