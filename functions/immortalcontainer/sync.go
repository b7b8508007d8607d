package immortalcontainer

import (
	"encoding/json"
	"errors"
	"fmt"
	"strings"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"knative.dev/pkg/kmeta"

	"github.com/metalambda/metalambda/internal/hookapi"
)

// ErrInvalidParent is wrapped by Sync's error when the parent is not a valid
// ImmortalContainer (the API server's schema should have refused it).
var ErrInvalidParent = errors.New("invalid ImmortalContainer")

// Names and labels of the child pod.
const (
	// PodSuffix makes the pod's name: "<parent name>-immortalpod", through
	// kmeta.ChildName (names longer than 63 characters are hashed to fit).
	PodSuffix = "-immortalpod"
	// ContainerName is the name of the pod's only container.
	ContainerName = "main"
	// NameLabel is "immortalcontainer" on the pod.
	NameLabel = "app.kubernetes.io/name"
	// InstanceLabel is the parent's name (hashed to 63 characters when longer).
	InstanceLabel = "app.kubernetes.io/instance"
)

var podKey = hookapi.TypeKey("Pod", "v1")

// parent is the ImmortalContainer as the hook reads it.
type parent struct {
	Metadata metav1.ObjectMeta `json:"metadata"`
	Spec     struct {
		Image string `json:"image"`
	} `json:"spec"`
}

// Sync is the ImmortalContainer sync hook: one pod "<name>-immortalpod" running
// spec.image with restartPolicy OnFailure, and status.currentPod. A deleted pod is
// not observed, so it is desired again and the engine recreates it. An invalid
// parent is an error wrapping ErrInvalidParent.
func Sync(req *hookapi.CompositeRequest) (*hookapi.CompositeResponse, error) {
	p, err := parseParent(req.Parent)
	if err != nil {
		return nil, err
	}
	child, err := runtime.DefaultUnstructuredConverter.ToUnstructured(pod(p))
	if err != nil {
		return nil, fmt.Errorf("build the pod of %s/%s: %w", p.Metadata.Namespace, p.Metadata.Name, err)
	}
	delete(child, "status")
	return &hookapi.CompositeResponse{
		Status:    map[string]any{"currentPod": currentPod(req.Children[podKey])},
		Children:  []hookapi.Object{child},
		Finalized: req.Finalizing,
	}, nil
}

func parseParent(obj hookapi.Object) (*parent, error) {
	body, err := json.Marshal(obj)
	if err != nil {
		return nil, fmt.Errorf("%w: %v", ErrInvalidParent, err)
	}
	var p parent
	if err := json.Unmarshal(body, &p); err != nil {
		return nil, fmt.Errorf("%w: %v", ErrInvalidParent, err)
	}
	switch {
	case p.Metadata.Name == "":
		return nil, fmt.Errorf("%w: metadata.name is empty", ErrInvalidParent)
	case strings.TrimSpace(p.Spec.Image) == "":
		return nil, fmt.Errorf("%w %s/%s: spec.image is empty", ErrInvalidParent, p.Metadata.Namespace, p.Metadata.Name)
	case strings.TrimSpace(p.Spec.Image) != p.Spec.Image:
		return nil, fmt.Errorf("%w %s/%s: spec.image %q has surrounding spaces", ErrInvalidParent, p.Metadata.Namespace, p.Metadata.Name, p.Spec.Image)
	}
	return &p, nil
}

// pod is the desired child.
func pod(p *parent) *corev1.Pod {
	return &corev1.Pod{
		TypeMeta: metav1.TypeMeta{APIVersion: "v1", Kind: "Pod"},
		ObjectMeta: metav1.ObjectMeta{
			Name:      kmeta.ChildName(p.Metadata.Name, PodSuffix),
			Namespace: p.Metadata.Namespace,
			Labels: map[string]string{
				NameLabel:     "immortalcontainer",
				InstanceLabel: kmeta.ChildName(p.Metadata.Name, ""),
			},
		},
		Spec: corev1.PodSpec{
			RestartPolicy: corev1.RestartPolicyOnFailure,
			Containers:    []corev1.Container{{Name: ContainerName, Image: p.Spec.Image}},
		},
	}
}

// currentPod is the name of the only observed pod, "" when there are none or more.
func currentPod(pods hookapi.ObjectMap) string {
	if len(pods) != 1 {
		return ""
	}
	for key, obj := range pods {
		if meta, ok := obj["metadata"].(map[string]any); ok {
			if name, ok := meta["name"].(string); ok && name != "" {
				return name
			}
		}
		return key[strings.LastIndex(key, "/")+1:]
	}
	return ""
}
