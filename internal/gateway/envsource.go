package gateway

import (
	"cmp"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"slices"
	"strings"
	"sync"
	"time"

	"golang.org/x/sync/singleflight"
	authenticationv1 "k8s.io/api/authentication/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/utils/lru"

	fnv1 "github.com/metalambda/metalambda/internal/apis/metalambda/v1alpha1"
	"github.com/metalambda/metalambda/internal/reservedenv"
)

// ErrEnvSourceUnavailable is the error of a Function whose env names a Secret or a
// ConfigMap (or a key of one) that the gateway cannot read: missing, or not granted
// to the gateway's account.
var ErrEnvSourceUnavailable = errors.New("an env source is unavailable")

// Kinds of env sources, as RBAC names their resources.
const (
	kindSecret    = "secrets"
	kindConfigMap = "configmaps"
)

// envSources are the Secrets and ConfigMaps a Function's env reads.
type envSources struct {
	EnvFrom      []fnv1.EnvFromSource         `json:"envFrom,omitempty"`
	EnvValueFrom map[string]fnv1.EnvVarSource `json:"envValueFrom,omitempty"`
}

// sourcesOf is spec's env sources, nil when it has none.
func sourcesOf(spec *fnv1.FunctionSpec) *envSources {
	if !spec.HasEnvSources() {
		return nil
	}
	return &envSources{EnvFrom: spec.EnvFrom, EnvValueFrom: spec.EnvValueFrom}
}

// objectRef is one object an env source reads, and the field that names it.
type objectRef struct {
	kind, name string
	field      string // spec.envFrom[0].secretRef
}

// refs lists the objects the sources read, in the order they are read.
func (s *envSources) refs() []objectRef {
	var out []objectRef
	for i, src := range s.EnvFrom {
		if src.SecretRef != nil {
			out = append(out, objectRef{kindSecret, src.SecretRef.Name, fmt.Sprintf("spec.envFrom[%d].secretRef", i)})
		}
		if src.ConfigMapRef != nil {
			out = append(out, objectRef{kindConfigMap, src.ConfigMapRef.Name, fmt.Sprintf("spec.envFrom[%d].configMapRef", i)})
		}
	}
	for _, name := range slices.Sorted(maps.Keys(s.EnvValueFrom)) {
		src := s.EnvValueFrom[name]
		if src.SecretKeyRef != nil {
			out = append(out, objectRef{kindSecret, src.SecretKeyRef.Name, "spec.envValueFrom[" + name + "].secretKeyRef"})
		}
		if src.ConfigMapKeyRef != nil {
			out = append(out, objectRef{kindConfigMap, src.ConfigMapKeyRef.Name, "spec.envValueFrom[" + name + "].configMapKeyRef"})
		}
	}
	return out
}

// envReadTimeout bounds each request of an envCache to the API server.
const envReadTimeout = 10 * time.Second

// envCache reads Secrets and ConfigMaps with GET, as the gateway's own account, and
// keeps each answer for a few seconds, keyed by namespace, kind and name: a call
// reads its function's sources without reaching the API server each time, and a
// changed Secret is seen within the TTL. GET, not a watch: a Role may grant the
// gateway single objects by name (resourceNames), which allows get but not list or
// watch. An error (not found, forbidden) is kept for the shorter negative TTL, so
// that a grant takes effect soon while calls of a broken function do not each
// cost a request. Concurrent misses of one object make one request.
type envCache struct {
	kube        kubernetes.Interface
	ttl         time.Duration
	negativeTTL time.Duration
	// readTimeout bounds each request to the API server.
	readTimeout time.Duration
	now         func() time.Time
	objects     *lru.Cache // objectKey → cachedObject
	flight      singleflight.Group

	mu       sync.Mutex
	identity string // the gateway's user name, once known
}

type objectKey struct{ namespace, kind, name string }

type cachedObject struct {
	data    map[string]string // nil when err is set
	err     error
	expires time.Time
}

func newEnvCache(kube kubernetes.Interface, ttl, negativeTTL time.Duration, size int) *envCache {
	return &envCache{kube: kube, ttl: ttl, negativeTTL: negativeTTL, readTimeout: envReadTimeout, now: time.Now, objects: lru.New(size)}
}

// get is the data of a Secret (decoded) or a ConfigMap (its data, not binaryData),
// or the API's error.
func (c *envCache) get(ctx context.Context, namespace, kind, name string) (map[string]string, error) {
	key := objectKey{namespace, kind, name}
	if v, ok := c.objects.Get(key); ok && c.now().Before(v.(cachedObject).expires) {
		return v.(cachedObject).data, v.(cachedObject).err
	}
	v, _, _ := c.flight.Do(namespace+"/"+kind+"/"+name, func() (any, error) {
		// The request outlives a caller that gives up: others may wait for it.
		ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), c.readTimeout)
		defer cancel()
		data, err := c.fetch(ctx, key)
		entry := cachedObject{data: data, err: err, expires: c.now().Add(c.ttl)}
		if err != nil {
			entry.expires = c.now().Add(c.negativeTTL)
		}
		c.objects.Add(key, entry)
		return entry, nil
	})
	return v.(cachedObject).data, v.(cachedObject).err
}

func (c *envCache) fetch(ctx context.Context, key objectKey) (map[string]string, error) {
	if key.kind == kindSecret {
		s, err := c.kube.CoreV1().Secrets(key.namespace).Get(ctx, key.name, metav1.GetOptions{})
		if err != nil {
			return nil, err
		}
		data := make(map[string]string, len(s.Data))
		for k, v := range s.Data {
			data[k] = string(v)
		}
		return data, nil
	}
	cm, err := c.kube.CoreV1().ConfigMaps(key.namespace).Get(ctx, key.name, metav1.GetOptions{})
	if err != nil {
		return nil, err
	}
	return maps.Clone(cm.Data), nil
}

// whoAmI is the gateway's user name (SelfSubjectReview), for the grant an error
// message proposes; "" when the API does not say.
func (c *envCache) whoAmI(ctx context.Context) string {
	c.mu.Lock()
	known := c.identity
	c.mu.Unlock()
	if known != "" {
		return known
	}
	ctx, cancel := context.WithTimeout(ctx, c.readTimeout)
	defer cancel()
	review, err := c.kube.AuthenticationV1().SelfSubjectReviews().Create(ctx, &authenticationv1.SelfSubjectReview{}, metav1.CreateOptions{})
	if err != nil {
		return ""
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	c.identity = review.Status.UserInfo.Username
	return c.identity
}

// resolve is the environment of function (namespace/name) from its sources, in a
// Pod's order: envFrom in turn (a later source wins for the same name), then
// envValueFrom. A missing object or key that is not optional, or one the gateway
// may not read, is an *envSourceError.
func (c *envCache) resolve(ctx context.Context, function, namespace string, src *envSources) (map[string]string, error) {
	env := map[string]string{}
	if src == nil {
		return env, nil
	}
	for i, from := range src.EnvFrom {
		ref, kind := from.SecretRef, kindSecret
		if ref == nil {
			ref, kind = from.ConfigMapRef, kindConfigMap
		}
		if ref == nil {
			continue // refused by validation
		}
		field := fmt.Sprintf("spec.envFrom[%d].%s", i, refField(kind, "Ref"))
		data, err := c.get(ctx, namespace, kind, ref.Name)
		if err != nil && ref.Optional && apierrors.IsNotFound(err) {
			continue
		}
		if err != nil {
			return nil, c.sourceError(ctx, function, namespace, field, kind, ref.Name, err)
		}
		for k, v := range data {
			if err := reservedenv.Error(from.Prefix + k); err != nil {
				return nil, &envSourceError{msg: fmt.Sprintf("function %s: %s: %s %q: key %s: %v; rename the key, or set a prefix", function, field, singular(kind), ref.Name, k, err)}
			}
			env[from.Prefix+k] = v
		}
	}
	for _, name := range slices.Sorted(maps.Keys(src.EnvValueFrom)) {
		if err := c.resolveValue(ctx, function, namespace, name, src.EnvValueFrom[name], env); err != nil {
			return nil, err
		}
	}
	return env, nil
}

// resolveValue sets env[name] from one key of a Secret or a ConfigMap.
func (c *envCache) resolveValue(ctx context.Context, function, namespace, name string, from fnv1.EnvVarSource, env map[string]string) error {
	ref, kind := from.SecretKeyRef, kindSecret
	if ref == nil {
		ref, kind = from.ConfigMapKeyRef, kindConfigMap
	}
	if ref == nil {
		return nil // refused by validation
	}
	field := "spec.envValueFrom[" + name + "]." + refField(kind, "KeyRef")
	data, err := c.get(ctx, namespace, kind, ref.Name)
	if err != nil && ref.Optional && apierrors.IsNotFound(err) {
		return nil
	}
	if err != nil {
		return c.sourceError(ctx, function, namespace, field, kind, ref.Name, err)
	}
	value, ok := data[ref.Key]
	switch {
	case ok:
		env[name] = value
	case !ref.Optional:
		return &envSourceError{msg: fmt.Sprintf("function %s: %s: %s %q has no key %q; add it, or mark the reference optional: true", function, field, singular(kind), ref.Name, ref.Key)}
	}
	return nil
}

func refField(kind, suffix string) string {
	if kind == kindSecret {
		return "secret" + suffix
	}
	return "configMap" + suffix
}

func singular(kind string) string {
	if kind == kindSecret {
		return "secret"
	}
	return "configmap"
}

// envSourceError says why a function's env cannot be read, and what fixes it. It
// names objects and keys, never values.
type envSourceError struct{ msg string }

func (e *envSourceError) Error() string { return e.msg }

func (e *envSourceError) Is(target error) bool { return target == ErrEnvSourceUnavailable }

// sourceError explains err, the API's answer to the gateway's GET of an env source.
func (c *envCache) sourceError(ctx context.Context, function, namespace, field, kind, name string, err error) error {
	prefix := fmt.Sprintf("function %s: %s: %s %q", function, field, singular(kind), name)
	switch {
	case apierrors.IsNotFound(err):
		return &envSourceError{msg: fmt.Sprintf("%s not found in namespace %s; create it, or mark the reference optional: true", prefix, namespace)}
	case apierrors.IsForbidden(err):
		who := c.whoAmI(ctx)
		return &envSourceError{msg: fmt.Sprintf("%s: the gateway's account %s may not get %s in namespace %s; grant it: %s", prefix, cmp.Or(who, "(unknown)"), kind, namespace, grantCommand(namespace, kind, name, who))}
	default:
		return &envSourceError{msg: fmt.Sprintf("%s: reading it: %v", prefix, err)}
	}
}

// grantCommand is the kubectl commands that let user (the gateway's account) get
// one object: a Role naming it and a RoleBinding.
func grantCommand(namespace, kind, name, user string) string {
	role := "metalambda-gateway-" + singular(kind) + "-" + name
	subject := "--user=" + user
	if sa, ok := strings.CutPrefix(user, "system:serviceaccount:"); ok {
		subject = "--serviceaccount=" + sa
	}
	if user == "" {
		subject = "--serviceaccount=<the gateway's namespace>:<its service account>"
	}
	return fmt.Sprintf("kubectl -n %s create role %s --verb=get --resource=%s --resource-name=%s && kubectl -n %s create rolebinding %s --role=%s %s",
		namespace, role, kind, name, namespace, role, role, subject)
}

// envHash identifies an environment without showing it: builds of a function are
// told apart by it. It is kept in memory only, never logged or reported.
func envHash(env map[string]string) string {
	data, _ := json.Marshal(env) // map keys sorted
	sum := sha256.Sum256(data)
	return hex.EncodeToString(sum[:])
}

// mergeEnv is the environment a function runs with: what its sources give, then
// its plain env, which wins for the same name as in a Pod.
func mergeEnv(fromSources, plain map[string]string) map[string]string {
	out := make(map[string]string, len(fromSources)+len(plain))
	maps.Copy(out, fromSources)
	maps.Copy(out, plain)
	return out
}
