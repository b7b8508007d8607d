//go:build integration

package node

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/utils/ptr"

	"github.com/metalambda/metalambda/internal/kubetest"
)

// attackScript tries, from a pod, what a pod must not do on the local node. It
// reads its targets from the environment and prints one line per attack:
// "<attack>: refused (<why>)" or "<attack>: SUCCEEDED <what it got>".
const attackScript = `
import ctypes, os, signal, sys
libc = ctypes.CDLL(None, use_errno=True)
def report(name, f):
    try:
        got = f()
        print("%s: SUCCEEDED %r" % (name, str(got)[:80]), flush=True)
    except Exception as e:
        print("%s: refused (%s)" % (name, type(e).__name__), flush=True)
def read_tree(top):
    # Every file under top, read: any one read is a success.
    for d, _, files in os.walk(top, onerror=lambda e: (_ for _ in ()).throw(e)):
        for f in files:
            return open(os.path.join(d, f), "rb").read(32)
    raise FileNotFoundError(top)
def write(path):
    open(path, "w").write("written by a pod")
    return path
def become_root():
    for f in (lambda: os.setuid(0), lambda: os.setresuid(0, 0, 0), lambda: os.setgid(0)):
        try:
            f()
        except OSError:
            pass
    if os.geteuid() != 0:
        raise PermissionError("uid %d" % os.geteuid())
    return "euid 0"
def caps():
    status = dict(l.split(":\t") for l in open("/proc/self/status").read().splitlines() if ":\t" in l)
    held = {k: status[k].strip() for k in ("CapEff", "CapPrm", "CapBnd", "CapAmb")}
    if any(int(v, 16) for v in held.values()):
        return held
    raise PermissionError(held)
def signal_host(pid):
    os.kill(pid, signal.SIGKILL)
    return "killed %d" % pid
def ptrace_host(pid):
    if libc.ptrace(16, pid, 0, 0) != 0:  # PTRACE_ATTACH
        raise OSError(ctypes.get_errno(), os.strerror(ctypes.get_errno()))
    return "attached to %d" % pid
def sysctl():
    open("/proc/sys/kernel/ctrl-alt-del", "w").write("0")
    return "wrote a kernel setting"
def mount():
    if libc.mount(b"none", b"/tmp", b"tmpfs", 0, None) != 0:
        raise OSError(ctypes.get_errno(), os.strerror(ctypes.get_errno()))
    return "mounted"
def mknod():
    os.mknod("/scratch/disk", 0o600 | 0o60000, os.makedev(8, 0))
    return "made a block device"
host_pid = int(os.environ["HOST_PID"])
report("read the platform's data directory", lambda: read_tree(os.environ["DATA_DIR"]))
report("read the node's state directory", lambda: read_tree(os.environ["STATE_DIR"]))
report("read the control plane's data directory", lambda: read_tree(os.environ["CLUSTER_DIR"]))
report("read a kubeconfig", lambda: open(os.environ["KUBECONFIG_FILE"]).read(32))
report("read another pod's emptyDir", lambda: read_tree(os.environ["VICTIM_EMPTYDIR"]))
report("read another pod's secret volume", lambda: read_tree(os.environ["VICTIM_SECRET"]))
report("read /etc/shadow", lambda: open("/etc/shadow").read(32))
report("read root's home", lambda: os.listdir("/root/.ssh") or os.listdir("/root"))
report("write the host's root", lambda: write("/" + os.environ["MARKER"]))
report("write the host's /etc", lambda: write("/etc/" + os.environ["MARKER"]))
report("write the host's /usr", lambda: write("/usr/" + os.environ["MARKER"]))
report("write the host's temporary directory", lambda: write(os.environ["HOST_TMP"] + "/" + os.environ["MARKER"]))
report("become root", become_root)
report("hold capabilities", caps)
report("signal a host process", lambda: signal_host(host_pid))
report("trace a host process", lambda: ptrace_host(host_pid))
report("read a host process's environment", lambda: open("/proc/%d/environ" % host_pid).read(32))
report("write a kernel setting", sysctl)
report("mount a file system", mount)
report("make a device node", mknod)
`

// attacks are the lines attackScript prints, by attack, each of which must say
// "refused".
var attacks = []string{
	"read the platform's data directory", "read the node's state directory", "read the control plane's data directory",
	"read a kubeconfig", "read another pod's emptyDir", "read another pod's secret volume", "read /etc/shadow",
	"read root's home", "write the host's root", "write the host's /etc", "write the host's /usr",
	"write the host's temporary directory", "become root", "hold capabilities", "signal a host process",
	"trace a host process", "read a host process's environment", "write a kernel setting", "mount a file system",
	"make a device node",
}

// TestPodContainment runs a node whose state directory sits in a platform's
// data directory, as `metalambda up` places it, a victim pod with an emptyDir
// and a secret volume, and attacker pods that try to reach the platform's
// secrets, the control plane's, the victim's volumes, the host's files and
// processes, and root: as their namespace's user (the victim's too), as a user
// they name, and as root (runAsUser 0). Every attack must fail, and none may
// leave a trace on the host. A pod that asks runAsNonRoot with runAsUser 0 does
// not start.
func TestPodContainment(t *testing.T) {
	kube, err := kubernetes.NewForConfig(nodeConfig())
	if err != nil {
		t.Fatal(err)
	}
	dataDir := t.TempDir()
	if err := os.WriteFile(filepath.Join(dataDir, "hook-token"), []byte("platform secret"), 0o600); err != nil {
		t.Fatal(err)
	}
	opts := Defaults()
	opts.Name, opts.PodCIDR, opts.Bridge, opts.StateDir = "local-sec", "10.244.231.0/24", "mlsec0", filepath.Join(dataDir, "node")
	n := runNode(t, kube, opts, func() {
		// The scheduler would bind other tests' pods to the stopped node: the
		// control plane runs no node lifecycle controller to taint it.
		if err := env.Kube.CoreV1().Nodes().Delete(context.Background(), "local-sec", metav1.DeleteOptions{}); err != nil {
			t.Errorf("deleting the node: %v", err)
		}
	})
	kubetest.Eventually(t, 30*time.Second, "the node runs pods", func(context.Context) (bool, error) { return n.Ready(), nil })

	ns := env.Namespace(t)
	victim := startVictim(t, ns, n)
	host := exec.Command("sleep", "600")
	if err := host.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = host.Process.Kill(); _ = host.Wait() })
	hostTmp := t.TempDir()
	if err := os.Chmod(hostTmp, 0o777); err != nil {
		t.Fatal(err)
	}
	marker := "ml-attack-" + strconv.Itoa(os.Getpid())
	environ := map[string]string{
		"HOST_PID": strconv.Itoa(host.Process.Pid), "DATA_DIR": dataDir, "STATE_DIR": n.opts.StateDir,
		"CLUSTER_DIR": env.Cluster.DataDir, "KUBECONFIG_FILE": env.Cluster.KubeconfigPath,
		"VICTIM_EMPTYDIR": victim["scratch"], "VICTIM_SECRET": victim["creds"], "MARKER": marker, "HOST_TMP": hostTmp,
	}
	for _, c := range []struct {
		name string
		sc   *corev1.PodSecurityContext
		// allowed is what the pod asked for, and so may do.
		allowed string
	}{
		{"attacker", nil, ""},
		{"attacker-1000", &corev1.PodSecurityContext{RunAsUser: ptr.To(int64(1000)), RunAsGroup: ptr.To(int64(1000)), FSGroup: ptr.To(int64(1000))}, ""},
		// Root by its own request, with no capability.
		{"attacker-root", &corev1.PodSecurityContext{RunAsUser: ptr.To(int64(0))}, "become root"},
	} {
		t.Run(c.name, func(t *testing.T) {
			runAttacker(t, ns, c.name, c.sc, environ, c.allowed)
			for _, p := range []string{"/" + marker, "/etc/" + marker, "/usr/" + marker, filepath.Join(hostTmp, marker)} {
				if _, err := os.Stat(p); err == nil {
					os.Remove(p)
					t.Errorf("the pod wrote %s on the host", p)
				}
			}
			if err := host.Process.Signal(syscall.Signal(0)); err != nil {
				t.Errorf("the host process died: %v", err)
			}
		})
	}
	t.Run("RunAsNonRootRefusesRoot", func(t *testing.T) { testRunAsNonRootRefusesRoot(t, ns) })
}

// startVictim runs a pod that keeps a secret in its emptyDir and has a secret
// volume, and returns the host directories of both.
func startVictim(t *testing.T, ns string, n *Node) map[string]string {
	ctx := kubetest.Context(t)
	secret := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: "creds"}, StringData: map[string]string{"password": "victim's password"}}
	if _, err := env.Kube.CoreV1().Secrets(ns).Create(ctx, secret, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	createPod(t, ns, &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: "victim"},
		Spec: corev1.PodSpec{
			NodeName: "local-sec",
			Containers: []corev1.Container{{
				Name: "c", Image: "busybox", Command: []string{"sh", "-c", "echo victim data > /scratch/data; exec sleep 3600"},
				VolumeMounts: []corev1.VolumeMount{{Name: "scratch", MountPath: "/scratch"}, {Name: "creds", MountPath: "/creds"}},
			}},
			Volumes: []corev1.Volume{
				{Name: "scratch", VolumeSource: corev1.VolumeSource{EmptyDir: &corev1.EmptyDirVolumeSource{}}},
				{Name: "creds", VolumeSource: corev1.VolumeSource{Secret: &corev1.SecretVolumeSource{SecretName: "creds"}}},
			},
		},
	})
	pod := waitPod(t, ns, "victim", "the victim runs", func(p *corev1.Pod) error {
		if p.Status.Phase != corev1.PodRunning {
			return fmt.Errorf("phase %s", p.Status.Phase)
		}
		return nil
	})
	w := workerOf(n, pod)
	if w == nil {
		t.Fatal("no worker for the victim")
	}
	w.mu.Lock()
	defer w.mu.Unlock()
	return map[string]string{"scratch": w.volumeDirs["scratch"], "creds": w.volumeDirs["creds"]}
}

// runAttacker runs attackScript in a pod with securityContext sc and checks that
// every attack but allowed was refused.
func runAttacker(t *testing.T, ns, name string, sc *corev1.PodSecurityContext, environ map[string]string, allowed string) {
	var envVars []corev1.EnvVar
	for k, v := range environ {
		envVars = append(envVars, corev1.EnvVar{Name: k, Value: v})
	}
	createPod(t, ns, &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: name},
		Spec: corev1.PodSpec{
			NodeName: "local-sec", RestartPolicy: corev1.RestartPolicyNever, SecurityContext: sc,
			Containers: []corev1.Container{{
				Name: "c", Image: "python:3.11", Command: []string{"python3", "-c", attackScript}, Env: envVars,
				VolumeMounts: []corev1.VolumeMount{{Name: "scratch", MountPath: "/scratch"}},
			}},
			Volumes: []corev1.Volume{{Name: "scratch", VolumeSource: corev1.VolumeSource{EmptyDir: &corev1.EmptyDirVolumeSource{}}}},
		},
	})
	waitPod(t, ns, name, "the attacker finishes", func(p *corev1.Pod) error {
		if p.Status.Phase != corev1.PodSucceeded && p.Status.Phase != corev1.PodFailed {
			return fmt.Errorf("phase %s statuses %+v", p.Status.Phase, p.Status.ContainerStatuses)
		}
		return nil
	})
	logs := podLogs(t, ns, name, "c")
	for _, a := range attacks {
		line := ""
		for l := range strings.Lines(logs) {
			if strings.HasPrefix(l, a+": ") {
				line = strings.TrimSpace(l)
			}
		}
		switch {
		case line == "":
			t.Errorf("%s: no report; the pod's log:\n%s", a, logs)
		case a == allowed:
		case !strings.HasPrefix(line, a+": refused"):
			t.Errorf("%s", line)
		}
	}
}

// testRunAsNonRootRefusesRoot: a container that asks runAsNonRoot and runAsUser
// 0 waits with CreateContainerConfigError, as a kubelet's does, and never runs.
func testRunAsNonRootRefusesRoot(t *testing.T, ns string) {
	createPod(t, ns, &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: "nonroot-root"},
		Spec: corev1.PodSpec{
			NodeName:        "local-sec",
			SecurityContext: &corev1.PodSecurityContext{RunAsNonRoot: ptr.To(true)},
			Containers: []corev1.Container{{Name: "c", Image: "busybox", Command: []string{"sleep", "3600"},
				SecurityContext: &corev1.SecurityContext{RunAsUser: ptr.To(int64(0))}}},
		},
	})
	want := "container c: runAsNonRoot is set and runAsUser is 0: the container would run as root"
	waitPod(t, ns, "nonroot-root", "the pod waits with CreateContainerConfigError", func(p *corev1.Pod) error {
		if len(p.Status.ContainerStatuses) != 1 {
			return fmt.Errorf("statuses %+v", p.Status.ContainerStatuses)
		}
		w := p.Status.ContainerStatuses[0].State.Waiting
		if p.Status.Phase != corev1.PodPending || w == nil || w.Reason != "CreateContainerConfigError" || w.Message != want {
			return fmt.Errorf("phase %s state %+v", p.Status.Phase, p.Status.ContainerStatuses[0].State)
		}
		return nil
	})
}
