package node

import (
	"cmp"
	"hash/fnv"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"syscall"

	corev1 "k8s.io/api/core/v1"

	"github.com/metalambda/metalambda/internal/gateway/sandbox"
)

// Namespaces' users: a container that names no runAsUser runs as the user of its
// pod's namespace, taken from this range (beside the gateway's, which starts at
// 2^30), with the group of the same number. A namespace's pods share it, as a
// workload's replicas share their image's user on a cluster, so that a pod that
// replaces another can write what it left in a claim; pods stay apart by their
// mount and PID namespaces, not by their users.
const (
	podUIDBase = 1<<30 + 1<<20
	podUIDSpan = 1 << 20
)

// namespaceUID is the user of the pods of namespace: the one a running pod of
// namespace holds (users), else the first of the range the name hashes to that no
// running pod of another namespace holds.
func namespaceUID(namespace string, users map[int64]string) int64 {
	for u, ns := range users {
		if ns == namespace {
			return u
		}
	}
	h := fnv.New32a()
	_, _ = h.Write([]byte(namespace))
	for i := uint32(0); ; i++ {
		u := int64(podUIDBase + (h.Sum32()+i)%podUIDSpan)
		if _, taken := users[u]; !taken {
			return u
		}
	}
}

// grantableCapabilities are the capabilities securityContext.capabilities.add
// may give a container: a container runtime's defaults but CAP_MKNOD (the
// local node has no device cgroup, so a device node made in a volume would
// open the host's device). Any other is refused: the rest act on the host
// (CAP_SYS_ADMIN, CAP_SYS_MODULE, CAP_SYS_PTRACE, ...) or on the other pods of
// the bridge (CAP_NET_ADMIN).
var grantableCapabilities = []string{
	"AUDIT_WRITE", "CHOWN", "DAC_OVERRIDE", "FOWNER", "FSETID", "KILL", "NET_BIND_SERVICE",
	"NET_RAW", "SETFCAP", "SETGID", "SETPCAP", "SETUID", "SYS_CHROOT",
}

// identity is who a container runs as, from its pod's securityContext and its
// own, with the namespace's user (own) where they name none.
type identity struct {
	user sandbox.User
	caps []string
}

// containerIdentity maps the securityContext of a pod and of its container c to
// the user, groups and capabilities c runs with, as a kubelet does: the
// container's fields win over the pod's. Without runAsUser it is own, the
// namespace's user; without runAsGroup, own's group (root's, 0, for runAsUser 0). Its
// supplementary groups are the pod's volume group (fsGroup, or own's group) and
// supplementalGroups. It keeps only the capabilities added (see
// grantableCapabilities), with allowPrivilegeEscalation false too. A
// privileged container, and runAsNonRoot with runAsUser 0, are refused.
func containerIdentity(pod *corev1.Pod, c *corev1.Container, own int64) (identity, error) {
	psc := cmp.Or(pod.Spec.SecurityContext, &corev1.PodSecurityContext{})
	csc := cmp.Or(c.SecurityContext, &corev1.SecurityContext{})
	if csc.Privileged != nil && *csc.Privileged {
		return identity{}, invalidSpec("container %s: privileged containers are not run by the local node", c.Name)
	}
	uid := *cmp.Or(csc.RunAsUser, psc.RunAsUser, &own)
	if nonRoot := cmp.Or(csc.RunAsNonRoot, psc.RunAsNonRoot); nonRoot != nil && *nonRoot && uid == 0 {
		return identity{}, invalidSpec("container %s: runAsNonRoot is set and runAsUser is 0: the container would run as root", c.Name)
	}
	defaultGID := own
	if uid == 0 {
		defaultGID = 0
	}
	gid := *cmp.Or(csc.RunAsGroup, psc.RunAsGroup, &defaultGID)
	groups := []int64{volumeGroup(pod, own)}
	groups = append(groups, psc.SupplementalGroups...)
	caps, err := capabilities(c.Name, csc)
	if err != nil {
		return identity{}, err
	}
	id := identity{user: sandbox.User{UID: int(uid), GID: int(gid)}, caps: caps}
	for _, g := range groups {
		if !slices.Contains(id.user.Groups, int(g)) {
			id.user.Groups = append(id.user.Groups, int(g))
		}
	}
	return id, nil
}

// capabilities are the capabilities a container keeps: those added, but those
// dropped by name, as a container runtime computes them (drop ALL empties the
// defaults, which are none here, before the adds). allowPrivilegeEscalation
// false sets no_new_privs, which the launcher always sets, and keeps them.
func capabilities(name string, csc *corev1.SecurityContext) ([]string, error) {
	if csc.Capabilities == nil {
		return nil, nil
	}
	dropped := map[string]bool{}
	for _, d := range csc.Capabilities.Drop {
		dropped[capName(d)] = true
	}
	var out []string
	for _, a := range csc.Capabilities.Add {
		c := capName(a)
		if !slices.Contains(grantableCapabilities, c) {
			return nil, invalidSpec("container %s: capability %s is not granted by the local node (it grants %s)", name, a, strings.Join(grantableCapabilities, ", "))
		}
		if !dropped[c] && !slices.Contains(out, "CAP_"+c) {
			out = append(out, "CAP_"+c)
		}
	}
	return out, nil
}

// capName is a capability's name without the CAP_ prefix, in capitals.
func capName(c corev1.Capability) string {
	return strings.TrimPrefix(strings.ToUpper(string(c)), "CAP_")
}

// volumeGroup is the group that owns the pod's volumes: fsGroup, or the group of
// the namespace's user.
func volumeGroup(pod *corev1.Pod, own int64) int64 {
	if psc := pod.Spec.SecurityContext; psc != nil && psc.FSGroup != nil {
		return *psc.FSGroup
	}
	return own
}

// volumeOwner is who owns the files of the volumes the node writes for a pod.
type volumeOwner struct {
	uid, gid int
	// groupRead adds read for the group to every file (fsGroup is set), as a
	// kubelet does.
	groupRead bool
}

// podVolumeOwner owns a pod's volumes: the user every container of the pod runs
// as when they share one (so that a token file of mode 0600 is theirs), else the
// namespace's user; and the pod's volume group.
func podVolumeOwner(pod *corev1.Pod, ids []identity, own int64) volumeOwner {
	o := volumeOwner{uid: int(own), gid: int(volumeGroup(pod, own))}
	if psc := pod.Spec.SecurityContext; psc != nil && psc.FSGroup != nil {
		o.groupRead = true
	}
	if len(ids) > 0 && !slices.ContainsFunc(ids, func(id identity) bool { return id.user.UID != ids[0].user.UID }) {
		o.uid = ids[0].user.UID
	}
	return o
}

// mode is the mode of a volume file asked for m.
func (o volumeOwner) mode(m os.FileMode) os.FileMode {
	if o.groupRead {
		m |= 0o040
	}
	return m
}

// own hands dir and everything in it to the owner, with the modes of
// volumeOwner.mode; writable directories (an emptyDir) are the group's too,
// new files in them take its group, and every user may traverse them (not
// list them): a container's processes of other users, such as the gateway's
// workers, reach what is made for them there (a kubelet's emptyDir is 0777).
func (o volumeOwner) own(dir string, writable bool) error {
	return filepath.WalkDir(dir, func(p string, d os.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.Type().IsRegular() {
			// A file with other links may be another's, linked in by a
			// container (from a claim on the same filesystem) before a restart
			// of the node: its owner and mode stay.
			if info, err := d.Info(); err != nil {
				return err
			} else if st, ok := info.Sys().(*syscall.Stat_t); ok && st.Nlink > 1 {
				return nil
			}
		}
		if err := os.Lchown(p, o.uid, o.gid); err != nil {
			return err
		}
		switch {
		case d.Type()&os.ModeSymlink != 0:
			return nil
		case d.IsDir() && writable:
			return os.Chmod(p, 0o771|os.ModeSetgid)
		case d.IsDir():
			return nil
		}
		info, err := d.Info()
		if err != nil {
			return err
		}
		return os.Chmod(p, o.mode(info.Mode().Perm()))
	})
}

// containerLimits bounds a container's processes by its resources.limits (memory
// and cpu; none without them) where the node gives containers cgroups.
func containerLimits(r corev1.ResourceRequirements, openFiles int64) sandbox.Limits {
	l := sandbox.Limits{
		Memory: -1, CPU: -1, AddressSpace: -1, FileSize: -1,
		Processes: containerProcesses, OpenFiles: openFiles, TmpSize: containerTmpSize,
	}
	if m, ok := r.Limits[corev1.ResourceMemory]; ok && !m.IsZero() {
		l.Memory = m.Value()
	}
	if c, ok := r.Limits[corev1.ResourceCPU]; ok && !c.IsZero() {
		l.CPU = max(c.MilliValue(), 1)
	}
	return l
}

// Bounds of every container.
const (
	// containerProcesses bounds a container's tasks (its cgroup's pids.max).
	containerProcesses = 4096
	// containerTmpSize bounds its private /tmp.
	containerTmpSize = 256 << 20
)
