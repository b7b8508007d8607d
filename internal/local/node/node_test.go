package node

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"reflect"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"golang.org/x/sys/unix"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/utils/ptr"
)

// fakeRefs serves ConfigMaps, Secrets, claims, volumes and tokens from maps.
type fakeRefs struct {
	cms     map[string]*corev1.ConfigMap
	secrets map[string]*corev1.Secret
	claims  map[string]*corev1.PersistentVolumeClaim
	volumes map[string]*corev1.PersistentVolume
}

func (f fakeRefs) configMap(_ context.Context, _, name string) (*corev1.ConfigMap, error) {
	if cm, ok := f.cms[name]; ok {
		return cm, nil
	}
	return nil, apierrors.NewNotFound(schema.GroupResource{Resource: "configmaps"}, name)
}

func (f fakeRefs) secret(_ context.Context, _, name string) (*corev1.Secret, error) {
	if s, ok := f.secrets[name]; ok {
		return s, nil
	}
	return nil, apierrors.NewNotFound(schema.GroupResource{Resource: "secrets"}, name)
}

func (f fakeRefs) claim(_ context.Context, _, name string) (*corev1.PersistentVolumeClaim, error) {
	if c, ok := f.claims[name]; ok {
		return c, nil
	}
	return nil, apierrors.NewNotFound(schema.GroupResource{Resource: "persistentvolumeclaims"}, name)
}

func (f fakeRefs) volume(_ context.Context, name string) (*corev1.PersistentVolume, error) {
	if v, ok := f.volumes[name]; ok {
		return v, nil
	}
	return nil, apierrors.NewNotFound(schema.GroupResource{Resource: "persistentvolumes"}, name)
}

func (fakeRefs) token(context.Context, *corev1.Pod, string, *int64) (string, error) {
	return "tok", nil
}

func (fakeRefs) services(context.Context) ([]*corev1.Service, error) { return nil, nil }

var refs = fakeRefs{
	cms:     map[string]*corev1.ConfigMap{"app": {Data: map[string]string{"main.py": "print(1)", "greeting": "hi"}}},
	secrets: map[string]*corev1.Secret{"creds": {Data: map[string][]byte{"password": []byte("s3cret")}}},
}

func testPod() *corev1.Pod {
	return &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: "web", Namespace: "ns", UID: "u-1", Labels: map[string]string{"app": "web"}},
		Spec:       corev1.PodSpec{NodeName: "local"},
		Status:     corev1.PodStatus{PodIP: "10.244.0.7"},
	}
}

func TestMapImageAndArgv(t *testing.T) {
	const py, js = "/opt/py/bin/python3.11", "/opt/node/bin/node"
	o := Options{Python: py, NodeJS: js}
	if err := o.buildImageRules(); err != nil {
		t.Fatal(err)
	}
	entry := fmt.Sprintf(nodeEntrypoint, "'"+js+"'")
	cases := []struct {
		name string
		c    corev1.Container
		want []string
	}{
		{"python default command", corev1.Container{Image: "python:3.11"}, []string{py}},
		{"python args", corev1.Container{Image: "docker.io/library/python:3.11-slim", Args: []string{"-m", "http.server"}}, []string{py, "-m", "http.server"}},
		{"python command", corev1.Container{Image: "python", Command: []string{"python", "app.py"}, Args: []string{"-v"}}, []string{py, "app.py", "-v"}},
		{"shell in python image", corev1.Container{Image: "python:3.12", Command: []string{"sh", "-c", "echo hi"}}, []string{"sh", "-c", "echo hi"}},
		{"unmapped image", corev1.Container{Image: "nginx:latest", Command: []string{"nginx"}}, []string{"sleep", "infinity"}},
		{"registry port is not a tag", corev1.Container{Image: "localhost:5000/python"}, []string{py}},
		{"busybox command", corev1.Container{Image: "busybox:1.36", Command: []string{"sh", "-c", "echo ${JOB_INDEX}"}}, []string{"sh", "-c", "echo ${JOB_INDEX}"}},
		{"alpine args only", corev1.Container{Image: "alpine", Args: []string{"echo", "hi"}}, []string{"echo", "hi"}},
		{"base image default", corev1.Container{Image: "docker.io/library/debian:12"}, []string{"sh"}},
		{"opensuse by namespace", corev1.Container{Image: "opensuse/leap:15", Command: []string{"true"}}, []string{"true"}},
		{"node default", corev1.Container{Image: "node:20"}, []string{js}},
		{"node command", corev1.Container{Image: "node:20-alpine", Command: []string{"node", "-e", "1"}}, []string{js, "-e", "1"}},
		{"node args use the entrypoint", corev1.Container{Image: "node:20", Args: []string{"app.js"}}, []string{"sh", "-c", entry, "docker-entrypoint.sh", "app.js"}},
		{"node args naming node", corev1.Container{Image: "node:20", Args: []string{"node", "app.js"}}, []string{"sh", "-c", entry, "docker-entrypoint.sh", js, "app.js"}},
		{"python command in a base image", corev1.Container{Image: "ubuntu", Command: []string{"python3", "-V"}}, []string{py, "-V"}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			if diff := cmp.Diff(tc.want, argv(&tc.c, o.mapImage(tc.c.Image))); diff != "" {
				t.Errorf("argv (-want +got):\n%s", diff)
			}
		})
	}
	if got := o.mapImage("nginx:latest").message; got != "image nginx:latest is not run by the local node; a placeholder process stands in" {
		t.Errorf("placeholder message %q", got)
	}
	if got := o.mapImage("busybox").message; got != "" {
		t.Errorf("busybox has a placeholder message %q", got)
	}
	noNode := Options{Python: py}
	if err := noNode.buildImageRules(); err != nil {
		t.Fatal(err)
	}
	if run := noNode.mapImage("node:20"); run.kind != runtimePlaceholder || !strings.Contains(run.message, "needs Node.js on the host") {
		t.Errorf("node image without host Node.js: %+v", run)
	}
}

func TestImageMapFile(t *testing.T) {
	write := func(t *testing.T, text string) string {
		p := filepath.Join(t.TempDir(), "images.yaml")
		if err := os.WriteFile(p, []byte(text), 0o600); err != nil {
			t.Fatal(err)
		}
		return p
	}
	sh, err := exec.LookPath("sh")
	if err != nil {
		t.Fatal(err)
	}
	file := write(t, `images:
- image: ghcr.io/acme/*
  kind: host
- image: pypy
  kind: python
  interpreter: sh
- image: busybox
  kind: placeholder
- image: ghcr.io/metalambda/engine
  kind: host
  entrypoint: [sh, -c, 'exec engine "$@"', engine]
`)
	o := Options{Python: "/usr/bin/python3", NodeJS: "/usr/bin/node", ImageMapFile: file,
		Images: []ImageRule{{Image: "registry.local:5000/tools/node-*", Kind: "node"}}}
	if err := o.buildImageRules(); err != nil {
		t.Fatal(err)
	}
	for image, want := range map[string]imageRun{
		"ghcr.io/acme/tool:v1": {kind: runtimeHost, python: "/usr/bin/python3", node: "/usr/bin/node"},
		"ghcr.io/other/tool":   {kind: runtimePlaceholder, python: "/usr/bin/python3", node: "/usr/bin/node", message: placeholderMessage("ghcr.io/other/tool")},
		"pypy:3":               {kind: runtimePython, python: sh, node: "/usr/bin/node"},
		"busybox":              {kind: runtimePlaceholder, python: "/usr/bin/python3", node: "/usr/bin/node", message: placeholderMessage("busybox")},
		"alpine":               {kind: runtimeHost, python: "/usr/bin/python3", node: "/usr/bin/node"},
		"registry.local:5000/tools/node-lts:20.1": {kind: runtimeNode, python: "/usr/bin/python3", node: "/usr/bin/node"},
		"ghcr.io/metalambda/engine:v1.2.3": {kind: runtimeHost, python: "/usr/bin/python3", node: "/usr/bin/node",
			entrypoint: []string{sh, "-c", `exec engine "$@"`, "engine"}},
	} {
		if diff := cmp.Diff(want, o.mapImage(image), cmp.AllowUnexported(imageRun{})); diff != "" {
			t.Errorf("%s (-want +got):\n%s", image, diff)
		}
	}
	// The entrypoint runs with the container's args; a command replaces it.
	engine := o.mapImage("ghcr.io/metalambda/engine:v1")
	for _, tc := range []struct {
		c    corev1.Container
		want []string
	}{
		{corev1.Container{Args: []string{"--workers=4"}}, []string{sh, "-c", `exec engine "$@"`, "engine", "--workers=4"}},
		{corev1.Container{}, []string{sh, "-c", `exec engine "$@"`, "engine"}},
		{corev1.Container{Command: []string{"true"}, Args: []string{"x"}}, []string{"true", "x"}},
	} {
		if diff := cmp.Diff(tc.want, argv(&tc.c, engine)); diff != "" {
			t.Errorf("entrypoint argv for %+v (-want +got):\n%s", tc.c, diff)
		}
	}

	bad := []struct{ name, text, want string }{
		{"unknown kind", "images:\n- image: ruby\n  kind: ruby\n", `rule 1: image "ruby": kind "ruby" is not one of python, node, host, placeholder`},
		{"unknown field", "images:\n- image: ruby\n  kind: host\n  command: ruby\n", `unknown field "command"`},
		{"tag", "images:\n- image: ruby:3\n  kind: host\n", `image "ruby:3" has a tag or digest`},
		{"bad glob", "images:\n- image: \"ruby[\"\n  kind: host\n", `image "ruby[" is not a valid glob`},
		{"empty image", "images:\n- kind: host\n", "rule 1: image is empty"},
		{"missing interpreter", "images:\n- image: pypy\n  kind: python\n  interpreter: /nonexistent/pypy3\n", `interpreter "/nonexistent/pypy3" is not an executable`},
		{"interpreter for host", "images:\n- image: x\n  kind: host\n  interpreter: sh\n", "interpreter is only for kinds python and node"},
		{"entrypoint for python", "images:\n- image: x\n  kind: python\n  entrypoint: [sh]\n", "entrypoint is only for kind host"},
		{"missing entrypoint", "images:\n- image: x\n  kind: host\n  entrypoint: [/nonexistent/engine]\n", `entrypoint "/nonexistent/engine" is not an executable`},
		{"no rules", "images: []\n", "no rules under `images:`"},
		{"not yaml", "images: [\n", "want `images:` with a list"},
	}
	for _, tc := range bad {
		t.Run(tc.name, func(t *testing.T) {
			o := Options{ImageMapFile: write(t, tc.text)}
			err := o.buildImageRules()
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Errorf("err = %v, want it to contain %q", err, tc.want)
			}
		})
	}
	o = Options{ImageMapFile: filepath.Join(t.TempDir(), "absent.yaml")}
	if err := o.buildImageRules(); err == nil || !strings.Contains(err.Error(), "absent.yaml") {
		t.Errorf("a missing file: err = %v", err)
	}
}

// TestContainerMountsRefuseRelativePaths, and paths that reach the sandbox's
// own directory; paths beside it are taken.
func TestContainerMountsRefuseRelativePaths(t *testing.T) {
	dirs := map[string]string{"v": "/state/v"}
	for _, m := range []corev1.VolumeMount{
		{Name: "v", MountPath: "data"},
		{Name: "v", MountPath: "."},
		{Name: "v", MountPath: "/data", SubPath: "../../etc"},
		{Name: "v", MountPath: "/data", SubPath: "/etc"},
		// The sandbox's own directory, inside it, and its parents.
		{Name: "v", MountPath: "/run"},
		{Name: "v", MountPath: "/run/"},
		{Name: "v", MountPath: "/run/metalambda"},
		{Name: "v", MountPath: "/run/metalambda/x"},
		{Name: "v", MountPath: "/"},
		{Name: "v", MountPath: "/run/../run"},
		// What the sandbox makes itself, after the binds: through /proc/1/root
		// a target reached bubblewrap's own root, and through /sbin (a link to
		// usr/sbin) a volume at /usr/sbin held a target no check saw inside it.
		{Name: "v", MountPath: "/proc/1/root/oldroot/etc"},
		{Name: "v", MountPath: "/proc"},
		{Name: "v", MountPath: "/sbin/a/pods"},
		{Name: "v", MountPath: "/bin"},
		{Name: "v", MountPath: "/lib64/x"},
		{Name: "v", MountPath: "/usr/local/app"},
		{Name: "v", MountPath: "/data", SubPathExpr: "$(POD)"},
	} {
		c := &corev1.Container{Name: "c", VolumeMounts: []corev1.VolumeMount{m}}
		_, err := containerMounts(c, dirs)
		var invalid *invalidSpecError
		if !errors.As(err, &invalid) {
			t.Errorf("mount %+v: err = %v, want an invalid spec", m, err)
		}
	}
	for _, p := range []string{"/run/other", "/run/metalambdax", "/var/run", "/data", "/usrx", "/procs", "/binx"} {
		c := &corev1.Container{Name: "c", VolumeMounts: []corev1.VolumeMount{{Name: "v", MountPath: p}}}
		if _, err := containerMounts(c, dirs); err != nil {
			t.Errorf("mountPath %s: %v", p, err)
		}
	}
}

func TestContainerEnv(t *testing.T) {
	optional := true
	c := &corev1.Container{
		EnvFrom: []corev1.EnvFromSource{{Prefix: "CM_", ConfigMapRef: &corev1.ConfigMapEnvSource{LocalObjectReference: corev1.LocalObjectReference{Name: "app"}}}},
		Env: []corev1.EnvVar{
			{Name: "PLAIN", Value: "v"},
			{Name: "REF", Value: "$(PLAIN)-$(NOPE)-$$(PLAIN)"},
			{Name: "IP", ValueFrom: &corev1.EnvVarSource{FieldRef: &corev1.ObjectFieldSelector{FieldPath: "status.podIP"}}},
			{Name: "NAME", ValueFrom: &corev1.EnvVarSource{FieldRef: &corev1.ObjectFieldSelector{FieldPath: "metadata.name"}}},
			{Name: "NS", ValueFrom: &corev1.EnvVarSource{FieldRef: &corev1.ObjectFieldSelector{FieldPath: "metadata.namespace"}}},
			{Name: "NODE", ValueFrom: &corev1.EnvVarSource{FieldRef: &corev1.ObjectFieldSelector{FieldPath: "spec.nodeName"}}},
			{Name: "LABEL", ValueFrom: &corev1.EnvVarSource{FieldRef: &corev1.ObjectFieldSelector{FieldPath: "metadata.labels['app']"}}},
			{Name: "GREETING", ValueFrom: &corev1.EnvVarSource{ConfigMapKeyRef: &corev1.ConfigMapKeySelector{LocalObjectReference: corev1.LocalObjectReference{Name: "app"}, Key: "greeting"}}},
			{Name: "PASSWORD", ValueFrom: &corev1.EnvVarSource{SecretKeyRef: &corev1.SecretKeySelector{LocalObjectReference: corev1.LocalObjectReference{Name: "creds"}, Key: "password"}}},
			{Name: "MISSING", ValueFrom: &corev1.EnvVarSource{SecretKeyRef: &corev1.SecretKeySelector{LocalObjectReference: corev1.LocalObjectReference{Name: "absent"}, Key: "k", Optional: &optional}}},
		},
	}
	got, err := containerEnv(context.Background(), refs, testPod(), c)
	if err != nil {
		t.Fatal(err)
	}
	want := []string{"PATH=" + basePath, "HOSTNAME=web", "HOME=/root", "CM_greeting=hi", "CM_main.py=print(1)",
		"PLAIN=v", "REF=v-$(NOPE)-$(PLAIN)", "IP=10.244.0.7", "NAME=web", "NS=ns", "NODE=local", "LABEL=web",
		"GREETING=hi", "PASSWORD=s3cret", "MISSING="}
	if diff := cmp.Diff(want, got, sortedPrefix(5)); diff != "" {
		t.Errorf("env (-want +got):\n%s", diff)
	}
	c.Env = []corev1.EnvVar{{Name: "X", ValueFrom: &corev1.EnvVarSource{ConfigMapKeyRef: &corev1.ConfigMapKeySelector{LocalObjectReference: corev1.LocalObjectReference{Name: "absent"}, Key: "k"}}}}
	c.EnvFrom = nil
	if _, err := containerEnv(context.Background(), refs, testPod(), c); !apierrors.IsNotFound(err) {
		t.Errorf("a missing required ConfigMap: err = %v, want not found", err)
	}
}

// sortedPrefix compares env lists with the envFrom part (map order) sorted.
func sortedPrefix(n int) cmp.Option {
	return cmp.Transformer("sortEnvFrom", func(in []string) []string {
		out := append([]string(nil), in...)
		if len(out) >= n {
			slices.Sort(out[3:n])
		}
		return out
	})
}

func TestMaterializeVolumes(t *testing.T) {
	dir := t.TempDir()
	mode := int32(0o400)
	pod := testPod()
	pod.Spec.Volumes = []corev1.Volume{
		{Name: "app", VolumeSource: corev1.VolumeSource{ConfigMap: &corev1.ConfigMapVolumeSource{LocalObjectReference: corev1.LocalObjectReference{Name: "app"}}}},
		{Name: "creds", VolumeSource: corev1.VolumeSource{Secret: &corev1.SecretVolumeSource{SecretName: "creds", DefaultMode: &mode,
			Items: []corev1.KeyToPath{{Key: "password", Path: "db/pass"}}}}},
		{Name: "scratch", VolumeSource: corev1.VolumeSource{EmptyDir: &corev1.EmptyDirVolumeSource{}}},
		{Name: "info", VolumeSource: corev1.VolumeSource{DownwardAPI: &corev1.DownwardAPIVolumeSource{Items: []corev1.DownwardAPIVolumeFile{
			{Path: "name", FieldRef: &corev1.ObjectFieldSelector{FieldPath: "metadata.name"}},
			{Path: "labels", FieldRef: &corev1.ObjectFieldSelector{FieldPath: "metadata.labels"}},
		}}}},
		{Name: "token", VolumeSource: corev1.VolumeSource{Projected: &corev1.ProjectedVolumeSource{Sources: []corev1.VolumeProjection{
			{ServiceAccountToken: &corev1.ServiceAccountTokenProjection{Path: "token"}},
		}}}},
	}
	owner := volumeOwner{uid: os.Getuid(), gid: os.Getgid()}
	dirs, err := materializeVolumes(context.Background(), refs, pod, dir, owner)
	if err != nil {
		t.Fatal(err)
	}
	files := map[string]string{}
	_ = filepath.WalkDir(dir, func(p string, d os.DirEntry, err error) error {
		if err == nil && !d.IsDir() {
			b, _ := os.ReadFile(p)
			rel, _ := filepath.Rel(dir, p)
			files[rel] = string(b)
		}
		return nil
	})
	want := map[string]string{
		"app/main.py": "print(1)", "app/greeting": "hi", "creds/db/pass": "s3cret",
		"info/name": "web", "info/labels": `app="web"`, "token/token": "tok",
	}
	if diff := cmp.Diff(want, files); diff != "" {
		t.Errorf("files (-want +got):\n%s", diff)
	}
	if info, err := os.Stat(filepath.Join(dir, "creds/db/pass")); err != nil || info.Mode().Perm() != 0o400 {
		t.Errorf("secret file mode: %v %v", info.Mode(), err)
	}
	if dirs["scratch"] != filepath.Join(dir, "scratch") {
		t.Errorf("emptyDir at %q", dirs["scratch"])
	}
	pod.Spec.Volumes = []corev1.Volume{{Name: "host", VolumeSource: corev1.VolumeSource{HostPath: &corev1.HostPathVolumeSource{Path: "/"}}}}
	if _, err := materializeVolumes(context.Background(), refs, pod, dir, owner); err == nil {
		t.Error("a hostPath volume was accepted")
	}
}

func TestBuildStatus(t *testing.T) {
	t0 := time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)
	t1 := t0.Add(time.Minute)
	running := corev1.ContainerState{Running: &corev1.ContainerStateRunning{StartedAt: metav1.NewTime(t0)}}
	crashed := corev1.ContainerState{Terminated: &corev1.ContainerStateTerminated{ExitCode: 3}}
	backoff := corev1.ContainerState{Waiting: &corev1.ContainerStateWaiting{Reason: "CrashLoopBackOff"}}
	creating := corev1.ContainerState{Waiting: &corev1.ContainerStateWaiting{Reason: "ContainerCreating"}}
	exited0 := corev1.ContainerState{Terminated: &corev1.ContainerStateTerminated{}}
	initializing := corev1.ContainerState{Waiting: &corev1.ContainerStateWaiting{Reason: "PodInitializing"}}
	never, onFailure := corev1.RestartPolicyNever, corev1.RestartPolicyOnFailure
	cases := []struct {
		name      string
		obs       podObs
		wantPhase corev1.PodPhase
		wantReady bool
	}{
		{"no sandbox", podObs{containers: []containerObs{{name: "c", state: creating}}}, corev1.PodPending, false},
		{"creating", podObs{sandboxReady: true, containers: []containerObs{{name: "c", state: creating}}}, corev1.PodPending, false},
		{"running, not ready", podObs{sandboxReady: true, containers: []containerObs{{name: "c", state: running}}}, corev1.PodRunning, false},
		{"running, ready", podObs{sandboxReady: true, containers: []containerObs{{name: "c", state: running, ready: true}}}, corev1.PodRunning, true},
		{"crash loop", podObs{sandboxReady: true, containers: []containerObs{{name: "c", state: backoff, last: crashed, restarts: 2}}}, corev1.PodRunning, false},
		{"failed, Never", podObs{sandboxReady: true, restartPolicy: never, containers: []containerObs{{name: "c", state: crashed}}}, corev1.PodFailed, false},
		{"failed, OnFailure: restarting", podObs{sandboxReady: true, restartPolicy: onFailure, containers: []containerObs{{name: "c", state: crashed}}}, corev1.PodRunning, false},
		{"failed, Always: restarting", podObs{sandboxReady: true, restartPolicy: corev1.RestartPolicyAlways, containers: []containerObs{{name: "c", state: crashed}}}, corev1.PodRunning, false},
		{"back-off, OnFailure", podObs{sandboxReady: true, restartPolicy: onFailure, containers: []containerObs{{name: "c", state: backoff, last: crashed, restarts: 1}}}, corev1.PodRunning, false},
		{"succeeded, OnFailure", podObs{sandboxReady: true, restartPolicy: onFailure, containers: []containerObs{{name: "c", state: exited0}}}, corev1.PodSucceeded, false},
		{"succeeded, Never", podObs{sandboxReady: true, restartPolicy: never, containers: []containerObs{{name: "c", state: exited0}, {name: "d", state: exited0}}}, corev1.PodSucceeded, false},
		{"exited 0, Always: restarting", podObs{sandboxReady: true, restartPolicy: corev1.RestartPolicyAlways, containers: []containerObs{{name: "c", state: exited0}}}, corev1.PodRunning, false},
		{"one done, one running, Never", podObs{sandboxReady: true, restartPolicy: never, containers: []containerObs{{name: "c", state: crashed}, {name: "d", state: running}}}, corev1.PodRunning, false},
		{"one failed, one succeeded, OnFailure", podObs{sandboxReady: true, restartPolicy: onFailure, containers: []containerObs{{name: "c", state: crashed}, {name: "d", state: exited0}}}, corev1.PodRunning, false},
		{"init running", podObs{sandboxReady: true, initializing: true, inits: []containerObs{{name: "i", state: running}},
			containers: []containerObs{{name: "c", state: initializing}}}, corev1.PodPending, false},
		{"init crash loop, Always", podObs{sandboxReady: true, initializing: true, restartPolicy: corev1.RestartPolicyAlways, inits: []containerObs{{name: "i", state: backoff, last: crashed, restarts: 1}},
			containers: []containerObs{{name: "c", state: initializing}}}, corev1.PodPending, false},
		{"init failed, Never", podObs{sandboxReady: true, initializing: true, restartPolicy: never, inits: []containerObs{{name: "i", state: crashed}},
			containers: []containerObs{{name: "c", state: initializing}}}, corev1.PodFailed, false},
		{"initialized, running", podObs{sandboxReady: true, inits: []containerObs{{name: "i", state: exited0}},
			containers: []containerObs{{name: "c", state: running, ready: true}}}, corev1.PodRunning, true},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			tc.obs.podIP, tc.obs.hostIP, tc.obs.startTime = "10.244.0.7", "10.244.0.1", t0
			old := corev1.PodStatus{QOSClass: corev1.PodQOSBestEffort, Conditions: []corev1.PodCondition{{Type: corev1.PodScheduled, Status: corev1.ConditionTrue}}}
			s := buildStatus(old, tc.obs, t0)
			if s.Phase != tc.wantPhase || s.PodIP != "10.244.0.7" || s.HostIP != "10.244.0.1" || s.QOSClass != corev1.PodQOSBestEffort || !s.StartTime.Time.Equal(t0) {
				t.Errorf("status %+v", s)
			}
			if got := condition(s, corev1.PodReady); got != tc.wantReady {
				t.Errorf("Ready = %v, want %v", got, tc.wantReady)
			}
			if condition(s, corev1.PodScheduled) != true {
				t.Error("PodScheduled was lost")
			}
			if got := condition(s, corev1.PodInitialized); got != (tc.obs.sandboxReady && !tc.obs.initializing) {
				t.Errorf("Initialized = %v with sandbox %v, initializing %v", got, tc.obs.sandboxReady, tc.obs.initializing)
			}
			if len(s.InitContainerStatuses) != len(tc.obs.inits) {
				t.Errorf("init container statuses %+v, want %d", s.InitContainerStatuses, len(tc.obs.inits))
			}
			again := buildStatus(s, tc.obs, t1)
			if diff := cmp.Diff(s, again); diff != "" {
				t.Errorf("an unchanged observation changed the status (-first +second):\n%s", diff)
			}
		})
	}
}

func condition(s corev1.PodStatus, t corev1.PodConditionType) bool {
	for _, c := range s.Conditions {
		if c.Type == t {
			return c.Status == corev1.ConditionTrue
		}
	}
	return false
}

func TestGatewayAndNodeStatus(t *testing.T) {
	gw, subnet := gateway("10.244.0.0/24")
	if gw.String() != "10.244.0.1" || subnet.String() != "10.244.0.0/24" {
		t.Errorf("gateway %s subnet %s", gw, subnet)
	}
	t0 := time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)
	s := nodeStatus(corev1.NodeStatus{}, nil, "10.244.0.1", "n", corev1.ConditionTrue, "KubeletReady", "", t0)
	s2 := nodeStatus(s, nil, "10.244.0.1", "n", corev1.ConditionTrue, "KubeletReady", "", t0.Add(time.Minute))
	c := s2.Conditions[0]
	if !c.LastTransitionTime.Time.Equal(t0) || !c.LastHeartbeatTime.Time.Equal(t0.Add(time.Minute)) {
		t.Errorf("Ready condition times: %+v", c)
	}
	if s2.Addresses[0] != (corev1.NodeAddress{Type: corev1.NodeInternalIP, Address: "10.244.0.1"}) {
		t.Errorf("addresses %v", s2.Addresses)
	}
}

func TestValidateNamesTheFix(t *testing.T) {
	o := Defaults()
	o.CNIBinDir, o.StateDir = t.TempDir(), t.TempDir()
	err := o.Check()
	if err == nil {
		t.Fatal("Validate accepted a CNI directory without plugins")
	}
	if os.Geteuid() == 0 && !strings.Contains(err.Error(), CNIInstallHint) {
		t.Errorf("error %q does not say how to install the plugins", err)
	}
}

// claimRefs serves a claim "data" bound to volume "pv-data" at dir, changed by mod.
func claimRefs(dir string, mod func(*corev1.PersistentVolumeClaim, *corev1.PersistentVolume)) fakeRefs {
	pvc := &corev1.PersistentVolumeClaim{
		ObjectMeta: metav1.ObjectMeta{Name: "data", Namespace: "ns", UID: "claim-uid"},
		Spec:       corev1.PersistentVolumeClaimSpec{VolumeName: "pv-data"},
		Status:     corev1.PersistentVolumeClaimStatus{Phase: corev1.ClaimBound},
	}
	pv := &corev1.PersistentVolume{
		ObjectMeta: metav1.ObjectMeta{Name: "pv-data"},
		Spec: corev1.PersistentVolumeSpec{
			ClaimRef:               &corev1.ObjectReference{Namespace: "ns", Name: "data", UID: "claim-uid"},
			PersistentVolumeSource: corev1.PersistentVolumeSource{Local: &corev1.LocalVolumeSource{Path: dir}},
		},
	}
	if mod != nil {
		mod(pvc, pv)
	}
	return fakeRefs{claims: map[string]*corev1.PersistentVolumeClaim{pvc.Name: pvc}, volumes: map[string]*corev1.PersistentVolume{pv.Name: pv}}
}

func TestClaimVolumes(t *testing.T) {
	dataDir := t.TempDir()
	claimVolume := []corev1.Volume{{Name: "data", VolumeSource: corev1.VolumeSource{
		PersistentVolumeClaim: &corev1.PersistentVolumeClaimVolumeSource{ClaimName: "data"}}}}
	block := corev1.PersistentVolumeBlock
	cases := []struct {
		name    string
		volumes []corev1.Volume
		mod     func(*corev1.PersistentVolumeClaim, *corev1.PersistentVolume)
		want    string // the error, or "" for dataDir
		waits   bool
	}{
		{name: "bound", volumes: claimVolume},
		{name: "missing", volumes: claimVolume, mod: func(c *corev1.PersistentVolumeClaim, _ *corev1.PersistentVolume) { c.Name = "other" },
			want: `persistentVolumeClaim "data" does not exist yet; the pod waits for it`, waits: true},
		{name: "pending", volumes: claimVolume, mod: func(c *corev1.PersistentVolumeClaim, _ *corev1.PersistentVolume) {
			c.Status.Phase, c.Spec.VolumeName = "", ""
		},
			want: `persistentVolumeClaim "data" is not bound yet (phase Pending)`, waits: true},
		{name: "deleting", volumes: claimVolume, mod: func(c *corev1.PersistentVolumeClaim, _ *corev1.PersistentVolume) {
			c.DeletionTimestamp = &metav1.Time{}
		},
			want: `persistentVolumeClaim "data" is being deleted`, waits: true},
		{name: "volume bound elsewhere", volumes: claimVolume, mod: func(_ *corev1.PersistentVolumeClaim, v *corev1.PersistentVolume) { v.Spec.ClaimRef.UID = "x" },
			want: "names volume pv-data, which is not bound to it yet", waits: true},
		{name: "block", volumes: claimVolume, mod: func(_ *corev1.PersistentVolumeClaim, v *corev1.PersistentVolume) { v.Spec.VolumeMode = &block },
			want: "volume pv-data is a block volume"},
		{name: "nfs", volumes: claimVolume, mod: func(_ *corev1.PersistentVolumeClaim, v *corev1.PersistentVolume) {
			v.Spec.PersistentVolumeSource = corev1.PersistentVolumeSource{NFS: &corev1.NFSVolumeSource{Server: "nfs", Path: "/"}}
		}, want: "volume pv-data is neither a local nor a hostPath volume"},
		{name: "path gone", volumes: claimVolume, mod: func(_ *corev1.PersistentVolumeClaim, v *corev1.PersistentVolume) {
			v.Spec.Local.Path = dataDir + "/gone"
		},
			want: "no such file or directory"},
		{name: "hostPath volume", volumes: claimVolume, mod: func(_ *corev1.PersistentVolumeClaim, v *corev1.PersistentVolume) {
			v.Spec.PersistentVolumeSource = corev1.PersistentVolumeSource{HostPath: &corev1.HostPathVolumeSource{Path: dataDir}}
		}},
		{name: "ephemeral", volumes: []corev1.Volume{{Name: "scratch", VolumeSource: corev1.VolumeSource{Ephemeral: &corev1.EphemeralVolumeSource{}}}},
			mod: func(c *corev1.PersistentVolumeClaim, _ *corev1.PersistentVolume) {
				c.Name = "web-scratch"
				c.OwnerReferences = []metav1.OwnerReference{{Kind: "Pod", Name: "web", UID: "u-1", Controller: ptr.To(true)}}
			}},
		{name: "ephemeral not the pod's", volumes: []corev1.Volume{{Name: "scratch", VolumeSource: corev1.VolumeSource{Ephemeral: &corev1.EphemeralVolumeSource{}}}},
			mod:  func(c *corev1.PersistentVolumeClaim, _ *corev1.PersistentVolume) { c.Name = "web-scratch" },
			want: `persistentVolumeClaim "web-scratch" was not created for this pod's ephemeral volume`},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			pod := testPod()
			pod.Spec.Volumes = c.volumes
			stateDir := t.TempDir()
			dirs, err := materializeVolumes(context.Background(), claimRefs(dataDir, c.mod), pod, stateDir, volumeOwner{uid: os.Getuid(), gid: os.Getgid()})
			var wait *claimWaitError
			if errors.As(err, &wait) != c.waits {
				t.Errorf("error %v: waiting %t, want %t", err, !c.waits, c.waits)
			}
			if c.want != "" {
				if err == nil || !strings.Contains(err.Error(), c.want) {
					t.Errorf("error %v, want one saying %q", err, c.want)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if got := dirs[c.volumes[0].Name]; got != dataDir {
				t.Errorf("volume at %q, want the volume's directory %s", got, dataDir)
			}
			if entries, _ := os.ReadDir(stateDir); len(entries) != 0 {
				t.Errorf("a claim volume made %v in the pod's directory", entries)
			}
		})
	}
}

func TestClaimMountsReadOnlyAndSubPath(t *testing.T) {
	dataDir := t.TempDir()
	pod := testPod()
	pod.Spec.Volumes = []corev1.Volume{{Name: "data", VolumeSource: corev1.VolumeSource{
		PersistentVolumeClaim: &corev1.PersistentVolumeClaimVolumeSource{ClaimName: "data", ReadOnly: true}}}}
	c := &corev1.Container{VolumeMounts: []corev1.VolumeMount{{Name: "data", MountPath: "/var/lib/db", SubPath: "pgdata"}}}
	dirs := map[string]string{"data": dataDir}
	mounts, err := containerMounts(c, dirs)
	if err != nil {
		t.Fatal(err)
	}
	if !readOnlyVolumes(pod)[mounts[0].volume] {
		t.Errorf("the readOnly claim %s is not listed read-only", mounts[0].volume)
	}
	f, err := openSubPath(dirs["data"], mounts[0].subPath, volumeOwner{uid: os.Getuid(), gid: os.Getgid()})
	if err != nil {
		t.Fatal(err)
	}
	f.Close()
	if info, err := os.Stat(filepath.Join(dataDir, "pgdata")); err != nil || !info.IsDir() {
		t.Errorf("the subPath directory was not made: %v", err)
	}
}

func TestOrderMounts(t *testing.T) {
	m := func(volume, source, target string) bindMount {
		return bindMount{volume: volume, source: source, target: target}
	}
	targets := func(ms []bindMount) []string {
		var out []string
		for _, x := range ms {
			out = append(out, x.target)
		}
		return out
	}
	// The state directory is under /tmp, and the pod mounts an emptyDir at /tmp: its
	// other mounts go first, while their sources are visible; parents still precede
	// children.
	got, err := orderMounts("c", []bindMount{
		m("tmp", "/tmp/state/pod/volumes/tmp", "/tmp"),
		m("token", "/tmp/state/pod/volumes/token", "/var/run/secrets/kubernetes.io/serviceaccount"),
		m("data", "/srv/data", "/data"),
		m("cache", "/srv/cache", "/tmp/cache"),
		m("", "/tmp/state/pod/resolv.conf", "/etc/resolv.conf"),
	})
	if err != nil {
		t.Fatal(err)
	}
	want := []string{"/data", "/etc/resolv.conf", "/var/run/secrets/kubernetes.io/serviceaccount", "/tmp", "/tmp/cache"}
	if diff := cmp.Diff(want, targets(got)); diff != "" {
		t.Errorf("order (-want +got):\n%s", diff)
	}
	// A source under a target that must also come first cannot be mounted.
	_, err = orderMounts("c", []bindMount{
		m("tmp", "/tmp/state/pod/volumes/tmp", "/tmp"),
		m("cache", "/tmp/state/pod/volumes/cache", "/tmp/cache"),
	})
	if err == nil || !strings.Contains(err.Error(), "container c: its mounts hide each other's sources: tmp at /tmp") {
		t.Errorf("cycle: err = %v", err)
	}
	var invalid *invalidSpecError
	if !errors.As(err, &invalid) {
		t.Errorf("cycle: %T is not an invalid spec", err)
	}
}

// TestValidateRefusesOptionsNotFromDefaults: a zero default is an error naming the
// option, not filled in.
func TestValidateRefusesOptionsNotFromDefaults(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("Validate refuses to run without root before it reads the options")
	}
	for _, field := range []string{"Name", "CNIBinDir", "ClusterDomain", "BackoffInitial", "HeartbeatInterval", "KubeletPort"} {
		o := Defaults()
		reflect.ValueOf(&o).Elem().FieldByName(field).SetZero()
		if err := o.Check(); err == nil || !strings.Contains(err.Error(), field) {
			t.Errorf("without %s: Check() = %v, want an error naming it", field, err)
		}
	}
}

// TestMountsRefuseSymlinksInVolumes: a container writes links into a volume
// it shares; a subPath through one would bind the host directory it points
// at, and a nested mount whose target passes through one would land where it
// points (another volume, or /run where the sandbox keeps its executables).
// Both are refused, naming the link; plain directories and nested mounts are
// taken.
func TestMountsRefuseSymlinksInVolumes(t *testing.T) {
	shared, other := t.TempDir(), t.TempDir()
	for _, d := range []string{"dir/sub", "plain"} {
		if err := os.MkdirAll(filepath.Join(shared, d), 0o755); err != nil {
			t.Fatal(err)
		}
	}
	for link, to := range map[string]string{"esc": "../../..", "dir/up": "/", "run": "../run"} {
		if err := os.Symlink(to, filepath.Join(shared, link)); err != nil {
			t.Fatal(err)
		}
	}
	dirs := map[string]string{"shared": shared, "other": other}
	for _, tt := range []struct {
		name   string
		mounts []corev1.VolumeMount
		link   string // the link the error names; "" when taken
	}{
		{"subPath through a link", []corev1.VolumeMount{{Name: "shared", MountPath: "/data", SubPath: "esc"}}, "esc"},
		{"subPath below a link", []corev1.VolumeMount{{Name: "shared", MountPath: "/data", SubPath: "dir/up/etc"}}, "dir/up"},
		{"nested target through a link", []corev1.VolumeMount{{Name: "shared", MountPath: "/data"}, {Name: "other", MountPath: "/data/run/x"}}, "run"},
		// Unclean, the outer target was not found to hold the inner one.
		{"nested target through a link, the outer mountPath unclean", []corev1.VolumeMount{{Name: "shared", MountPath: "/data/."}, {Name: "other", MountPath: "/data/run/x"}}, "run"},
		{"nested target through a link, both unclean", []corev1.VolumeMount{{Name: "shared", MountPath: "/data//"}, {Name: "other", MountPath: "/data/x/../run/x"}}, "run"},
		{"subPath of directories", []corev1.VolumeMount{{Name: "shared", MountPath: "/data", SubPath: "dir/sub"}}, ""},
		{"subPath not made yet", []corev1.VolumeMount{{Name: "shared", MountPath: "/data", SubPath: "plain/new"}}, ""},
		{"nested target in a directory", []corev1.VolumeMount{{Name: "shared", MountPath: "/data"}, {Name: "other", MountPath: "/data/plain/x"}}, ""},
	} {
		t.Run(tt.name, func(t *testing.T) {
			c := &corev1.Container{Name: "c", VolumeMounts: tt.mounts}
			mounts, err := containerMounts(c, dirs)
			if err != nil {
				t.Fatal(err)
			}
			err = checkNoSymlinks(c.Name, mounts, dirs)
			var invalid *invalidSpecError
			switch {
			case tt.link == "" && err != nil:
				t.Errorf("refused: %v", err)
			case tt.link != "" && (!errors.As(err, &invalid) || !strings.Contains(err.Error(), "symbolic link "+tt.link+" ")):
				t.Errorf("err = %v, want an invalid spec naming the link %s", err, tt.link)
			}
		})
	}
}

// TestOpenSubPath: a subPath is opened below its volume without following a
// link at any depth (a container may have put one there since the pod was
// set up), missing directories are made for the volume's owner, and a file
// is a subPath too.
func TestOpenSubPath(t *testing.T) {
	vol, outside := t.TempDir(), t.TempDir()
	for _, d := range []string{"a/b", "dir"} {
		if err := os.MkdirAll(filepath.Join(vol, d), 0o755); err != nil {
			t.Fatal(err)
		}
	}
	if err := os.WriteFile(filepath.Join(vol, "dir/file"), []byte("x"), 0o644); err != nil {
		t.Fatal(err)
	}
	for link, to := range map[string]string{"esc": outside, "a/up": "../..", "a/b/in": "../b"} {
		if err := os.Symlink(to, filepath.Join(vol, link)); err != nil {
			t.Fatal(err)
		}
	}
	owner := volumeOwner{uid: 4242, gid: 4343}
	if os.Geteuid() != 0 {
		owner = volumeOwner{uid: os.Getuid(), gid: os.Getgid()}
	}
	for _, tt := range []struct{ subPath, link string }{
		{"esc", "esc"}, {"esc/new", "esc"}, {"a/up/etc", "a/up"}, {"a/b/in", "a/b/in"}, {"a/b/in/new", "a/b/in"},
	} {
		f, err := openSubPath(vol, tt.subPath, owner)
		var invalid *invalidSpecError
		if !errors.As(err, &invalid) || !strings.Contains(err.Error(), "symbolic link "+tt.link+" ") {
			t.Errorf("subPath %s: %v, want an invalid spec naming the link %s", tt.subPath, err, tt.link)
		}
		if f != nil {
			f.Close()
		}
	}
	if entries, _ := os.ReadDir(outside); len(entries) != 0 {
		t.Errorf("something was made through the link: %v", entries)
	}
	for subPath, isDir := range map[string]bool{"a/b": true, "dir/file": false, "new/deeper": true, "./dir": true} {
		f, err := openSubPath(vol, subPath, owner)
		if err != nil {
			t.Errorf("subPath %s: %v", subPath, err)
			continue
		}
		var opened, want unix.Stat_t
		if err := unix.Fstat(int(f.Fd()), &opened); err != nil {
			t.Fatal(err)
		}
		f.Close()
		if err := unix.Lstat(filepath.Join(vol, subPath), &want); err != nil {
			t.Fatal(err)
		}
		if opened.Ino != want.Ino || (opened.Mode&unix.S_IFMT == unix.S_IFDIR) != isDir {
			t.Errorf("subPath %s: opened inode %d mode %o, want %d", subPath, opened.Ino, opened.Mode, want.Ino)
		}
	}
	for _, made := range []string{"new", "new/deeper"} {
		var st unix.Stat_t
		if err := unix.Lstat(filepath.Join(vol, made), &st); err != nil || int(st.Uid) != owner.uid || int(st.Gid) != owner.gid {
			t.Errorf("%s: owner %d:%d, %v; want %d:%d", made, st.Uid, st.Gid, err, owner.uid, owner.gid)
		}
	}
}

// TestCheckNesting: a mount inside a volume that may change while the
// sandbox is set up is refused, naming both: inside a claim (other pods may
// mount it), inside an emptyDir another container of the pod writes, inside
// the container's own writable emptyDir when an exec probe's sandbox is set
// up while it runs (also through a second, writable mount of it), and the
// node's /etc/resolv.conf inside such a volume. Inside volumes the node
// writes, inside an emptyDir nothing else writes, read-only elsewhere, and
// init containers (which run alone) are taken.
func TestCheckNesting(t *testing.T) {
	pod := testPod()
	pod.Spec.Volumes = []corev1.Volume{
		{Name: "work", VolumeSource: corev1.VolumeSource{EmptyDir: &corev1.EmptyDirVolumeSource{}}},
		{Name: "cfg", VolumeSource: corev1.VolumeSource{ConfigMap: &corev1.ConfigMapVolumeSource{}}},
		{Name: "claim", VolumeSource: corev1.VolumeSource{PersistentVolumeClaim: &corev1.PersistentVolumeClaimVolumeSource{ClaimName: "c"}}},
	}
	nested := []corev1.VolumeMount{{Name: "work", MountPath: "/work"}, {Name: "cfg", MountPath: "/work/cfg"}}
	side := func(readOnly bool) corev1.Container {
		return corev1.Container{Name: "side", VolumeMounts: []corev1.VolumeMount{{Name: "work", MountPath: "/w", ReadOnly: readOnly}}}
	}
	execProbe := &corev1.Probe{ProbeHandler: corev1.ProbeHandler{Exec: &corev1.ExecAction{Command: []string{"true"}}}}
	resolv := bindMount{source: "/node/resolv.conf", target: "/etc/resolv.conf", readOnly: true}
	for _, tt := range []struct {
		name      string
		c         corev1.Container
		alongside []corev1.Container
		want      string // in the error; "" when taken
	}{
		{"alone", corev1.Container{Name: "app", VolumeMounts: nested}, nil, ""},
		{"a sibling writes the outer volume", corev1.Container{Name: "app", VolumeMounts: nested}, []corev1.Container{side(false)}, "volumeMount cfg at /work/cfg lies inside the volume work mounted at /work, which container side can write"},
		{"a sibling reads it", corev1.Container{Name: "app", VolumeMounts: nested}, []corev1.Container{side(true)}, ""},
		{"init containers run alone", corev1.Container{Name: "app", VolumeMounts: nested}, nil, ""},
		{"exec probe", corev1.Container{Name: "app", VolumeMounts: nested, LivenessProbe: execProbe}, nil, "which the container can write while its exec probe"},
		{"exec probe, outer mount read-only", corev1.Container{Name: "app", ReadinessProbe: execProbe, VolumeMounts: []corev1.VolumeMount{
			{Name: "work", MountPath: "/work", ReadOnly: true}, {Name: "cfg", MountPath: "/work/cfg"}}}, nil, ""},
		{"exec probe, outer mount read-only but the volume writable elsewhere", corev1.Container{Name: "app", ReadinessProbe: execProbe, VolumeMounts: []corev1.VolumeMount{
			{Name: "work", MountPath: "/work", ReadOnly: true}, {Name: "work", MountPath: "/rw"}, {Name: "cfg", MountPath: "/work/cfg"}}}, nil, "exec probe"},
		{"inside a claim", corev1.Container{Name: "app", VolumeMounts: []corev1.VolumeMount{
			{Name: "claim", MountPath: "/data", ReadOnly: true}, {Name: "cfg", MountPath: "/data/cfg"}}}, nil, "which other pods may write too"},
		{"inside a configMap", corev1.Container{Name: "app", VolumeMounts: []corev1.VolumeMount{
			{Name: "cfg", MountPath: "/cfg"}, {Name: "work", MountPath: "/cfg/work"}}}, []corev1.Container{side(false)}, ""},
		{"beside, not inside", corev1.Container{Name: "app", VolumeMounts: []corev1.VolumeMount{
			{Name: "work", MountPath: "/work"}, {Name: "cfg", MountPath: "/workcfg"}}}, []corev1.Container{side(false)}, ""},
		{"the node's resolv.conf in a volume a sibling writes", corev1.Container{Name: "app", VolumeMounts: []corev1.VolumeMount{
			{Name: "work", MountPath: "/etc"}}}, []corev1.Container{side(false)}, "the node's /etc/resolv.conf at /etc/resolv.conf lies inside the volume work"},
	} {
		mounts, err := containerMounts(&tt.c, map[string]string{"work": "/v/work", "cfg": "/v/cfg", "claim": "/v/claim"})
		if err != nil {
			t.Fatal(err)
		}
		alongside := tt.alongside
		if alongside != nil {
			alongside = append(alongside, tt.c)
		}
		err = checkNesting(pod, &tt.c, append(mounts, resolv), alongside)
		var invalid *invalidSpecError
		switch {
		case tt.want == "" && err != nil:
			t.Errorf("%s: refused: %v", tt.name, err)
		case tt.want != "" && (!errors.As(err, &invalid) || !strings.Contains(err.Error(), tt.want)):
			t.Errorf("%s: %v, want an invalid spec saying %q", tt.name, err, tt.want)
		}
	}
}
