package clientmetrics

import (
	"context"
	"errors"
	"net/url"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"k8s.io/client-go/tools/metrics"
)

// collectors are the rest_client_* series of one registry.
type collectors struct {
	requests        *prometheus.CounterVec   // rest_client_requests_total{code,method,host}
	duration        *prometheus.HistogramVec // rest_client_request_duration_seconds{verb,host}
	rateLimiter     *prometheus.HistogramVec // rest_client_rate_limiter_duration_seconds{verb,host}
	requestSize     *prometheus.HistogramVec // rest_client_request_size_bytes{verb,host}
	responseSize    *prometheus.HistogramVec // rest_client_response_size_bytes{verb,host}
	retries         *prometheus.CounterVec   // rest_client_request_retries_total{code,verb,host}
	transportCache  prometheus.Gauge         // rest_client_transport_cache_entries
	transportCreate *prometheus.CounterVec   // rest_client_transport_create_calls_total{result}
}

func newCollectors() *collectors {
	latencyBuckets := []float64{0.005, 0.025, 0.1, 0.25, 0.5, 1, 2, 4, 8, 15, 30, 60}
	sizeBuckets := []float64{64, 256, 512, 1024, 4096, 16384, 65536, 262144, 1048576, 4194304, 16777216}
	histogram := func(name, help string, buckets []float64) *prometheus.HistogramVec {
		return prometheus.NewHistogramVec(prometheus.HistogramOpts{Name: name, Help: help, Buckets: buckets}, []string{"verb", "host"})
	}
	return &collectors{
		requests: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "rest_client_requests_total", Help: "Number of HTTP requests, partitioned by status code, method, and host.",
		}, []string{"code", "method", "host"}),
		duration:     histogram("rest_client_request_duration_seconds", "Request latency in seconds. Broken down by verb, and host.", latencyBuckets),
		rateLimiter:  histogram("rest_client_rate_limiter_duration_seconds", "Client side rate limiter latency in seconds. Broken down by verb, and host.", latencyBuckets),
		requestSize:  histogram("rest_client_request_size_bytes", "Request size in bytes. Broken down by verb and host.", sizeBuckets),
		responseSize: histogram("rest_client_response_size_bytes", "Response size in bytes. Broken down by verb and host.", sizeBuckets),
		retries: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "rest_client_request_retries_total", Help: "Number of request retries, partitioned by status code, verb, and host.",
		}, []string{"code", "verb", "host"}),
		transportCache: prometheus.NewGauge(prometheus.GaugeOpts{
			Name: "rest_client_transport_cache_entries", Help: "Number of transport entries in the internal cache.",
		}),
		transportCreate: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "rest_client_transport_create_calls_total",
			Help: "Number of calls to get a new transport, partitioned by the result of the operation hit: obtained from the cache, miss: created and added to the cache, uncacheable: created and not cached",
		}, []string{"result"}),
	}
}

func (c *collectors) all() []prometheus.Collector {
	return []prometheus.Collector{c.requests, c.duration, c.rateLimiter, c.requestSize, c.responseSize, c.retries, c.transportCache, c.transportCreate}
}

// client-go takes one set of metrics per process (metrics.Register works once), so
// the adapters installed there fan out to the collectors of every registry that
// asked for them.
var (
	installOnce sync.Once
	mu          sync.RWMutex
	sinks       = map[*collectors]struct{}{}
)

// Register registers the rest_client_* series with reg and feeds them every request
// client-go makes in this process, until the returned function is called, which
// unregisters them again. It fails when reg already holds series of those names.
func Register(reg prometheus.Registerer) (unregister func(), err error) {
	c := newCollectors()
	var done []prometheus.Collector
	for _, col := range c.all() {
		if err := reg.Register(col); err != nil {
			for _, d := range done {
				reg.Unregister(d)
			}
			return nil, errors.Join(errors.New("register client-go metrics"), err)
		}
		done = append(done, col)
	}
	installOnce.Do(install)
	mu.Lock()
	sinks[c] = struct{}{}
	mu.Unlock()
	return func() {
		mu.Lock()
		delete(sinks, c)
		mu.Unlock()
		for _, col := range done {
			reg.Unregister(col)
		}
	}, nil
}

func install() {
	metrics.Register(metrics.RegisterOpts{
		RequestLatency:        latency(func(c *collectors) *prometheus.HistogramVec { return c.duration }),
		RateLimiterLatency:    latency(func(c *collectors) *prometheus.HistogramVec { return c.rateLimiter }),
		RequestSize:           size(func(c *collectors) *prometheus.HistogramVec { return c.requestSize }),
		ResponseSize:          size(func(c *collectors) *prometheus.HistogramVec { return c.responseSize }),
		RequestResult:         result{},
		RequestRetry:          retry{},
		TransportCacheEntries: transportCache{},
		TransportCreateCalls:  transportCreate{},
	})
}

// each calls f with the collectors of every registry.
func each(f func(*collectors)) {
	mu.RLock()
	defer mu.RUnlock()
	for c := range sinks {
		f(c)
	}
}

type latency func(*collectors) *prometheus.HistogramVec

func (l latency) Observe(_ context.Context, verb string, u url.URL, d time.Duration) {
	each(func(c *collectors) { l(c).WithLabelValues(verb, u.Host).Observe(d.Seconds()) })
}

type size func(*collectors) *prometheus.HistogramVec

func (s size) Observe(_ context.Context, verb, host string, bytes float64) {
	each(func(c *collectors) { s(c).WithLabelValues(verb, host).Observe(bytes) })
}

type result struct{}

func (result) Increment(_ context.Context, code, method, host string) {
	each(func(c *collectors) { c.requests.WithLabelValues(code, method, host).Inc() })
}

type retry struct{}

func (retry) IncrementRetry(_ context.Context, code, method, host string) {
	each(func(c *collectors) { c.retries.WithLabelValues(code, method, host).Inc() })
}

type transportCache struct{}

func (transportCache) Observe(entries int) {
	each(func(c *collectors) { c.transportCache.Set(float64(entries)) })
}

type transportCreate struct{}

func (transportCreate) Increment(result string) {
	each(func(c *collectors) { c.transportCreate.WithLabelValues(result).Inc() })
}
