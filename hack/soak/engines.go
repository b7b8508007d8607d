package main

import (
	"bufio"
	"context"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/kubernetes"

	"github.com/metalambda/metalambda/internal/local/platform"
)

// engineScraper reads every engine pod's /metrics (port 9999, as the chart
// publishes it) once a second: which pod leads, and the increments of its failed
// syncs, with the time they were seen, so that they can be put in the fault windows
// they fall in. A pod's counters start again at 0 when its process restarts.
type engineScraper struct {
	kube   kubernetes.Interface
	client *http.Client

	mu     sync.Mutex
	pods   []corev1.Pod // the last list that succeeded
	last   map[types.UID]engineSample
	errors []syncErrors
	// signs are the increments of what makes a sync fail (signCounters), each with
	// the time it was seen.
	signs  []sign
	leader types.UID
}

// engineSample is what one scrape of one engine pod read.
type engineSample struct {
	at         time.Time
	syncErrors float64
	writes     float64
	hookCalls  float64
	leading    bool
	// signs counts what can fail a sync, by signCounter's name.
	signs map[string]float64
}

type syncErrors struct {
	at    time.Time
	count float64
}

// sign is an increment of a counter that says what the syncs that did not succeed
// met: hook calls that got no 200 (or 304), by code, and syncs that ended in
// no failure but no success either (a write conflict, a hook's Retry-After, a
// parent gone), by result.
type sign struct {
	at    time.Time
	what  string
	count float64
}

// signCounter names the sample as a sign, or "".
func signCounter(name string, labels map[string]string) string {
	switch {
	case name == "metalambda_hook_requests_total" && labels["code"] != "200" && labels["code"] != "304":
		return "hook " + labels["code"]
	case name == "metalambda_engine_syncs_total" && labels["result"] != "success" && labels["result"] != "error":
		return "sync " + labels["result"]
	}
	return ""
}

// writeResources are the resources the soak's and the PythonLambda controllers
// write: their parents, statuses and children (the engine's Lease, Events and the
// API EndpointSlice are its own bookkeeping).
var writeResources = []string{"configmaps", "soakparents", "soakparents/status", "pythonlambdas", "pythonlambdas/status", "deployments", "services", "ingresses"}

func newEngineScraper(kube kubernetes.Interface) *engineScraper {
	return &engineScraper{kube: kube, client: &http.Client{Timeout: time.Second}, last: map[types.UID]engineSample{}}
}

func (e *engineScraper) run(ctx context.Context) {
	tick := time.NewTicker(time.Second)
	defer tick.Stop()
	for {
		e.scrapeAll(ctx)
		select {
		case <-ctx.Done():
			return
		case <-tick.C:
		}
	}
}

func (e *engineScraper) scrapeAll(ctx context.Context) {
	lctx, cancel := context.WithTimeout(ctx, 2*time.Second)
	list, err := e.kube.CoreV1().Pods(platform.GatewayNamespace).List(lctx, metav1.ListOptions{})
	cancel()
	e.mu.Lock()
	if err == nil {
		e.pods = e.pods[:0]
		for _, pod := range list.Items {
			if strings.HasPrefix(pod.Name, "metalambda-engine-") && pod.Status.PodIP != "" && pod.DeletionTimestamp == nil {
				e.pods = append(e.pods, pod)
			}
		}
	}
	pods := append([]corev1.Pod(nil), e.pods...)
	e.mu.Unlock()
	var wg sync.WaitGroup
	for _, pod := range pods {
		wg.Add(1)
		go func() {
			defer wg.Done()
			if s, ok := e.scrape(ctx, pod.Status.PodIP); ok {
				e.record(pod.UID, s)
			}
		}()
	}
	wg.Wait()
}

func (e *engineScraper) record(uid types.UID, s engineSample) {
	e.mu.Lock()
	defer e.mu.Unlock()
	prev, seen := e.last[uid]
	if d := s.syncErrors - prev.syncErrors; seen && d > 0 {
		e.errors = append(e.errors, syncErrors{at: s.at, count: d})
	}
	for what, v := range s.signs {
		if d := v - prev.signs[what]; seen && d > 0 {
			e.signs = append(e.signs, sign{at: s.at, what: what, count: d})
		}
	}
	if s.leading {
		e.leader = uid
	} else if e.leader == uid {
		e.leader = ""
	}
	e.last[uid] = s
}

// scrape reads one engine's metrics.
func (e *engineScraper) scrape(ctx context.Context, ip string) (engineSample, bool) {
	s := engineSample{at: time.Now(), signs: map[string]float64{}}
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, "http://"+ip+":9999/metrics", nil)
	if err != nil {
		return s, false
	}
	resp, err := e.client.Do(req)
	if err != nil {
		return s, false
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return s, false
	}
	sc := bufio.NewScanner(resp.Body)
	sc.Buffer(make([]byte, 64*1024), 1024*1024)
	for sc.Scan() {
		name, labels, value, ok := parseSample(sc.Text())
		if !ok {
			continue
		}
		if what := signCounter(name, labels); what != "" {
			s.signs[what] += value
		}
		switch {
		case name == "metalambda_engine_syncs_total" && labels["result"] == "error":
			s.syncErrors += value
		case name == "metalambda_hook_requests_total":
			s.hookCalls += value
		case name == "leader_election_master_status" && labels["name"] == "metacontroller":
			s.leading = value == 1
		case name == "metalambda_engine_api_requests_total" && isWrite(labels["verb"]) && isSoakResource(labels["resource"]):
			s.writes += value
		}
	}
	return s, sc.Err() == nil
}

func isWrite(verb string) bool {
	switch verb {
	case "create", "update", "patch", "apply", "delete":
		return true
	}
	return false
}

func isSoakResource(r string) bool {
	for _, w := range writeResources {
		if r == w {
			return true
		}
	}
	return false
}

// parseSample parses one line of the Prometheus text format: name{k="v",...} value.
func parseSample(line string) (name string, labels map[string]string, value float64, ok bool) {
	if line == "" || line[0] == '#' {
		return "", nil, 0, false
	}
	sp := strings.LastIndexByte(line, ' ')
	if sp < 0 {
		return "", nil, 0, false
	}
	v, err := strconv.ParseFloat(line[sp+1:], 64)
	if err != nil {
		return "", nil, 0, false
	}
	series := line[:sp]
	labels = map[string]string{}
	if open := strings.IndexByte(series, '{'); open >= 0 {
		name = series[:open]
		for _, kv := range strings.Split(strings.TrimSuffix(series[open+1:], "}"), ",") {
			k, val, found := strings.Cut(kv, "=")
			if found {
				labels[k] = strings.Trim(val, `"`)
			}
		}
	} else {
		name = series
	}
	return name, labels, v, true
}

// leaderPod is the engine pod that leads, as its last scrape says ("" if none).
func (e *engineScraper) leaderPod() (types.UID, string) {
	e.mu.Lock()
	defer e.mu.Unlock()
	for _, pod := range e.pods {
		if pod.UID == e.leader {
			return pod.UID, pod.Name
		}
	}
	return "", ""
}

// syncErrorsSeen are the increments of failed syncs, each with the time it was seen.
func (e *engineScraper) syncErrorsSeen() []syncErrors {
	e.mu.Lock()
	defer e.mu.Unlock()
	return append([]syncErrors(nil), e.errors...)
}

// signsSeen are the increments of the signs of failed syncs, each with the time
// it was seen.
func (e *engineScraper) signsSeen() []sign {
	e.mu.Lock()
	defer e.mu.Unlock()
	return append([]sign(nil), e.signs...)
}

// totals sums the write and hook call counters of the engine pods scraped now, and
// says which pods they are (a restarted pod makes two totals incomparable).
func (e *engineScraper) totals(ctx context.Context) (writes, hookCalls float64, pods string) {
	e.scrapeAll(ctx)
	e.mu.Lock()
	defer e.mu.Unlock()
	var names []string
	for _, pod := range e.pods {
		s := e.last[pod.UID]
		writes += s.writes
		hookCalls += s.hookCalls
		names = append(names, string(pod.UID))
	}
	return writes, hookCalls, strings.Join(names, ",")
}
