//go:build integration

package cluster

import (
	"context"
	"net"
	"strconv"
	"testing"
	"time"
)

// TestStartTriesAgainWhenAPickedPortIsTaken: the port Start picked for the API
// server is taken before the API server binds it, as an outgoing connection of
// another process may take it. Start stops what it started and starts again on
// new ports, instead of failing with "address already in use".
func TestStartTriesAgainWhenAPickedPortIsTaken(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	opts := Defaults()
	opts.Components, opts.EtcdNoFsync = nil, true
	var taken []net.Listener
	var picked []int
	afterPickPorts = func(o *Options) {
		picked = append(picked, o.APIServerPort)
		if len(picked) > 1 {
			return
		}
		l, err := net.Listen("tcp", net.JoinHostPort(o.Host, strconv.Itoa(o.APIServerPort)))
		if err != nil {
			t.Errorf("taking the picked port %d: %v", o.APIServerPort, err)
			return
		}
		taken = append(taken, l)
	}
	t.Cleanup(func() {
		afterPickPorts = nil
		for _, l := range taken {
			l.Close()
		}
	})
	c, err := Start(ctx, opts)
	if err != nil {
		t.Fatalf("start with the API server's first port taken: %v", err)
	}
	defer c.Stop()
	if len(picked) != 2 || c.opts.APIServerPort != picked[1] || picked[0] == picked[1] {
		t.Errorf("the API server's ports of each start: %v, serving on %d; want two starts, the second on a new port", picked, c.opts.APIServerPort)
	}
	resp, err := insecureClient.Get("https://" + hostPort(c.opts.Host, c.opts.APIServerPort) + "/livez")
	if err != nil {
		t.Fatalf("the API server does not answer on its new port: %v", err)
	}
	resp.Body.Close()
}
