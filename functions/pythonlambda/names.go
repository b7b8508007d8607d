package pythonlambda

import (
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"maps"
	"slices"
	"strconv"
	"strings"

	"k8s.io/apimachinery/pkg/util/validation"
	"knative.dev/pkg/kmeta"
)

// Labels and annotations of the children.
const (
	// NameLabel is "pythonlambda" on every child.
	NameLabel = "app.kubernetes.io/name"
	// InstanceLabel is the parent's name (hashed to 63 characters when longer) on
	// every child; with NameLabel it is the Service's pod selector.
	InstanceLabel = "app.kubernetes.io/instance"
	// SpecHashAnnotation on a pod is a hash of what it runs: the server, the code, the
	// image, the env, the resources and the revision of the Secrets and ConfigMaps the
	// env reads. A change makes the desired pod differ, and the controller's
	// RollingRecreate strategy replaces the pods one at a time.
	SpecHashAnnotation = "pythonlambda.example.com/spec-hash"
	// ConfigRevisionAnnotation on a pod is the revision of the Secrets and ConfigMaps
	// its env read when it was created (see status.configRevision).
	ConfigRevisionAnnotation = "pythonlambda.example.com/config-revision"
)

// Child name suffixes, appended with kmeta.ChildName.
const (
	configMapSuffix = "-code-" // then a hash of the files: one ConfigMap per code revision
	surgeSuffix     = "-surge"
	serviceSuffix   = "-svc"
	ingressSuffix   = "-ingress"
)

// names are the children's names, all derived from the parent's.
type names struct {
	// ConfigMap holds the files of the current code: its name carries their hash, so
	// pods of an older code keep theirs until they are replaced.
	ConfigMap string
	Service   string
	Ingress   string
	Pods      []string
	// Surge is the extra pod that serves while a rollout replaces the others.
	Surge string
}

func childNames(l *lambda) names {
	n := names{
		ConfigMap: kmeta.ChildName(l.Name, configMapSuffix+filesHash(files(l))),
		Service:   serviceName(l.Name),
		Ingress:   kmeta.ChildName(l.Name, ingressSuffix),
		Surge:     kmeta.ChildName(l.Name, surgeSuffix),
	}
	for i := range int(l.replicas()) {
		n.Pods = append(n.Pods, kmeta.ChildName(l.Name, "-"+strconv.Itoa(i)))
	}
	return n
}

// filesHash is a short hash of the files a ConfigMap holds.
func filesHash(files map[string]string) string {
	keys := slices.Sorted(maps.Keys(files))
	h := sha256.New()
	for _, k := range keys {
		fmt.Fprintf(h, "%d:%s%d:%s", len(k), k, len(files[k]), files[k])
	}
	return hex.EncodeToString(h.Sum(nil))[:10]
}

// serviceName is "<name>-svc". A Service name must be a DNS-1035 label while the
// parent's may hold dots or start with a digit: such a name is made one ("a.b" becomes
// "x-a-b-<hash of a.b>-svc"), the hash keeping it apart from another parent's.
func serviceName(parent string) string {
	name := kmeta.ChildName(parent, serviceSuffix)
	if len(validation.IsDNS1035Label(name)) == 0 {
		return name
	}
	sum := sha256.Sum256([]byte(parent))
	return kmeta.ChildName("x-"+strings.ReplaceAll(parent, ".", "-")+"-"+hex.EncodeToString(sum[:4]), serviceSuffix)
}

// selector labels every child; the Service selects the pods by it.
func selector(l *lambda) map[string]string {
	return map[string]string{
		NameLabel:     "pythonlambda",
		InstanceLabel: kmeta.ChildName(l.Name, ""),
	}
}
