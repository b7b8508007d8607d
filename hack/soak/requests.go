package main

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"strings"
	"sync"
	"time"
)

// requestLoad asks the PythonLambdas through the ingress, one after the other at
// RequestRate in all, and records each answer.
type requestLoad struct {
	s      *soak
	client *http.Client

	mu      sync.Mutex
	results []request
}

type request struct {
	at     time.Time
	target int
	err    string // "" when the lambda answered right
}

func newRequestLoad(s *soak) *requestLoad {
	return &requestLoad{s: s, client: &http.Client{Timeout: 5 * time.Second}}
}

// ask sends one request to lambda i and says what was wrong with the answer, if
// anything.
func (r *requestLoad) ask(ctx context.Context, i int) string {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, "http://"+r.s.ingress+"/?from=soak", nil)
	if err != nil {
		return err.Error()
	}
	req.Host = lambdaName(i) + "." + lambdaDomain
	resp, err := r.client.Do(req)
	if err != nil {
		return err.Error()
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(io.LimitReader(resp.Body, 1024))
	if resp.StatusCode != http.StatusOK || strings.TrimSpace(string(body)) != "ok soak" {
		return fmt.Sprintf("%d %.100q", resp.StatusCode, body)
	}
	return ""
}

// waitServing waits until every lambda answers right, before the load.
func (r *requestLoad) waitServing(ctx context.Context, timeout time.Duration) error {
	deadline := time.Now().Add(timeout)
	for i := range r.s.cfg.Lambdas {
		for {
			problem := r.ask(ctx, i)
			if problem == "" {
				break
			}
			if time.Now().After(deadline) || ctx.Err() != nil {
				return fmt.Errorf("PythonLambda %s does not answer after %s: %s", lambdaName(i), timeout, problem)
			}
			time.Sleep(250 * time.Millisecond)
		}
	}
	r.s.log("%d PythonLambdas answer", r.s.cfg.Lambdas)
	return nil
}

// run sends requests until ctx ends, and waits for those in flight.
func (r *requestLoad) run(ctx context.Context) {
	tick := time.NewTicker(time.Duration(float64(time.Second) / r.s.cfg.RequestRate))
	defer tick.Stop()
	var wg sync.WaitGroup
	defer wg.Wait()
	for n := 0; ; n++ {
		select {
		case <-ctx.Done():
			return
		case <-tick.C:
		}
		wg.Add(1)
		go func(i int, at time.Time) {
			defer wg.Done()
			// Not ctx: a request sent before the end of the load is answered.
			problem := r.ask(context.Background(), i)
			r.mu.Lock()
			r.results = append(r.results, request{at: at, target: i, err: problem})
			r.mu.Unlock()
		}(n%r.s.cfg.Lambdas, time.Now())
	}
}

func (r *requestLoad) all() []request {
	r.mu.Lock()
	defer r.mu.Unlock()
	return append([]request(nil), r.results...)
}
