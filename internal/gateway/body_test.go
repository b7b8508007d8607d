package gateway

import (
	"bufio"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/go-chi/chi/v5"

	"github.com/metalambda/metalambda/internal/httpapi"
)

// bodyTestServer serves g.callRoute on a real server with the gateway's timeouts;
// entered receives a value as each request reaches the route, before its body is read.
func bodyTestServer(t *testing.T, g *Gateway) (addr string, entered chan struct{}) {
	t.Helper()
	entered = make(chan struct{}, 64)
	r := chi.NewRouter()
	r.Use(g.limitBody)
	echo := func(w http.ResponseWriter, r *http.Request) {
		body, err := readBody(r)
		if err != nil {
			httpapi.WriteError(w, err)
			return
		}
		fmt.Fprintf(w, "%d bytes", len(body))
	}
	r.Post("/hooks/{namespace}/{name}", func(w http.ResponseWriter, r *http.Request) {
		entered <- struct{}{}
		g.callRoute(sourceHook, echo)(w, r)
	})
	srv := httptest.NewUnstartedServer(nil)
	srv.Config = NewServer(r)
	srv.Start()
	t.Cleanup(srv.Close)
	return srv.Listener.Addr().String(), entered
}

// startSlowBody sends a call's headers and the first bytes of its body, and stops.
func startSlowBody(t *testing.T, addr, body string, sent int) net.Conn {
	t.Helper()
	c, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	fmt.Fprintf(c, "POST /hooks/ns/f HTTP/1.1\r\nHost: gateway\r\nContent-Length: %d\r\n\r\n%s", len(body), body[:sent])
	return c
}

func readStatus(t *testing.T, c net.Conn) (int, string) {
	t.Helper()
	_ = c.SetReadDeadline(time.Now().Add(30 * time.Second)) // generous: a hang fails, not a slow machine
	resp, err := http.ReadResponse(bufio.NewReader(c), nil)
	if err != nil {
		t.Fatalf("read the answer: %v", err)
	}
	defer resp.Body.Close()
	data, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(data)
}

// TestSlowBodiesDoNotHoldCallSlots: more clients than the function has slots send
// half their bodies and stop; a normal call of the same function is served
// meanwhile, and the slow calls are served too once their bodies arrive.
func TestSlowBodiesDoNotHoldCallSlots(t *testing.T) {
	const slots, slow = 2, 5
	g := &Gateway{opts: Options{MaxBodyBytes: 1 << 20, BodyReadTimeout: time.Minute}, calls: newCallLimiter(slots)}
	addr, entered := bodyTestServer(t, g)
	body := `{"parent": {"metadata": {"name": "p"}}}`
	var conns []net.Conn
	for range slow {
		conns = append(conns, startSlowBody(t, addr, body, 10))
		<-entered // the server has its headers and waits for the rest of the body
	}
	resp, err := http.Post("http://"+addr+"/hooks/ns/f", "application/json", strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	data, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("a normal call while %d bodies trickle in: %d %s, want 200", slow, resp.StatusCode, data)
	}
	for _, c := range conns {
		if _, err := io.WriteString(c, body[10:]); err != nil {
			t.Fatal(err)
		}
	}
	for i, c := range conns {
		if code, text := readStatus(t, c); code != http.StatusOK {
			t.Errorf("slow call %d, once its body came: %d %s, want 200", i, code, text)
		}
	}
}

// TestSlowBodyTimesOut: a body that stops arriving answers 408 after the read
// deadline, without taking a slot.
func TestSlowBodyTimesOut(t *testing.T) {
	g := &Gateway{opts: Options{MaxBodyBytes: 1 << 20, BodyReadTimeout: 100 * time.Millisecond}, calls: newCallLimiter(1)}
	addr, entered := bodyTestServer(t, g)
	c := startSlowBody(t, addr, `{"parent": {}}`, 3)
	<-entered
	if code, text := readStatus(t, c); code != http.StatusRequestTimeout || !strings.Contains(text, "request_timeout") {
		t.Errorf("a body that stopped: %d %s, want 408 request_timeout", code, text)
	}
	if n := len(g.calls.busy); n != 0 {
		t.Errorf("the limiter counts %d functions, want none", n)
	}
}
