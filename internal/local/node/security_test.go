package node

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"

	"github.com/google/go-cmp/cmp"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	"k8s.io/utils/ptr"

	"github.com/metalambda/metalambda/internal/gateway/sandbox"
)

// podWith is a pod of one container "c" with the securityContexts given.
func podWith(psc *corev1.PodSecurityContext, csc *corev1.SecurityContext) *corev1.Pod {
	pod := testPod()
	pod.Spec.SecurityContext = psc
	pod.Spec.Containers = []corev1.Container{{Name: "c", SecurityContext: csc}}
	return pod
}

func TestContainerIdentity(t *testing.T) {
	const own = podUIDBase + 7
	tests := []struct {
		name    string
		psc     *corev1.PodSecurityContext
		csc     *corev1.SecurityContext
		want    identity
		wantErr string
	}{
		{name: "nothing asked: the namespace's user and group",
			want: identity{user: sandbox.User{UID: own, GID: own, Groups: []int{own}}}},
		{name: "the pod's runAsUser, runAsGroup, fsGroup and supplementalGroups",
			psc:  &corev1.PodSecurityContext{RunAsUser: ptr.To(int64(1000)), RunAsGroup: ptr.To(int64(3000)), FSGroup: ptr.To(int64(2000)), SupplementalGroups: []int64{4000, 2000}},
			want: identity{user: sandbox.User{UID: 1000, GID: 3000, Groups: []int{2000, 4000}}}},
		{name: "the container's fields win over the pod's",
			psc:  &corev1.PodSecurityContext{RunAsUser: ptr.To(int64(1000)), RunAsGroup: ptr.To(int64(3000))},
			csc:  &corev1.SecurityContext{RunAsUser: ptr.To(int64(1001)), RunAsGroup: ptr.To(int64(3001))},
			want: identity{user: sandbox.User{UID: 1001, GID: 3001, Groups: []int{own}}}},
		{name: "runAsUser without runAsGroup: the namespace's group",
			csc:  &corev1.SecurityContext{RunAsUser: ptr.To(int64(1000))},
			want: identity{user: sandbox.User{UID: 1000, GID: own, Groups: []int{own}}}},
		{name: "root asked for: root's group, no capability",
			psc:  &corev1.PodSecurityContext{RunAsUser: ptr.To(int64(0))},
			want: identity{user: sandbox.User{UID: 0, GID: 0, Groups: []int{own}}}},
		{name: "runAsNonRoot with the default user runs",
			psc:  &corev1.PodSecurityContext{RunAsNonRoot: ptr.To(true)},
			want: identity{user: sandbox.User{UID: own, GID: own, Groups: []int{own}}}},
		{name: "runAsNonRoot with runAsUser 0 is refused",
			psc:     &corev1.PodSecurityContext{RunAsNonRoot: ptr.To(true)},
			csc:     &corev1.SecurityContext{RunAsUser: ptr.To(int64(0))},
			wantErr: "container c: runAsNonRoot is set and runAsUser is 0: the container would run as root"},
		{name: "the container's runAsNonRoot false lifts the pod's",
			psc:  &corev1.PodSecurityContext{RunAsNonRoot: ptr.To(true), RunAsUser: ptr.To(int64(0))},
			csc:  &corev1.SecurityContext{RunAsNonRoot: ptr.To(false)},
			want: identity{user: sandbox.User{UID: 0, GID: 0, Groups: []int{own}}}},
		{name: "privileged is refused",
			csc:     &corev1.SecurityContext{Privileged: ptr.To(true)},
			wantErr: "container c: privileged containers are not run by the local node"},
		{name: "capabilities added are kept, but those dropped",
			csc: &corev1.SecurityContext{Capabilities: &corev1.Capabilities{
				Add: []corev1.Capability{"NET_BIND_SERVICE", "CAP_CHOWN", "kill"}, Drop: []corev1.Capability{"KILL"}}},
			want: identity{user: sandbox.User{UID: own, GID: own, Groups: []int{own}}, caps: []string{"CAP_NET_BIND_SERVICE", "CAP_CHOWN"}}},
		{name: "drop ALL keeps those added, as a container runtime",
			csc:  &corev1.SecurityContext{Capabilities: &corev1.Capabilities{Add: []corev1.Capability{"NET_RAW"}, Drop: []corev1.Capability{"ALL"}}},
			want: identity{user: sandbox.User{UID: own, GID: own, Groups: []int{own}}, caps: []string{"CAP_NET_RAW"}}},
		{name: "drop ALL alone keeps none",
			csc:  &corev1.SecurityContext{Capabilities: &corev1.Capabilities{Drop: []corev1.Capability{"ALL"}}},
			want: identity{user: sandbox.User{UID: own, GID: own, Groups: []int{own}}}},
		{name: "allowPrivilegeEscalation false keeps those added (no_new_privs)",
			csc: &corev1.SecurityContext{AllowPrivilegeEscalation: ptr.To(false),
				Capabilities: &corev1.Capabilities{Add: []corev1.Capability{"NET_BIND_SERVICE"}}},
			want: identity{user: sandbox.User{UID: own, GID: own, Groups: []int{own}}, caps: []string{"CAP_NET_BIND_SERVICE"}}},
		{name: "the chart's gateway: root with SETUID, SETGID and KILL",
			psc: &corev1.PodSecurityContext{RunAsUser: ptr.To[int64](0), RunAsGroup: ptr.To[int64](65532), FSGroup: ptr.To[int64](65532)},
			csc: &corev1.SecurityContext{AllowPrivilegeEscalation: ptr.To(false), Capabilities: &corev1.Capabilities{
				Drop: []corev1.Capability{"ALL"}, Add: []corev1.Capability{"SETUID", "SETGID", "KILL"}}},
			want: identity{user: sandbox.User{UID: 0, GID: 65532, Groups: []int{65532}}, caps: []string{"CAP_SETUID", "CAP_SETGID", "CAP_KILL"}}},
		{name: "a capability that acts on the host is refused",
			csc:     &corev1.SecurityContext{Capabilities: &corev1.Capabilities{Add: []corev1.Capability{"SYS_ADMIN"}}},
			wantErr: "container c: capability SYS_ADMIN is not granted by the local node"},
		{name: "CAP_MKNOD is refused: no device cgroup",
			csc:     &corev1.SecurityContext{Capabilities: &corev1.Capabilities{Add: []corev1.Capability{"MKNOD"}}},
			wantErr: "capability MKNOD is not granted"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			pod := podWith(tt.psc, tt.csc)
			got, err := containerIdentity(pod, &pod.Spec.Containers[0], own)
			if tt.wantErr != "" {
				var invalid *invalidSpecError
				if !errors.As(err, &invalid) || !strings.Contains(err.Error(), tt.wantErr) {
					t.Fatalf("err = %v, want an invalid spec saying %q", err, tt.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if diff := cmp.Diff(tt.want, got, cmp.AllowUnexported(identity{})); diff != "" {
				t.Errorf("identity (-want +got):\n%s", diff)
			}
		})
	}
}

func TestPodVolumeOwner(t *testing.T) {
	const own = podUIDBase + 7
	id := func(uid int) identity { return identity{user: sandbox.User{UID: uid}} }
	tests := []struct {
		name string
		psc  *corev1.PodSecurityContext
		ids  []identity
		want volumeOwner
	}{
		{"one user for every container", nil, []identity{id(1000), id(1000)}, volumeOwner{uid: 1000, gid: own}},
		{"containers of different users: the namespace's", nil, []identity{id(0), id(1000)}, volumeOwner{uid: own, gid: own}},
		{"fsGroup owns them, readable by the group", &corev1.PodSecurityContext{FSGroup: ptr.To(int64(2000))}, []identity{id(own)},
			volumeOwner{uid: own, gid: 2000, groupRead: true}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := podVolumeOwner(podWith(tt.psc, nil), tt.ids, own); got != tt.want {
				t.Errorf("got %+v, want %+v", got, tt.want)
			}
		})
	}
}

func TestContainerLimits(t *testing.T) {
	tests := []struct {
		name           string
		limits         corev1.ResourceList
		memory, cpuMil int64
	}{
		{"no limits: none", nil, -1, -1},
		{"memory and cpu", corev1.ResourceList{corev1.ResourceMemory: resource.MustParse("128Mi"), corev1.ResourceCPU: resource.MustParse("250m")}, 128 << 20, 250},
		{"whole cores", corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("2")}, -1, 2000},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			l := containerLimits(corev1.ResourceRequirements{Limits: tt.limits}, 4096)
			want := sandbox.Limits{Memory: tt.memory, CPU: tt.cpuMil, AddressSpace: -1, FileSize: -1,
				Processes: containerProcesses, OpenFiles: 4096, TmpSize: containerTmpSize}
			if l != want {
				t.Errorf("got %+v, want %+v", l, want)
			}
		})
	}
}

// TestContainerSpec: the sandbox of a container sees its mounts at their
// targets, read-only where they say, runs in the pod's network namespace from
// its workingDir, and sees no host path but the system directories and those of
// its runtime.
func TestContainerSpec(t *testing.T) {
	c := &corev1.Container{WorkingDir: "/srv/app", Resources: corev1.ResourceRequirements{
		Limits: corev1.ResourceList{corev1.ResourceMemory: resource.MustParse("64Mi")}}}
	id := identity{user: sandbox.User{UID: 1000, GID: 1000, Groups: []int{1000}}, caps: []string{"CAP_NET_BIND_SERVICE"}}
	mounts := []bindMount{{source: "/state/pods/u/volumes/app", target: "/srv/app", readOnly: true}, {source: "/state/pods/u/volumes/scratch", target: "/scratch"}}
	runtime := t.TempDir()
	long := strings.Repeat("a", 70)
	run := containerRun{id: id, hostPaths: []string{"/usr/bin/python3", runtime, filepath.Join(runtime, "bin")}, mounts: mounts,
		netns: "/run/netns/ml-1", hostname: long, openFiles: 1024}
	got := containerSpec(c, run, []string{"A=1"}, []string{"python3", "main.py"})
	user := id.user
	want := sandbox.Spec{
		Args: []string{"python3", "main.py"}, Env: []string{"A=1"}, ReadOnly: []string{runtime},
		Binds: []sandbox.Bind{{Source: "/state/pods/u/volumes/app", Target: "/srv/app"}, {Source: "/state/pods/u/volumes/scratch", Target: "/scratch", Writable: true}},
		User:  &user, Capabilities: []string{"CAP_NET_BIND_SERVICE"}, Dir: "/srv/app", NetNS: "/run/netns/ml-1", Hostname: strings.Repeat("a", 63),
		Limits: sandbox.Limits{Memory: 64 << 20, CPU: -1, AddressSpace: -1, FileSize: -1, Processes: containerProcesses, OpenFiles: 1024, TmpSize: containerTmpSize},
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("spec (-want +got):\n%s", diff)
	}
	if got := containerSpec(&corev1.Container{}, run, nil, nil); got.Dir != "/" {
		t.Errorf("without workingDir: Dir %q, want /", got.Dir)
	}
}

// TestVolumeOwnership: the node's volumes belong to the pod's owner; an
// emptyDir is writable by its group, takes it for new files, and every user
// may traverse it.
func TestVolumeOwnership(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("handing files to another user needs root")
	}
	dir := t.TempDir()
	pod := testPod()
	pod.Spec.Volumes = []corev1.Volume{
		{Name: "scratch", VolumeSource: corev1.VolumeSource{EmptyDir: &corev1.EmptyDirVolumeSource{}}},
		{Name: "token", VolumeSource: corev1.VolumeSource{Projected: &corev1.ProjectedVolumeSource{Sources: []corev1.VolumeProjection{
			{ServiceAccountToken: &corev1.ServiceAccountTokenProjection{Path: "token"}}}}}},
	}
	owner := volumeOwner{uid: 4242, gid: 4343, groupRead: true}
	dirs, err := materializeVolumes(t.Context(), refs, pod, dir, owner)
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		path string
		mode os.FileMode
	}{
		{dirs["scratch"], os.ModeDir | os.ModeSetgid | 0o771},
		{filepath.Join(dirs["token"], "token"), 0o640},
	} {
		info, err := os.Stat(c.path)
		if err != nil {
			t.Fatal(err)
		}
		st := info.Sys().(*syscall.Stat_t)
		if st.Uid != 4242 || st.Gid != 4343 || info.Mode() != c.mode {
			t.Errorf("%s: %d:%d %v, want 4242:4343 %v", c.path, st.Uid, st.Gid, info.Mode(), c.mode)
		}
	}
	if got := readOnlyVolumes(pod); !got["token"] || got["scratch"] {
		t.Errorf("read-only volumes %v, want the projected one alone", got)
	}
}

// TestOwnSkipsLinkedFiles: a file of a volume with other hard links (linked
// in by a container from elsewhere on the filesystem before the node
// restarted) keeps its owner and mode when the node hands the volume to the
// pod's user; the volume's own files are handed over.
func TestOwnSkipsLinkedFiles(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("handing files to another user needs root")
	}
	base := t.TempDir()
	vol, elsewhere := filepath.Join(base, "vol"), filepath.Join(base, "root-only")
	if err := os.Mkdir(vol, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(elsewhere, []byte("x"), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.Link(elsewhere, filepath.Join(vol, "linked")); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(vol, "own"), []byte("y"), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := (volumeOwner{uid: 4242, gid: 4343}).own(vol, true); err != nil {
		t.Fatal(err)
	}
	for file, want := range map[string]uint32{elsewhere: 0, filepath.Join(vol, "own"): 4242} {
		info, err := os.Stat(file)
		if err != nil {
			t.Fatal(err)
		}
		if st := info.Sys().(*syscall.Stat_t); st.Uid != want {
			t.Errorf("%s: owner %d, want %d", file, st.Uid, want)
		}
	}
	if info, _ := os.Stat(elsewhere); info.Mode().Perm() != 0o600 {
		t.Errorf("the linked file's mode changed to %v", info.Mode())
	}
}

// A namespace's pods share its user; namespaces whose names hash alike get users
// of their own while their pods run.
func TestNamespaceUID(t *testing.T) {
	users := map[int64]string{}
	a := namespaceUID("a", users)
	if a < podUIDBase || a >= podUIDBase+podUIDSpan {
		t.Fatalf("user %d outside the range", a)
	}
	users[a] = "a"
	if got := namespaceUID("a", users); got != a {
		t.Errorf("a second pod of namespace a: user %d, want %d", got, a)
	}
	users = map[int64]string{a: "b"} // b holds a's first choice
	if got := namespaceUID("a", users); got == a {
		t.Errorf("namespace a got user %d, which namespace b holds", got)
	}
}
