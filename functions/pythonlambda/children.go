package pythonlambda

import (
	"crypto/sha256"
	_ "embed"
	"encoding/hex"
	"encoding/json"
	"strconv"
	"strings"

	corev1 "k8s.io/api/core/v1"
	networkingv1 "k8s.io/api/networking/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/util/intstr"

	"github.com/metalambda/metalambda/internal/hookapi"
)

// script is the Python HTTP server the pods run.
//
//go:embed script.py
var script string

// What the pods run and where.
const (
	containerName = "lambda"
	volumeName    = "lambda"
	mountPath     = "/lambda"
	scriptKey     = "script.py"
	codeKey       = "code.py"
	healthPath    = "/healthz"
	containerPort = 8080
	servicePort   = 80
)

// children builds the desired children: the current ConfigMap and those older pods
// still mount, the Service, the Ingress, then the surge pod during a rollout and the
// pods in index order (the order the rollout replaces them in).
func children(l *lambda, n names, hash string, plan rolloutPlan) ([]hookapi.Object, error) {
	objs := []runtime.Object{configMap(l, n)}
	for _, cm := range plan.kept {
		objs = append(objs, cm)
	}
	objs = append(objs, service(l, n), ingress(l, n))
	if plan.surge {
		objs = append(objs, pod(l, n, n.Surge, hash))
	}
	for _, name := range n.Pods {
		objs = append(objs, pod(l, n, name, hash))
	}
	out := make([]hookapi.Object, 0, len(objs))
	for _, obj := range objs {
		m, err := toObject(obj)
		if err != nil {
			return nil, err
		}
		out = append(out, m)
	}
	return out, nil
}

func meta(l *lambda, name string) metav1.ObjectMeta {
	return metav1.ObjectMeta{Name: name, Namespace: l.Namespace, Labels: selector(l)}
}

func configMap(l *lambda, n names) *corev1.ConfigMap {
	return &corev1.ConfigMap{
		TypeMeta:   metav1.TypeMeta{APIVersion: "v1", Kind: "ConfigMap"},
		ObjectMeta: meta(l, n.ConfigMap),
		Data:       files(l),
	}
}

// files are what the pods mount: the server, the user's code and requirements.
func files(l *lambda) map[string]string {
	out := map[string]string{scriptKey: script, codeKey: l.Spec.Code}
	if strings.TrimSpace(l.Spec.Requirements) != "" {
		out[requirementsKey] = l.Spec.Requirements
	}
	return out
}

func service(l *lambda, n names) *corev1.Service {
	return &corev1.Service{
		TypeMeta:   metav1.TypeMeta{APIVersion: "v1", Kind: "Service"},
		ObjectMeta: meta(l, n.Service),
		Spec: corev1.ServiceSpec{
			Type:     corev1.ServiceTypeClusterIP,
			Selector: selector(l),
			Ports: []corev1.ServicePort{{
				Name: "http", Protocol: corev1.ProtocolTCP,
				Port: servicePort, TargetPort: intstr.FromInt32(containerPort),
			}},
		},
	}
}

func ingress(l *lambda, n names) *networkingv1.Ingress {
	prefix := networkingv1.PathTypePrefix
	ing := &networkingv1.Ingress{
		TypeMeta:   metav1.TypeMeta{APIVersion: "networking.k8s.io/v1", Kind: "Ingress"},
		ObjectMeta: meta(l, n.Ingress),
		Spec: networkingv1.IngressSpec{
			Rules: []networkingv1.IngressRule{{
				Host: l.Spec.Host,
				IngressRuleValue: networkingv1.IngressRuleValue{HTTP: &networkingv1.HTTPIngressRuleValue{
					Paths: []networkingv1.HTTPIngressPath{{
						Path: "/", PathType: &prefix,
						Backend: networkingv1.IngressBackend{Service: &networkingv1.IngressServiceBackend{
							Name: n.Service, Port: networkingv1.ServiceBackendPort{Number: servicePort},
						}},
					}},
				}},
			}},
		},
	}
	if l.Spec.IngressClassName != "" {
		ing.Spec.IngressClassName = &l.Spec.IngressClassName
	}
	ing.Annotations = ingressAnnotations(l)
	return ing
}

func pod(l *lambda, n names, name, hash string) *corev1.Pod {
	m := meta(l, name)
	m.Annotations = map[string]string{SpecHashAnnotation: hash}
	if l.ServedConfig != "" {
		m.Annotations[ConfigRevisionAnnotation] = l.ServedConfig
	}
	return &corev1.Pod{
		TypeMeta:   metav1.TypeMeta{APIVersion: "v1", Kind: "Pod"},
		ObjectMeta: m,
		Spec:       podSpec(l, n),
	}
}

// podSpec is the same for every pod of the lambda.
func podSpec(l *lambda, n names) corev1.PodSpec {
	return withRequirements(l, corev1.PodSpec{
		RestartPolicy: corev1.RestartPolicyAlways,
		Containers: []corev1.Container{{
			Name:    containerName,
			Image:   l.Spec.Image,
			Command: []string{"python3", mountPath + "/" + scriptKey},
			Ports:   []corev1.ContainerPort{{Name: "http", ContainerPort: containerPort, Protocol: corev1.ProtocolTCP}},
			Env:     env(l.Spec.Env),
			EnvFrom: l.Spec.EnvFrom,
			ReadinessProbe: &corev1.Probe{
				ProbeHandler: corev1.ProbeHandler{HTTPGet: &corev1.HTTPGetAction{
					Path: healthPath, Port: intstr.FromInt32(containerPort),
				}},
				PeriodSeconds: 5,
			},
			Resources:                l.Spec.Resources,
			VolumeMounts:             []corev1.VolumeMount{{Name: volumeName, MountPath: mountPath, ReadOnly: true}},
			TerminationMessagePolicy: corev1.TerminationMessageFallbackToLogsOnError,
		}},
		Volumes: []corev1.Volume{{
			Name: volumeName,
			VolumeSource: corev1.VolumeSource{ConfigMap: &corev1.ConfigMapVolumeSource{
				LocalObjectReference: corev1.LocalObjectReference{Name: n.ConfigMap},
			}},
		}},
	})
}

// env is the pod IP (downward API), the port, unbuffered Python output unless the
// user says otherwise, then the user's env.
func env(user []corev1.EnvVar) []corev1.EnvVar {
	out := []corev1.EnvVar{
		{Name: "POD_IP", ValueFrom: &corev1.EnvVarSource{FieldRef: &corev1.ObjectFieldSelector{APIVersion: "v1", FieldPath: "status.podIP"}}},
		{Name: "PORT", Value: strconv.Itoa(containerPort)},
	}
	if !hasEnv(user, "PYTHONUNBUFFERED") {
		out = append(out, corev1.EnvVar{Name: "PYTHONUNBUFFERED", Value: "1"})
	}
	return append(out, user...)
}

func hasEnv(env []corev1.EnvVar, name string) bool {
	for _, e := range env {
		if e.Name == name {
			return true
		}
	}
	return false
}

// podHash is the spec-hash annotation of the lambda's pods.
func podHash(l *lambda, n names) string {
	return specHash(podSpec(l, n), files(l), l.ServedConfig)
}

// specHash identifies what a pod runs: its spec, the files it mounts and the
// revision of the Secrets and ConfigMaps its env reads ("" for none).
func specHash(spec corev1.PodSpec, files map[string]string, config string) string {
	body, _ := json.Marshal(struct {
		Spec   corev1.PodSpec    `json:"spec"`
		Files  map[string]string `json:"files"`
		Config string            `json:"config,omitempty"`
	}{spec, files, config}) // plain structs and maps: cannot fail
	sum := sha256.Sum256(body)
	return hex.EncodeToString(sum[:8])
}

// toObject turns a typed object into the hook's map form, without a status.
func toObject(obj runtime.Object) (hookapi.Object, error) {
	m, err := runtime.DefaultUnstructuredConverter.ToUnstructured(obj)
	if err != nil {
		return nil, err
	}
	delete(m, "status")
	return m, nil
}
