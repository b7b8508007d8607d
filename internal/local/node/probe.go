package node

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"strconv"
	"syscall"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
)

// probeLoop runs a probe every period while the container runs and reports each
// verdict (after successThreshold successes or failureThreshold failures in a row)
// for the container start (generation) it was made against.
//
// With eager set (readiness), a container start that has not passed yet is probed
// sooner: 25 ms after it starts (or after initialDelaySeconds), then at doubling
// intervals up to the period, except that during the first period a probe refused
// because nothing listens on the port yet is repeated every 25 ms (such a probe
// costs next to nothing, and the server is Ready the moment it listens). A kubelet
// waits a whole period after a first failure, which is most of the time a new pod
// takes to become Ready when its server needs a moment to listen; failures before
// the first success cannot change a verdict that is already "not ready", so probing
// them sooner changes nothing else.
func (c *container) probeLoop(ctx context.Context, p *corev1.Probe, verdict func(gen int, ok bool), eager bool) {
	if p == nil {
		return
	}
	var started <-chan struct{} // a start wakes an eager loop at once
	if eager {
		started = c.startedCh
	}
	period := seconds(p.PeriodSeconds, 10)
	failureThreshold, successThreshold := orDefault(p.FailureThreshold, 3), orDefault(p.SuccessThreshold, 1)
	const firstEager = 25 * time.Millisecond
	// poll is how often the loop looks at a container that is not running yet.
	poll := min(period, time.Second)
	timer := time.NewTimer(poll)
	defer timer.Stop()
	var gen, successes, failures int
	var next time.Time
	var passed bool           // this start has had a success
	var interval = firstEager // the next eager interval
	for {
		select {
		case <-c.stopCh:
			return
		case <-timer.C:
		case <-started:
		}
		c.mu.Lock()
		running, cur, startedAt := c.state.Running != nil, c.gen, c.state.Running
		c.mu.Unlock()
		if !running {
			timer.Reset(poll)
			continue
		}
		if cur != gen {
			gen, successes, failures, passed, interval = cur, 0, 0, false, firstEager
			next = startedAt.StartedAt.Add(seconds(p.InitialDelaySeconds, 0))
		}
		if wait := time.Until(next); wait > 0 {
			timer.Reset(wait)
			continue
		}
		err := c.probe(ctx, p)
		switch {
		case eager && !passed && refused(err) && time.Since(startedAt.StartedAt.Time) < period:
			next = time.Now().Add(firstEager) // nothing listens yet: it costs nothing to ask again soon
		case eager && !passed && err != nil:
			next = time.Now().Add(min(interval, period))
			interval *= 2
		default:
			next = time.Now().Add(period)
		}
		timer.Reset(time.Until(next))
		if err != nil {
			successes, failures = 0, failures+1
			if failures >= failureThreshold {
				verdict(gen, false)
			}
			continue
		}
		passed = true
		successes, failures = successes+1, 0
		if successes >= successThreshold {
			verdict(gen, true)
		}
	}
}

// refused reports whether a probe failed because nothing listens on the port.
func refused(err error) bool { return errors.Is(err, syscall.ECONNREFUSED) }

func seconds(s int32, def int) time.Duration {
	if s <= 0 {
		return time.Duration(def) * time.Second
	}
	return time.Duration(s) * time.Second
}

func orDefault(v int32, def int) int {
	if v <= 0 {
		return def
	}
	return int(v)
}

func (c *container) setReady(gen int, ok bool) {
	c.mu.Lock()
	changed := c.gen == gen && c.ready != ok
	if c.gen == gen {
		c.ready = ok
	}
	c.mu.Unlock()
	if changed {
		c.w.notify()
	}
}

func (c *container) liveness(gen int, ok bool) {
	c.mu.Lock()
	same := c.gen == gen
	c.mu.Unlock()
	if !ok && same {
		c.kill()
	}
}

// probe runs one check of a probe against the container.
func (c *container) probe(ctx context.Context, p *corev1.Probe) error {
	ctx, cancel := context.WithTimeout(ctx, seconds(p.TimeoutSeconds, 1))
	defer cancel()
	pod := c.w.podWithIP()
	switch {
	case p.HTTPGet != nil:
		return c.probeHTTP(ctx, pod, p.HTTPGet)
	case p.TCPSocket != nil:
		port, err := c.resolvePort(p.TCPSocket.Port)
		if err != nil {
			return err
		}
		host := p.TCPSocket.Host
		if host == "" {
			host = pod.Status.PodIP
		}
		conn, err := (&net.Dialer{}).DialContext(ctx, "tcp", net.JoinHostPort(host, strconv.Itoa(port)))
		if err != nil {
			return err
		}
		return conn.Close()
	case p.Exec != nil:
		return c.probeExec(ctx, pod, p.Exec.Command)
	}
	return fmt.Errorf("unsupported probe handler")
}

func (c *container) probeHTTP(ctx context.Context, pod *corev1.Pod, g *corev1.HTTPGetAction) error {
	port, err := c.resolvePort(g.Port)
	if err != nil {
		return err
	}
	host := g.Host
	if host == "" {
		host = pod.Status.PodIP
	}
	scheme := "http"
	if g.Scheme == corev1.URISchemeHTTPS {
		scheme = "https"
	}
	url := fmt.Sprintf("%s://%s%s", scheme, net.JoinHostPort(host, strconv.Itoa(port)), g.Path)
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	if err != nil {
		return err
	}
	for _, h := range g.HTTPHeaders {
		req.Header.Add(h.Name, h.Value)
	}
	resp, err := probeClient.Do(req)
	if err != nil {
		return err
	}
	resp.Body.Close()
	if resp.StatusCode < 200 || resp.StatusCode >= 400 {
		return fmt.Errorf("HTTP probe got %d", resp.StatusCode)
	}
	return nil
}

// probeClient does not follow redirects to other hosts' (a 3xx is a success) and
// skips TLS verification, as a kubelet does.
var probeClient = &http.Client{
	CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse },
	Transport:     &http.Transport{Proxy: nil, DisableKeepAlives: true},
}

// probeExec runs an exec probe's command in a sandbox like its container's.
func (c *container) probeExec(ctx context.Context, pod *corev1.Pod, command []string) error {
	env, err := containerEnv(ctx, c.w.n, pod, c.spec)
	if err != nil {
		return err
	}
	mounts, err := c.openMounts()
	if err != nil {
		return err
	}
	cmd, err := c.w.n.sandbox.CommandContext(ctx, c.sandboxSpec(pod, mounts, env, c.image.hostArgv(command)))
	closeMounts(mounts)
	if err != nil {
		return err
	}
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &out
	if err := cmd.Start(); err != nil {
		return fmt.Errorf("exec probe: %w", err)
	}
	if err := cmd.Wait(); err != nil {
		return fmt.Errorf("exec probe: %w: %s", err, tail(out.String(), 3))
	}
	return nil
}

// resolvePort turns a probe's port (a number or a container port's name) into a number.
func (c *container) resolvePort(p intstr.IntOrString) (int, error) {
	if p.Type == intstr.Int {
		return p.IntValue(), nil
	}
	for _, cp := range c.spec.Ports {
		if cp.Name == p.StrVal {
			return int(cp.ContainerPort), nil
		}
	}
	return 0, fmt.Errorf("no container port named %q", p.StrVal)
}
