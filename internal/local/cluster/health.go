package cluster

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"time"
)

// check answers nil when a component is healthy, or why it is not.
type check func(ctx context.Context) error

func httpCheck(client *http.Client, url, bearer string) check {
	return func(ctx context.Context) error {
		req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
		if err != nil {
			return err
		}
		if bearer != "" {
			req.Header.Set("Authorization", "Bearer "+bearer)
		}
		resp, err := client.Do(req)
		if err != nil {
			return err
		}
		defer resp.Body.Close()
		body, _ := io.ReadAll(io.LimitReader(resp.Body, 4096))
		if resp.StatusCode != http.StatusOK {
			return fmt.Errorf("GET %s: %s: %s", url, resp.Status, body)
		}
		return nil
	}
}

// waitHealthy polls check until it passes, the process exits, or ctx ends.
func waitHealthy(ctx context.Context, p *process, healthy check) error {
	tick := time.NewTicker(200 * time.Millisecond)
	defer tick.Stop()
	var last error
	for {
		if done, err := p.exited(); done {
			return fmt.Errorf("%s exited during start-up (%v); see %s", p.name, err, p.logPath)
		}
		if last = healthy(ctx); last == nil {
			return nil
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("%s not healthy: %w (last check: %v)", p.name, ctx.Err(), last)
		case <-tick.C:
		}
	}
}
