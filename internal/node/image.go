package node

import (
	"fmt"
	"path"
	"strings"

	corev1 "k8s.io/api/core/v1"
)

// runtimeKind says how the node runs a container's image.
type runtimeKind int

const (
	// runtimePython runs the host's python3 for python images (other commands of
	// the container run from the host's PATH).
	runtimePython runtimeKind = iota
	// runtimePlaceholder stands in for an image the node cannot run.
	runtimePlaceholder
)

// imageRepo returns an image reference's repository name without registry, tag or
// digest: "docker.io/library/python:3.11" gives "python".
func imageRepo(image string) string {
	ref := image
	if i := strings.Index(ref, "@"); i >= 0 {
		ref = ref[:i]
	}
	if i := strings.LastIndex(ref, ":"); i > strings.LastIndex(ref, "/") {
		ref = ref[:i]
	}
	return path.Base(ref)
}

// mapImage says how an image runs on the host.
func mapImage(image string) runtimeKind {
	switch imageRepo(image) {
	case "python", "python3":
		return runtimePython
	}
	return runtimePlaceholder
}

// placeholderMessage is what a pod says about an image the node does not run.
func placeholderMessage(image string) string {
	return fmt.Sprintf("image %s is not run by the local node; a placeholder process stands in", image)
}

// isPythonCommand reports whether a command names a python interpreter.
func isPythonCommand(cmd string) bool {
	switch path.Base(cmd) {
	case "python", "python3":
		return true
	}
	return strings.HasPrefix(path.Base(cmd), "python3.")
}

// argv returns the host command line for a container: the image's entrypoint
// semantics (command replaces it, args replace its arguments), with python commands
// mapped to the host interpreter.
func argv(c *corev1.Container, python string) []string {
	kind := mapImage(c.Image)
	if kind == runtimePlaceholder {
		return []string{"sleep", "infinity"}
	}
	var out []string
	switch {
	case len(c.Command) > 0:
		out = append(append(out, c.Command...), c.Args...)
	case kind == runtimePython:
		out = append([]string{"python3"}, c.Args...)
	case len(c.Args) > 0:
		out = append(out, c.Args...)
	default:
		out = []string{"sh"}
	}
	if isPythonCommand(out[0]) {
		out[0] = python
	}
	return out
}
