package node

import (
	"context"
	"os"
	"path/filepath"
	"sync"
	"time"

	authenticationv1 "k8s.io/api/authentication/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
)

// tokenCache keeps the service account tokens issued for pods, as a kubelet's token
// manager does: a token is reused until 80% of its life has passed, then a fresh one
// is requested. Projected volumes are rewritten with the fresh token (refreshTokens).
type tokenCache struct {
	mu      sync.Mutex
	entries map[tokenKey]issuedToken
}

type tokenKey struct {
	uid        types.UID
	audience   string
	expiration int64 // requested seconds; 0 for the server's default
}

type issuedToken struct {
	token           string
	issued, expires time.Time
}

// refreshDue reports whether a token issued at issued and expiring at expires
// should be replaced at now: past 80% of its life.
func refreshDue(t issuedToken, now time.Time) bool {
	life := t.expires.Sub(t.issued)
	return !now.Before(t.issued.Add(life * 8 / 10))
}

// get returns the cached token for key unless it is due, else asks request.
func (c *tokenCache) get(key tokenKey, now time.Time, request func() (issuedToken, error)) (string, error) {
	c.mu.Lock()
	t, ok := c.entries[key]
	c.mu.Unlock()
	if ok && !refreshDue(t, now) {
		return t.token, nil
	}
	t, err := request()
	if err != nil {
		return "", err
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.entries == nil {
		c.entries = map[tokenKey]issuedToken{}
	}
	c.entries[key] = t
	return t.token, nil
}

// forget drops the tokens of a pod that is gone.
func (c *tokenCache) forget(uid types.UID) {
	c.mu.Lock()
	defer c.mu.Unlock()
	for k := range c.entries {
		if k.uid == uid {
			delete(c.entries, k)
		}
	}
}

// token returns a service account token bound to the pod (projected volumes),
// from the cache while it is fresh.
func (n *Node) token(ctx context.Context, pod *corev1.Pod, audience string, expiration *int64) (string, error) {
	key := tokenKey{uid: pod.UID, audience: audience}
	if expiration != nil {
		key.expiration = *expiration
	}
	return n.tokens.get(key, time.Now(), func() (issuedToken, error) {
		return n.requestToken(ctx, pod, audience, expiration)
	})
}

// requestToken asks the TokenRequest API for a token of the pod's service account,
// bound to the pod, for audience (the API server's when empty).
func (n *Node) requestToken(ctx context.Context, pod *corev1.Pod, audience string, expiration *int64) (issuedToken, error) {
	sa := pod.Spec.ServiceAccountName
	if sa == "" {
		sa = "default"
	}
	req := &authenticationv1.TokenRequest{Spec: authenticationv1.TokenRequestSpec{
		ExpirationSeconds: expiration,
		BoundObjectRef:    &authenticationv1.BoundObjectReference{Kind: "Pod", APIVersion: "v1", Name: pod.Name, UID: pod.UID},
	}}
	if audience != "" {
		req.Spec.Audiences = []string{audience}
	}
	now := time.Now()
	out, err := n.kube.CoreV1().ServiceAccounts(pod.Namespace).CreateToken(ctx, sa, req, metav1.CreateOptions{})
	if err != nil {
		return issuedToken{}, err
	}
	return issuedToken{token: out.Status.Token, issued: now, expires: out.Status.ExpirationTimestamp.Time}, nil
}

// tokenFile is one serviceAccountToken source of a projected volume, as written.
type tokenFile struct {
	path       string // on the host
	audience   string
	expiration *int64
	mode       os.FileMode
}

// tokenFiles lists the service account token files of a pod's projected volumes.
func tokenFiles(pod *corev1.Pod, volumeDirs map[string]string) []tokenFile {
	var out []tokenFile
	for _, v := range pod.Spec.Volumes {
		if v.Projected == nil || volumeDirs[v.Name] == "" {
			continue
		}
		mode := os.FileMode(0o600)
		if v.Projected.DefaultMode != nil {
			mode = os.FileMode(*v.Projected.DefaultMode)
		}
		for _, s := range v.Projected.Sources {
			if t := s.ServiceAccountToken; t != nil {
				out = append(out, tokenFile{
					path:     filepath.Join(volumeDirs[v.Name], filepath.Clean("/"+t.Path)),
					audience: t.Audience, expiration: t.ExpirationSeconds, mode: mode,
				})
			}
		}
	}
	return out
}

// refreshTokens rewrites every token file whose token the cache has replaced. The
// file is replaced by a rename, so a reader sees the old token or the new one, never
// a mix; the volume is bind-mounted as a directory, so containers see the new file,
// owned by the pod's volume owner as the first one was.
func (w *podWorker) refreshTokens(ctx context.Context, src refSource) error {
	pod := w.current()
	w.mu.Lock()
	dirs, owner := w.volumeDirs, w.owner
	w.mu.Unlock()
	for _, f := range tokenFiles(pod, dirs) {
		tok, err := src.token(ctx, pod, f.audience, f.expiration)
		if err != nil {
			return err
		}
		if old, err := os.ReadFile(f.path); err == nil && string(old) == tok {
			continue
		}
		if err := writeFileAtomic(f.path, []byte(tok), owner.mode(f.mode), owner); err != nil {
			return err
		}
	}
	return nil
}

// writeFileAtomic replaces path with data through a temporary file, which owner
// owns, and a rename.
func writeFileAtomic(path string, data []byte, mode os.FileMode, owner volumeOwner) error {
	tmp, err := os.CreateTemp(filepath.Dir(path), ".tmp-"+filepath.Base(path)+"-")
	if err != nil {
		return err
	}
	defer os.Remove(tmp.Name())
	if _, err := tmp.Write(data); err != nil {
		tmp.Close()
		return err
	}
	if err := tmp.Chmod(mode); err != nil {
		tmp.Close()
		return err
	}
	if err := tmp.Chown(owner.uid, owner.gid); err != nil {
		tmp.Close()
		return err
	}
	if err := tmp.Close(); err != nil {
		return err
	}
	return os.Rename(tmp.Name(), path)
}
