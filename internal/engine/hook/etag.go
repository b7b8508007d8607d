package hook

import (
	"container/list"
	"sync"
	"time"

	"github.com/metalambda/metalambda/internal/apis/metacontroller/v1alpha1"
)

// Defaults of webhook.etag. Metacontroller keeps ETag entries forever unless told
// otherwise; these follow the timeout and cleanup of its other response caches
// (customize: 20 minutes, cleaned every 10), so that memory stays bounded.
const (
	DefaultETagCacheTimeout = 20 * time.Minute
	DefaultETagCacheCleanup = 10 * time.Minute
	// DefaultETagCacheMaxBytes caps the response bodies one hook's cache holds; the
	// entries closest to expiry go first when it is full.
	DefaultETagCacheMaxBytes int64 = 64 << 20
)

// ObjectKey names the object a hook call is about: the parent of a sync, finalize or
// customize call. ETag caches key on it.
type ObjectKey struct {
	Group, Kind, Namespace, Name string
}

// ETagCache keeps, per object, the last response a hook answered with an ETag, so
// that the next call can send If-None-Match and reuse the response on 304 Not
// Modified. Entries expire Timeout after they were stored; expired entries are
// swept every Cleanup while the cache is not empty (no goroutine outlives the last
// entry). It is safe for concurrent use.
type ETagCache struct {
	timeout, cleanup time.Duration
	maxBytes         int64
	now              func() time.Time

	mu       sync.Mutex
	entries  map[ObjectKey]*list.Element // of *etagEntry
	order    *list.List                  // oldest (first to expire) at the front
	bytes    int64
	sweeping bool // a sweep is scheduled
}

type etagEntry struct {
	key     ObjectKey
	etag    string
	body    []byte
	expires time.Time
}

// NewETagCache returns an empty cache; non-positive arguments take the defaults.
func NewETagCache(timeout, cleanup time.Duration, maxBytes int64) *ETagCache {
	if timeout <= 0 {
		timeout = DefaultETagCacheTimeout
	}
	if cleanup <= 0 {
		cleanup = DefaultETagCacheCleanup
	}
	if maxBytes <= 0 {
		maxBytes = DefaultETagCacheMaxBytes
	}
	return &ETagCache{
		timeout: timeout, cleanup: cleanup, maxBytes: maxBytes, now: time.Now,
		entries: map[ObjectKey]*list.Element{}, order: list.New(),
	}
}

// etagCache reads webhook.etag: nil when ETag caching is off.
func etagCache(c *v1alpha1.WebhookEtagConfig) (*ETagCache, error) {
	if c == nil || c.Enabled == nil || !*c.Enabled {
		return nil, nil
	}
	timeout, err := etagSeconds("cacheTimeoutSeconds", c.CacheTimeoutSeconds)
	if err != nil {
		return nil, err
	}
	cleanup, err := etagSeconds("cacheCleanupSeconds", c.CacheCleanupSeconds)
	if err != nil {
		return nil, err
	}
	return NewETagCache(timeout, cleanup, 0), nil
}

// etagSeconds reads an optional count of seconds; unset or zero means the default.
func etagSeconds(field string, v *int32) (time.Duration, error) {
	if v == nil {
		return 0, nil
	}
	if *v < 0 {
		return 0, invalidHook("webhook etag.%s must not be negative, got %d", field, *v)
	}
	return time.Duration(*v) * time.Second, nil
}

// get returns the live entry of key, or nil. Entries are never changed once stored,
// so the caller may keep one past the lock.
func (c *ETagCache) get(key ObjectKey) *etagEntry {
	if c == nil {
		return nil
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	el, ok := c.entries[key]
	if !ok {
		return nil
	}
	e := el.Value.(*etagEntry)
	if !c.now().Before(e.expires) {
		c.remove(el)
		return nil
	}
	return e
}

// store records body under key with etag; an empty etag forgets key, since the
// hook's latest answer is no longer the cached one.
func (c *ETagCache) store(key ObjectKey, etag string, body []byte) {
	if c == nil {
		return
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if el, ok := c.entries[key]; ok {
		c.remove(el)
	}
	if etag == "" || int64(len(body)) > c.maxBytes {
		return
	}
	e := &etagEntry{key: key, etag: etag, body: body, expires: c.now().Add(c.timeout)}
	c.entries[key] = c.order.PushBack(e)
	c.bytes += int64(len(body))
	for c.bytes > c.maxBytes {
		c.remove(c.order.Front())
	}
	if !c.sweeping {
		c.sweeping = true
		time.AfterFunc(c.cleanup, c.sweepAndReschedule)
	}
}

// Len is the number of entries held, expired ones not yet swept included.
func (c *ETagCache) Len() int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.order.Len()
}

func (c *ETagCache) sweepAndReschedule() {
	c.sweep()
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.order.Len() == 0 {
		c.sweeping = false
		return
	}
	time.AfterFunc(c.cleanup, c.sweepAndReschedule)
}

// sweep drops expired entries. Every entry lives equally long and a store moves its
// key to the back, so the expired ones are at the front.
func (c *ETagCache) sweep() {
	c.mu.Lock()
	defer c.mu.Unlock()
	now := c.now()
	for el := c.order.Front(); el != nil && !now.Before(el.Value.(*etagEntry).expires); el = c.order.Front() {
		c.remove(el)
	}
}

func (c *ETagCache) remove(el *list.Element) {
	e := c.order.Remove(el).(*etagEntry)
	delete(c.entries, e.key)
	c.bytes -= int64(len(e.body))
}
