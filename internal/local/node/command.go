package node

import (
	"cmp"
	"fmt"
	"os"
	"path"
	"slices"
	"strings"

	corev1 "k8s.io/api/core/v1"

	"github.com/metalambda/metalambda/internal/gateway/sandbox"
)

// bindMount makes a host directory visible at a path inside a container's private
// mount namespace.
type bindMount struct {
	source, target string
	readOnly       bool
	// volume names the pod volume the source belongs to.
	volume string
	// subPath is the part of source below the volume's directory ("" for the
	// whole volume); the container opens it at every start (openSubPath).
	subPath string
	// from is the volume's directory or subPath opened for one start
	// (openMounts), bound instead of source.
	from *os.File
}

// invalidSpecError is a pod spec the node can never run: retrying cannot help, as a
// pod's containers do not change.
type invalidSpecError struct{ msg string }

func (e *invalidSpecError) Error() string { return e.msg }

func invalidSpec(format string, args ...any) error {
	return &invalidSpecError{msg: fmt.Sprintf(format, args...)}
}

// checkMount refuses a mountPath that is not absolute and a subPath that leaves its
// volume, as a kubelet does, and a mountPath that would reach the sandbox's own
// directory (sandbox.ReservedTarget: /, /run, /run/metalambda and below), which a
// kubelet allows.
func checkMount(c *corev1.Container, m corev1.VolumeMount) error {
	if !path.IsAbs(m.MountPath) {
		return invalidSpec("container %s: volumeMount %s: mountPath %q is not an absolute path", c.Name, m.Name, m.MountPath)
	}
	if sandbox.ReservedTarget(m.MountPath) {
		return invalidSpec("container %s: volumeMount %s: mountPath %q would cover %s, where the local node's sandbox keeps its own executables; mount the volume at another path", c.Name, m.Name, m.MountPath, sandbox.ReservedDir)
	}
	if sandbox.Within(m.MountPath, "/usr") {
		return invalidSpec("container %s: volumeMount %s: mountPath %q is in /usr, which the local node's sandbox binds read-only from the host; mount the volume at another path", c.Name, m.Name, m.MountPath)
	}
	if dir, ok := sandbox.SystemTarget(m.MountPath); ok {
		return invalidSpec("container %s: volumeMount %s: mountPath %q is in %s, which the local node's sandbox makes itself; mount the volume at another path", c.Name, m.Name, m.MountPath, dir)
	}
	if m.SubPathExpr != "" {
		return invalidSpec("container %s: volumeMount %s: subPathExpr is not supported by the local node; use subPath", c.Name, m.Name)
	}
	if path.IsAbs(m.SubPath) || slices.Contains(strings.Split(m.SubPath, "/"), "..") {
		return invalidSpec("container %s: volumeMount %s: subPath %q must be a relative path without '..'", c.Name, m.Name, m.SubPath)
	}
	return nil
}

// containerMounts resolves a container's volumeMounts against the pod's materialised
// volume directories, parents before children.
func containerMounts(c *corev1.Container, volumeDirs map[string]string) ([]bindMount, error) {
	var out []bindMount
	for _, m := range c.VolumeMounts {
		if err := checkMount(c, m); err != nil {
			return nil, err
		}
		dir, ok := volumeDirs[m.Name]
		if !ok {
			return nil, fmt.Errorf("volumeMount %s: no such volume", m.Name)
		}
		source := dir
		if m.SubPath != "" {
			source = dir + "/" + m.SubPath
		}
		// Cleaned, so that every check and bubblewrap see one path: "/work/."
		// is "/work", and a mount inside it is found inside it.
		out = append(out, bindMount{source: source, target: path.Clean(m.MountPath), readOnly: m.ReadOnly, volume: m.Name, subPath: m.SubPath})
	}
	slices.SortStableFunc(out, func(a, b bindMount) int {
		return cmp.Compare(strings.Count(a.target, "/"), strings.Count(b.target, "/"))
	})
	return out, nil
}

// checkNoSymlinks refuses the mounts of a container whose source or target would
// pass through a symbolic link inside a volume: a subPath's components below
// its volume's directory, and the part of a target that lies inside another
// mount's target, below that mount's source. Containers of the pod can write
// links into their volumes, and bubblewrap's mounts follow them: a link as a
// subPath would bind a host directory into the container, and a link that a
// nested mount's target passes through would place that mount, and the
// directories bubblewrap makes after it (the sandbox's own, /run/metalambda),
// wherever the link points, such as inside a volume another container writes.
// What does not exist yet is made later by openSubPath or bubblewrap, as
// directories. It runs when the pod is set up, for an early error, and again
// before every start of the container, whose own earlier run may have left
// links; the subPaths are then bound from what openSubPath opened, and
// checkNesting keeps writers from changing the targets' way meanwhile.
func checkNoSymlinks(containerName string, mounts []bindMount, volumeDirs map[string]string) error {
	for _, m := range mounts {
		if dir := volumeDirs[m.volume]; m.volume != "" && m.source != dir {
			if link := sandbox.FirstSymlink(dir, strings.TrimPrefix(m.source, dir+"/")); link != "" {
				return invalidSpec("container %s: volumeMount %s: its subPath passes through the symbolic link %s in the volume; a subPath must name directories", containerName, m.volume, strings.TrimPrefix(link, dir+"/"))
			}
		}
		for _, o := range mounts {
			if o.target == m.target || !sandbox.Within(m.target, o.target) {
				continue
			}
			rel := strings.TrimPrefix(path.Clean(m.target), strings.TrimSuffix(path.Clean(o.target), "/")+"/")
			if link := sandbox.FirstSymlink(o.source, rel); link != "" {
				return invalidSpec("container %s: volumeMount %s at %s passes through the symbolic link %s of the volume %s mounted at %s; mount it where no link leads", containerName, cmp.Or(m.volume, "a file"), m.target, strings.TrimPrefix(link, o.source+"/"), cmp.Or(o.volume, "a file"), o.target)
			}
		}
	}
	return nil
}

// checkNesting refuses a mount of container c whose target lies inside
// another of its volume mounts, unless nothing can write that outer volume
// while a sandbox of c is set up. bubblewrap follows links on the way to a
// target as root, and resolves absolute ones against its own setup root,
// where the host is /oldroot; checkNoSymlinks looks before every start, so
// what remains is a writer acting between its look and bubblewrap's. The
// outer volume may be one the node writes and mounts read-only (configMap,
// secret, downwardAPI, projected), or an emptyDir that none of alongside (the
// containers that run while c starts) mounts writable and that c itself does
// not mount writable anywhere when it has an exec probe (each probe's sandbox
// is set up while c runs). A claim's volume is refused: other pods may mount
// the same claim. mounts are c's, the node's own (volume "") among them.
func checkNesting(pod *corev1.Pod, c *corev1.Container, mounts []bindMount, alongside []corev1.Container) error {
	writes := func(c *corev1.Container, volume string) bool {
		return slices.ContainsFunc(c.VolumeMounts, func(m corev1.VolumeMount) bool { return m.Name == volume && !m.ReadOnly })
	}
	for _, m := range mounts {
		for _, o := range mounts {
			if o.volume == "" || o.target == m.target || !sandbox.Within(m.target, o.target) {
				continue
			}
			inner := "volumeMount " + m.volume
			if m.volume == "" {
				inner = "the node's " + m.target
			}
			refuse := func(why, fix string) error {
				return invalidSpec("container %s: %s at %s lies inside the volume %s mounted at %s, %s; the node cannot make a mount inside a directory that may change while it does: %s", c.Name, inner, m.target, o.volume, o.target, why, fix)
			}
			v := volumeNamed(pod, o.volume)
			switch {
			case v == nil:
				continue // containerMounts refuses it
			case v.ConfigMap != nil || v.Secret != nil || v.DownwardAPI != nil || v.Projected != nil:
				continue
			case v.EmptyDir == nil:
				return refuse("which other pods may write too", "mount it outside "+o.target)
			case hasExecProbe(c) && writes(c, o.volume):
				return refuse("which the container can write while its exec probe's sandbox is set up", "mount it outside "+o.target+", mount "+o.volume+" read-only, or use an httpGet or tcpSocket probe")
			}
			for i := range alongside {
				if a := &alongside[i]; a.Name != c.Name && writes(a, o.volume) {
					return refuse("which container "+a.Name+" can write while this one starts", "mount it outside "+o.target+", or "+o.volume+" read-only in "+a.Name)
				}
			}
		}
	}
	return nil
}

func volumeNamed(pod *corev1.Pod, name string) *corev1.Volume {
	for i := range pod.Spec.Volumes {
		if pod.Spec.Volumes[i].Name == name {
			return &pod.Spec.Volumes[i]
		}
	}
	return nil
}

func hasExecProbe(c *corev1.Container) bool {
	for _, p := range []*corev1.Probe{c.LivenessProbe, c.ReadinessProbe} {
		if p != nil && p.Exec != nil {
			return true
		}
	}
	return false
}

// orderMounts orders mounts so that each is made while its source is still visible
// and after the mounts its target lies in: a mount whose target is inside another's
// comes after it, and a mount whose source is inside another's target comes before it
// (a pod with an emptyDir at /tmp, on a node whose state directory is under /tmp,
// mounts its other volumes first). Among mounts free to go, shallower targets go
// first. Mounts that need each other first are an error naming them.
func orderMounts(containerName string, mounts []bindMount) ([]bindMount, error) {
	after := make([][]int, len(mounts)) // after[i]: the mounts that must wait for i
	waits := make([]int, len(mounts))
	for i, a := range mounts {
		for j, b := range mounts {
			if i != j && (sandbox.Within(b.target, a.target) && a.target != b.target || sandbox.Within(a.source, b.target)) {
				after[i] = append(after[i], j)
				waits[j]++
			}
		}
	}
	out := make([]bindMount, 0, len(mounts))
	done := make([]bool, len(mounts))
	for len(out) < len(mounts) {
		next := -1
		for i, m := range mounts {
			if !done[i] && waits[i] == 0 && (next < 0 || depth(m.target) < depth(mounts[next].target)) {
				next = i
			}
		}
		if next < 0 {
			var stuck []string
			for i, m := range mounts {
				if !done[i] {
					stuck = append(stuck, fmt.Sprintf("%s at %s (from %s)", cmp.Or(m.volume, "a file"), m.target, m.source))
				}
			}
			return nil, invalidSpec("container %s: its mounts hide each other's sources: %s; move the node's state directory out of these paths",
				containerName, strings.Join(stuck, ", "))
		}
		done[next] = true
		out = append(out, mounts[next])
		for _, j := range after[next] {
			waits[j]--
		}
	}
	return out, nil
}

func depth(p string) int { return strings.Count(path.Clean(p), "/") }

// shellQuote quotes s for sh.
func shellQuote(s string) string {
	return "'" + strings.ReplaceAll(s, "'", `'\''`) + "'"
}
