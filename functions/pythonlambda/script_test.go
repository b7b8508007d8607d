//go:build unix

package pythonlambda

import (
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"
)

// lambdaServer is script.py running under python3 with some code.
type lambdaServer struct {
	url    string
	stderr *lockedBuffer
	pid    int
	exited <-chan struct{}
}

// startServer runs script.py with code on a free port, in its own process group
// and a temporary directory, both removed when the test ends; env is added to its
// environment.
func startServer(t *testing.T, code string, env ...string) *lambdaServer {
	t.Helper()
	python, err := exec.LookPath("python3")
	if err != nil {
		t.Skip("python3 is not installed")
	}
	dir := t.TempDir()
	for name, content := range map[string]string{scriptKey: script, codeKey: code} {
		if err := os.WriteFile(filepath.Join(dir, name), []byte(content), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	port := freePort(t)
	stderr := &lockedBuffer{}
	cmd := exec.Command(python, filepath.Join(dir, scriptKey))
	cmd.Env = append(append(os.Environ(), "PORT="+port, "PYTHONDONTWRITEBYTECODE=1"), env...)
	cmd.Stdout, cmd.Stderr = stderr, stderr
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	exited := make(chan struct{})
	go func() { _ = cmd.Wait(); close(exited) }()
	t.Cleanup(func() {
		_ = syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL)
		<-exited
	})
	s := &lambdaServer{url: "http://127.0.0.1:" + port, stderr: stderr, pid: cmd.Process.Pid, exited: exited}
	s.waitUp(t, exited)
	return s
}

func freePort(t *testing.T) string {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	return fmt.Sprint(l.Addr().(*net.TCPAddr).Port)
}

// waitUp waits until the server answers /healthz, whatever it answers.
func (s *lambdaServer) waitUp(t *testing.T, exited <-chan struct{}) {
	t.Helper()
	deadline := time.Now().Add(15 * time.Second)
	for time.Now().Before(deadline) {
		select {
		case <-exited:
			t.Fatalf("python3 exited; its output:\n%s", s.stderr)
		default:
		}
		if resp, err := http.Get(s.url + healthPath); err == nil {
			resp.Body.Close()
			return
		}
		time.Sleep(20 * time.Millisecond)
	}
	t.Fatalf("the server did not answer in time; its output:\n%s", s.stderr)
}

// call sends a request and returns the status and body.
func (s *lambdaServer) call(method, path, body string, header http.Header) (int, string, http.Header, error) {
	req, err := http.NewRequest(method, s.url+path, strings.NewReader(body))
	if err != nil {
		return 0, "", nil, err
	}
	for k, v := range header {
		req.Header[k] = v
	}
	client := &http.Client{Timeout: 20 * time.Second}
	resp, err := client.Do(req)
	if err != nil {
		return 0, "", nil, err
	}
	defer resp.Body.Close()
	got, err := io.ReadAll(resp.Body)
	return resp.StatusCode, string(got), resp.Header, err
}

// waitStderr waits until the server's stderr holds every part.
func (s *lambdaServer) waitStderr(t *testing.T, parts ...string) {
	t.Helper()
	deadline := time.Now().Add(5 * time.Second)
	for {
		missing := ""
		for _, p := range parts {
			if !strings.Contains(s.stderr.String(), p) {
				missing = p
				break
			}
		}
		if missing == "" {
			return
		}
		if time.Now().After(deadline) {
			t.Errorf("stderr does not contain %q; it is:\n%s", missing, s.stderr)
			return
		}
		time.Sleep(20 * time.Millisecond)
	}
}

type lockedBuffer struct {
	mu  sync.Mutex
	buf strings.Builder
}

func (b *lockedBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.Write(p)
}

func (b *lockedBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.String()
}

// exchange is one request to the server and what it must answer.
type exchange struct {
	method, path, body string
	header             http.Header
	status             int
	answer             string // the exact body, unless contains is set
	contains           bool
}

func TestScript(t *testing.T) {
	tests := []struct {
		name      string
		code      string
		exchanges []exchange
		stderr    []string // parts of the server's stderr
	}{{
		name: "issue example",
		code: sampleCode,
		exchanges: []exchange{
			{path: "/?name=Martin", status: 200, answer: "Hello Martin! Your name in reverse is nitraM"},
			{path: "/", status: 200, answer: "Hello World! Your name in reverse is dlroW"},
			{path: "/any/path?name=%C3%89mile&name=x", status: 200, answer: "Hello Émile! Your name in reverse is elimÉ"},
			{path: healthPath, status: 200, answer: "ok\n"},
		},
	}, {
		name: "request namespace",
		code: `output = "%s %s %r %s %s" % (method, path, sorted(query_params.items()), headers.get("X-Test"), body)`,
		exchanges: []exchange{
			{method: "POST", path: "/a/b?x=1&x=2&y=", body: "hello", header: http.Header{"X-Test": {"yes"}}, status: 200,
				answer: "POST /a/b [('x', ['1', '2'])] yes hello"},
			{method: "PUT", path: "/", status: 200, answer: "PUT / [] None "},
		},
	}, {
		name: "empty output",
		code: `output = ""`,
		exchanges: []exchange{
			{path: "/", status: 200, answer: "Lambda output was empty"},
		},
	}, {
		name: "missing output",
		code: `x = 1`,
		exchanges: []exchange{
			{method: "POST", path: "/", body: "ignored", status: 200, answer: "Lambda output was empty"},
		},
	}, {
		name: "exception",
		code: "def f():\n    raise ValueError(\"boom\")\nf()\n",
		exchanges: []exchange{
			{path: "/crash", status: 500, answer: "Lambda raised an exception: ValueError: boom\n"},
			{path: healthPath, status: 200, answer: "ok\n"},
		},
		stderr: []string{"exception in GET /crash", "Traceback (most recent call last):", `File "spec.code", line 2, in f`, `raise ValueError("boom")`, "ValueError: boom"},
	}, {
		name: "syntax error",
		code: "name = 'x'\noutput = (name\n",
		exchanges: []exchange{
			{path: healthPath, status: 503, answer: "SyntaxError: '(' was never closed", contains: true},
			{path: "/?name=Martin", status: 503, answer: "Lambda code has a syntax error; fix spec.code:\n", contains: true},
		},
		stderr: []string{"SYNTAX ERROR in spec.code", `File "spec.code", line 2`, "SyntaxError: '(' was never closed"},
	}}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			s := startServer(t, tt.code)
			for _, x := range tt.exchanges {
				x.check(t, s)
			}
			s.waitStderr(t, tt.stderr...)
		})
	}
}

func (x exchange) check(t *testing.T, s *lambdaServer) {
	t.Helper()
	method := x.method
	if method == "" {
		method = http.MethodGet
	}
	status, body, header, err := s.call(method, x.path, x.body, x.header)
	if err != nil {
		t.Fatalf("%s %s: %v", method, x.path, err)
	}
	okBody := body == x.answer || x.contains && strings.Contains(body, x.answer)
	if status != x.status || !okBody {
		t.Errorf("%s %s = %d %q, want %d %q", method, x.path, status, body, x.status, x.answer)
	}
	if ct := header.Get("Content-Type"); ct != "text/plain; charset=utf-8" {
		t.Errorf("%s %s: Content-Type %q", method, x.path, ct)
	}
}

// TestScriptConcurrent holds 16 requests in the user's code at once: a barrier of 16
// only opens when the server runs them concurrently, and breaks (answering 500)
// after its timeout otherwise.
func TestScriptConcurrent(t *testing.T) {
	const n = 16
	s := startServer(t, fmt.Sprintf(`import threading
barrier = threading.__dict__.setdefault("_test_barrier", threading.Barrier(%d, timeout=10))
barrier.wait()
output = "request " + query_params["i"][0]
`, n))
	var wg sync.WaitGroup
	errs := make([]error, n)
	for i := range n {
		wg.Go(func() {
			status, body, _, err := s.call(http.MethodGet, fmt.Sprintf("/?i=%d", i), "", nil)
			if err == nil && (status != 200 || body != fmt.Sprintf("request %d", i)) {
				err = fmt.Errorf("request %d = %d %q", i, status, body)
			}
			errs[i] = err
		})
	}
	wg.Wait()
	if err := errors.Join(errs...); err != nil {
		t.Errorf("%v\nserver output:\n%s", err, s.stderr)
	}
}

// TestScriptDrains checks the stop on SIGTERM: /healthz fails at once, requests
// are still served during the drain, then the server exits.
func TestScriptDrains(t *testing.T) {
	s := startServer(t, `output = "still here"`, "PYTHONLAMBDA_DRAIN_SECONDS=1.5")
	if err := syscall.Kill(s.pid, syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	s.waitStderr(t, "draining for 1.5s")
	if code, body, _, err := s.call(http.MethodGet, healthPath, "", nil); err != nil || code != http.StatusServiceUnavailable {
		t.Errorf("healthz while draining = %d %q %v, want 503", code, body, err)
	}
	if code, body, _, err := s.call(http.MethodGet, "/", "", nil); err != nil || code != http.StatusOK || body != "still here" {
		t.Errorf("request while draining = %d %q %v, want 200 \"still here\"", code, body, err)
	}
	select {
	case <-s.exited:
	case <-time.After(10 * time.Second):
		t.Fatalf("the server did not exit after the drain; its output:\n%s", s.stderr)
	}
}
