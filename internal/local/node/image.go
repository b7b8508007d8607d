package node

import (
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path"
	"strings"

	corev1 "k8s.io/api/core/v1"
	"sigs.k8s.io/yaml"
)

// runtimeKind says how the node runs a container's image.
type runtimeKind string

const (
	// runtimePython runs the host's python3 for python images (other commands of
	// the container run from the host's PATH).
	runtimePython runtimeKind = "python"
	// runtimeNode runs the host's Node.js for node images, with the node image's
	// entrypoint rules.
	runtimeNode runtimeKind = "node"
	// runtimeHost runs the container's command with the host's tools: base images
	// (busybox, alpine, debian, ...) whose commands the host has too.
	runtimeHost runtimeKind = "host"
	// runtimePlaceholder stands in for an image the node cannot run.
	runtimePlaceholder runtimeKind = "placeholder"
)

// ImageRule says how the node runs the images whose repository matches Image.
type ImageRule struct {
	// Image is a glob (path.Match: `*`, `?`, `[...]`; `*` does not cross `/`) over an
	// image's repository, without tag or digest; Docker Hub's "docker.io/library/"
	// is left off ("busybox", "ghcr.io/acme/*"). A pattern without `/` also matches
	// the last element of any repository ("python" matches "ghcr.io/acme/python").
	Image string `json:"image"`
	// Kind is python, node, host or placeholder.
	Kind string `json:"kind"`
	// Interpreter, for python and node kinds only, is the host binary their python or
	// node commands run (an absolute path or a name on PATH). Default: the node's
	// Python or NodeJS.
	Interpreter string `json:"interpreter,omitempty"`
	// Entrypoint, for the host kind only, is the image's ENTRYPOINT as a host command
	// line (its first word an absolute path or a name on PATH): a container without a
	// command runs it followed by the container's args, as a container runtime does.
	// This runs an image built from this machine's own binaries, such as the project's
	// ghcr.io/metalambda/engine, as the binary itself.
	Entrypoint []string `json:"entrypoint,omitempty"`
}

// imageMap is the YAML file of Options.ImageMapFile.
type imageMap struct {
	Images []ImageRule `json:"images"`
}

// builtinImages are tried after the user's rules: the interpreters' images and the
// common base images whose shell and tools every Linux host has.
var builtinImages = []ImageRule{
	{Image: "python", Kind: "python"},
	{Image: "python3", Kind: "python"},
	{Image: "node", Kind: "node"},
	{Image: "busybox", Kind: "host"},
	{Image: "alpine", Kind: "host"},
	{Image: "debian", Kind: "host"},
	{Image: "ubuntu", Kind: "host"},
	{Image: "bash", Kind: "host"},
	{Image: "fedora", Kind: "host"},
	{Image: "centos", Kind: "host"},
	{Image: "rockylinux", Kind: "host"},
	{Image: "almalinux", Kind: "host"},
	{Image: "amazonlinux", Kind: "host"},
	{Image: "oraclelinux", Kind: "host"},
	{Image: "archlinux", Kind: "host"},
	{Image: "opensuse/*", Kind: "host"},
	{Image: "ubi*", Kind: "host"},
}

// imageRun is how the node runs one image: its kind, the host binaries its python
// and node commands run, and why a placeholder stands in.
type imageRun struct {
	kind       runtimeKind
	python     string
	node       string
	entrypoint []string
	message    string
	// hostPaths are what the container sees read-only beside the system
	// directories: the installations of its interpreters, its entrypoint.
	hostPaths []string
}

// normalizedRepo returns an image reference's repository without tag or digest, and
// without Docker Hub's "docker.io/library/" prefix.
func normalizedRepo(image string) string {
	ref := image
	if i := strings.Index(ref, "@"); i >= 0 {
		ref = ref[:i]
	}
	if i := strings.LastIndex(ref, ":"); i > strings.LastIndex(ref, "/") {
		ref = ref[:i]
	}
	for _, hub := range []string{"docker.io/", "index.docker.io/", "registry-1.docker.io/"} {
		ref = strings.TrimPrefix(ref, hub)
	}
	return strings.TrimPrefix(ref, "library/")
}

// matches reports whether the rule covers image.
func (r ImageRule) matches(image string) bool {
	repo := normalizedRepo(image)
	if ok, _ := path.Match(r.Image, repo); ok {
		return true
	}
	if strings.Contains(r.Image, "/") {
		return false
	}
	ok, _ := path.Match(r.Image, path.Base(repo))
	return ok
}

// validate checks a rule and resolves its interpreter.
func (r *ImageRule) validate() error {
	if r.Image == "" {
		return errors.New("image is empty: name a repository or a glob such as ghcr.io/acme/*")
	}
	if _, err := path.Match(r.Image, ""); err != nil {
		return fmt.Errorf("image %q is not a valid glob", r.Image)
	}
	if strings.Contains(r.Image, "@") || strings.LastIndex(r.Image, ":") > strings.LastIndex(r.Image, "/") {
		return fmt.Errorf("image %q has a tag or digest: rules match repositories only", r.Image)
	}
	switch runtimeKind(r.Kind) {
	case runtimePython, runtimeNode:
	case runtimeHost, runtimePlaceholder:
		if r.Interpreter != "" {
			return fmt.Errorf("image %q: interpreter is only for kinds python and node, not %s", r.Image, r.Kind)
		}
	default:
		return fmt.Errorf("image %q: kind %q is not one of python, node, host, placeholder", r.Image, r.Kind)
	}
	if len(r.Entrypoint) > 0 {
		if runtimeKind(r.Kind) != runtimeHost {
			return fmt.Errorf("image %q: entrypoint is only for kind host, not %s", r.Image, r.Kind)
		}
		p, err := exec.LookPath(r.Entrypoint[0])
		if err != nil {
			return fmt.Errorf("image %q: entrypoint %q is not an executable on this host", r.Image, r.Entrypoint[0])
		}
		r.Entrypoint = append([]string{p}, r.Entrypoint[1:]...)
	}
	if r.Interpreter == "" {
		return nil
	}
	p, err := exec.LookPath(r.Interpreter)
	if err != nil {
		return fmt.Errorf("image %q: interpreter %q is not an executable on this host", r.Image, r.Interpreter)
	}
	r.Interpreter = p
	return nil
}

// loadImageMap reads and checks an image map file.
func loadImageMap(file string) ([]ImageRule, error) {
	data, err := os.ReadFile(file)
	if err != nil {
		return nil, fmt.Errorf("image map: %w", err)
	}
	var m imageMap
	if err := yaml.UnmarshalStrict(data, &m); err != nil {
		return nil, fmt.Errorf("image map %s: %w (want `images:` with a list of {image, kind, interpreter, entrypoint})", file, err)
	}
	if len(m.Images) == 0 {
		return nil, fmt.Errorf("image map %s: no rules under `images:`", file)
	}
	for i := range m.Images {
		if err := m.Images[i].validate(); err != nil {
			return nil, fmt.Errorf("image map %s: rule %d: %w", file, i+1, err)
		}
	}
	return m.Images, nil
}

// buildImageRules makes the effective table: Images, then ImageMapFile's rules,
// then the built-in ones.
func (o *Options) buildImageRules() error {
	var rules []ImageRule
	for i, r := range o.Images {
		if err := r.validate(); err != nil {
			return fmt.Errorf("image rule %d: %w", i+1, err)
		}
		rules = append(rules, r)
	}
	if o.ImageMapFile != "" {
		fromFile, err := loadImageMap(o.ImageMapFile)
		if err != nil {
			return err
		}
		rules = append(rules, fromFile...)
	}
	o.imageRules = append(rules, builtinImages...)
	return nil
}

// mapImage says how an image runs on the host: by the first rule that matches it.
func (o *Options) mapImage(image string) imageRun {
	run := imageRun{kind: runtimePlaceholder, python: o.Python, node: o.NodeJS, message: placeholderMessage(image)}
	for _, r := range o.imageRules {
		if !r.matches(image) {
			continue
		}
		run.kind = runtimeKind(r.Kind)
		run.entrypoint = r.Entrypoint
		switch {
		case run.kind == runtimePython && r.Interpreter != "":
			run.python = r.Interpreter
		case run.kind == runtimeNode && r.Interpreter != "":
			run.node = r.Interpreter
		}
		break
	}
	if run.kind == runtimeNode && run.node == "" {
		run.kind = runtimePlaceholder
		run.message = fmt.Sprintf("image %s needs Node.js on the host, which the local node did not find (install nodejs or set its path); a placeholder process stands in", image)
	}
	if run.kind != runtimePlaceholder {
		run.message = ""
		for _, key := range []string{run.python, run.node, first(run.entrypoint)} {
			run.hostPaths = append(run.hostPaths, o.runtimePaths[key]...)
		}
	}
	return run
}

func first(s []string) string {
	if len(s) == 0 {
		return ""
	}
	return s[0]
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

// isNodeCommand reports whether a command names Node.js.
func isNodeCommand(cmd string) bool {
	switch path.Base(cmd) {
	case "node", "nodejs":
		return true
	}
	return false
}

// nodeEntrypoint is the node image's docker-entrypoint.sh: arguments that start
// with "-", or whose first word is no command (a script file), are node's.
const nodeEntrypoint = `if [ "${1#-}" != "$1" ] || [ -z "$(command -v "$1")" ] || { [ -f "$1" ] && ! [ -x "$1" ]; }; then set -- %s "$@"; fi
exec "$@"`

// argv returns the host command line for a container: the image's entrypoint
// semantics (command replaces it, args replace its arguments), with python and node
// commands mapped to the host interpreters. An image without command or args runs
// its usual default: python3, node, or sh for a base image (each exits at once, as
// its stdin is empty).
func argv(c *corev1.Container, run imageRun) []string {
	if run.kind == runtimePlaceholder {
		return []string{"sleep", "infinity"}
	}
	var out []string
	switch {
	case len(c.Command) > 0:
		out = append(append(out, c.Command...), c.Args...)
	case len(run.entrypoint) > 0:
		out = append(append(out, run.entrypoint...), c.Args...)
	case run.kind == runtimePython:
		out = append([]string{"python3"}, c.Args...)
	case run.kind == runtimeNode && len(c.Args) > 0:
		out = append([]string{"sh", "-c", fmt.Sprintf(nodeEntrypoint, shellQuote(run.node)), "docker-entrypoint.sh"}, run.hostArgv(c.Args)...)
	case run.kind == runtimeNode:
		out = []string{"node"}
	case len(c.Args) > 0:
		out = append(out, c.Args...)
	default:
		out = []string{"sh"}
	}
	return run.hostArgv(out)
}

// hostArgv maps a command line's python or node command to the host interpreter.
func (run imageRun) hostArgv(cmdline []string) []string {
	if len(cmdline) == 0 {
		return cmdline
	}
	out := append([]string(nil), cmdline...)
	switch {
	case isPythonCommand(out[0]) && run.python != "":
		out[0] = run.python
	case isNodeCommand(out[0]) && run.node != "":
		out[0] = run.node
	}
	return out
}
