package main

import (
	"context"
	"fmt"
	"math/rand/v2"
	"strconv"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
)

// parentLoad changes parents and watches their children follow: the writer bumps a
// random parent's spec.value (a run-wide counter, so every value is new); the
// observer lists the children every pollInterval and records when both of a parent's
// children carry its last value, and any parent that loses a child it had or has
// more than two.
type parentLoad struct {
	s *soak

	mu      sync.Mutex
	parents []parentState
	counter int
	// latencies are the change -> both children reflect it times of changes that
	// were reflected before the parent changed again.
	latencies    []time.Duration
	writes       int
	failedWrites int
	lost         []string // "<time> <parent>: ..." each time a parent had lost a child
	duplicated   []string
}

type parentState struct {
	value      string
	changedAt  time.Time
	reflected  bool
	reflectAt  time.Time
	hadBoth    bool // both children existed once
	lostNow    bool // a child is missing in the last list (counted once per loss)
	duplicated bool
}

const pollInterval = 500 * time.Millisecond

func newParentLoad(s *soak) *parentLoad {
	l := &parentLoad{s: s, parents: make([]parentState, s.cfg.Parents)}
	for i := range l.parents {
		l.parents[i] = parentState{value: "0", changedAt: time.Now()}
	}
	return l
}

// write changes a random parent every WriteInterval until ctx ends.
func (l *parentLoad) write(ctx context.Context) {
	tick := time.NewTicker(l.s.cfg.WriteInterval)
	defer tick.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-tick.C:
		}
		i := l.s.random(func(r *rand.Rand) int { return r.IntN(len(l.parents)) })
		l.mu.Lock()
		l.counter++
		value := strconv.Itoa(l.counter)
		l.mu.Unlock()
		patch := fmt.Appendf(nil, `{"spec":{"value":%q}}`, value)
		wctx, cancel := context.WithTimeout(ctx, 5*time.Second)
		_, err := l.s.dyn.Resource(parentsGVR).Namespace(parentNS).Patch(wctx, parentName(i), types.MergePatchType, patch, metav1.PatchOptions{})
		cancel()
		now := time.Now()
		l.mu.Lock()
		if err != nil {
			// A failed patch may still have been stored (a timeout): the observer
			// then sees a value newer than the recorded one, which it accepts.
			l.failedWrites++
		} else {
			l.writes++
			p := &l.parents[i]
			p.value, p.changedAt, p.reflected = value, now, false
		}
		l.mu.Unlock()
	}
}

// observe lists the children every pollInterval until ctx ends.
func (l *parentLoad) observe(ctx context.Context) {
	tick := time.NewTicker(pollInterval)
	defer tick.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-tick.C:
		}
		lctx, cancel := context.WithTimeout(ctx, 5*time.Second)
		list, err := l.s.kube.CoreV1().ConfigMaps(parentNS).List(lctx, metav1.ListOptions{LabelSelector: parentLabel})
		cancel()
		if err != nil {
			continue // the API server is down: the next list catches up
		}
		l.see(time.Now(), list.Items)
	}
}

// see records what one list of the children shows.
func (l *parentLoad) see(now time.Time, children []corev1.ConfigMap) {
	byParent := map[string][]corev1.ConfigMap{}
	for _, cm := range children {
		byParent[cm.Labels[parentLabel]] = append(byParent[cm.Labels[parentLabel]], cm)
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	for i := range l.parents {
		p, name := &l.parents[i], parentName(i)
		cms := byParent[name]
		if len(cms) > 2 && !p.duplicated {
			l.duplicated = append(l.duplicated, fmt.Sprintf("%s %s: %d children", now.Format(time.TimeOnly), name, len(cms)))
		}
		p.duplicated = len(cms) > 2
		switch {
		case len(cms) >= 2:
			p.hadBoth, p.lostNow = true, false
		case p.hadBoth && !p.lostNow:
			p.lostNow = true
			l.lost = append(l.lost, fmt.Sprintf("%s %s: %d of 2 children", now.Format(time.TimeOnly), name, len(cms)))
		}
		if p.reflected || len(cms) != 2 || !reflects(cms, p.value) {
			continue
		}
		p.reflected, p.reflectAt = true, now
		l.latencies = append(l.latencies, now.Sub(p.changedAt))
	}
}

// reflects reports whether every child carries value or a newer one (a patch that
// timed out but was stored).
func reflects(cms []corev1.ConfigMap, value string) bool {
	want, _ := strconv.Atoi(value)
	for _, cm := range cms {
		got, err := strconv.Atoi(cm.Data["value"])
		if err != nil || got < want {
			return false
		}
	}
	return true
}

// unreflected counts the parents whose last change their children do not show yet.
func (l *parentLoad) unreflected() int {
	l.mu.Lock()
	defer l.mu.Unlock()
	n := 0
	for _, p := range l.parents {
		if !p.reflected {
			n++
		}
	}
	return n
}

// waitConverged waits until every parent's children carry its value, before the load.
func (l *parentLoad) waitConverged(ctx context.Context, timeout time.Duration) error {
	if !l.waitReflected(ctx, timeout) {
		return fmt.Errorf("%d of %d parents have not converged %s after their creation", l.unreflected(), len(l.parents), timeout)
	}
	l.mu.Lock()
	l.latencies = nil // creation is not a change
	l.mu.Unlock()
	l.s.log("%d parents converged", len(l.parents))
	return nil
}

// waitReflected waits until every parent's last change is reflected, or timeout.
func (l *parentLoad) waitReflected(ctx context.Context, timeout time.Duration) bool {
	deadline := time.Now().Add(timeout)
	for l.unreflected() > 0 {
		if time.Now().After(deadline) || ctx.Err() != nil {
			return false
		}
		time.Sleep(pollInterval)
	}
	return true
}
