package lambda

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"
)

// Attacks of this round's changes to the gateway's sandbox, each written so
// that the test fails when the attack succeeds.

// warmVictimSource is a Python function whose module-level state (a token
// drawn at load) shows whether the worker that answers is the one that loaded
// it: a warm worker's caches, connections and imports.
const warmVictimSource = `import os
TOKEN = os.urandom(8).hex()
def sync(request):
    return {"token": TOKEN}
`

// crasherSource ends its worker in every call: each call costs its tenant
// nothing but a fork of the zygote for the next.
const crasherSource = `import os
def sync(request):
    os._exit(3)
`

func warmToken(t *testing.T, c Compiled) string {
	t.Helper()
	res, err := invoke(t, c, echoRequest("v"))
	if err != nil {
		t.Fatal(err)
	}
	var out struct{ Token string }
	if err := json.Unmarshal(res.Response, &out); err != nil || out.Token == "" {
		t.Fatalf("reply %s: %v", res.Response, err)
	}
	return out.Token
}

// TestCrashingFunctionDoesNotRecycleOthersWarmWorkers: one tenant whose
// worker exits in each of its calls forks the zygote past zygoteMaxForks in
// a few seconds, again and again. A rotation for forks must not end the warm,
// idle workers of other tenants: else every tenant's warm state (module
// imports, caches) is thrown away, and its next call is a cold start, at the
// pace one crashing function sets.
func TestCrashingFunctionDoesNotRecycleOthersWarmWorkers(t *testing.T) {
	rt := zygoteRuntime(t, Options{WorkerSpares: DefaultWorkerSpares})
	victim := mustCompile(t, rt, pyFn("warm-victim", warmVictimSource))
	before := warmToken(t, victim)
	zs := zygoteOf(t, rt, false)
	zs.mu.Lock()
	first := zs.current
	zs.mu.Unlock()
	if first == nil {
		t.Fatal("no zygote")
	}
	crasher := mustCompile(t, rt, pyFn("crasher", crasherSource))
	deadline := time.Now().Add(60 * time.Second)
	crashes := 0
	for {
		zs.mu.Lock()
		rotated := zs.current != first && zs.current != nil
		zs.mu.Unlock()
		if rotated || time.Now().After(deadline) {
			break
		}
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		_, err := crasher.Invoke(ctx, echoRequest("crash"))
		cancel()
		if err == nil {
			t.Fatal("the crasher answered")
		}
		crashes++
	}
	t.Logf("%d crashes rotated the zygote", crashes)
	time.Sleep(3 * sweepInterval) // the idle sweeps
	if after := warmToken(t, victim); after != before {
		t.Errorf("the victim's warm worker (token %s) was ended by another tenant's %d crashes; a fresh one (token %s) answered", before, crashes, after)
	}
}

// deeplyNested is valid Python that compile() accepts: n nested lambdas, n
// nested code objects.
func deeplyNested(n int) string {
	return "f = " + strings.Repeat("lambda: ", n) + "1\n" + `def sync(request):
    g = f
    while callable(g):
        g = g()
    return {"value": g}
`
}

// TestPythonLoadsWhatCompileAccepts: the worker's compile path (exec under a
// profile function, then renaming every code object) must load whatever
// compile() loads; a source whose code objects nest deeper than the renaming
// recurses crashed the worker with a RecursionError at load.
func TestPythonLoadsWhatCompileAccepts(t *testing.T) {
	rt := NewPython(sandboxed(t, Options{WorkerSpares: -1}))
	for _, n := range []int{100, 900} {
		c, err := rt.Compile(pyFn(fmt.Sprintf("nested-%d", n), deeplyNested(n)))
		if err != nil {
			t.Errorf("%d nested lambdas: %v", n, err)
			continue
		}
		res, err := invoke(t, c, echoRequest("x"))
		if err != nil || string(res.Response) != `{"value":1}` {
			t.Errorf("%d nested lambdas: %s, %v", n, res.Response, err)
		}
		c.Close()
	}
}

// TestJsonnetNativeNamesStayHidden: a function tries what Jsonnet lets it
// try to find, or call, the resident loop's native functions: their earlier
// fixed names and prefixes, and the error traces and logs of a failed call,
// whose text would show a name given to the loop. Nothing it gets back, and
// nothing of its replies or logs, holds the names' random part.
func TestJsonnetNativeNamesStayHidden(t *testing.T) {
	natives := residentNatives()
	suffix := strings.TrimPrefix(natives[0], "metalambda.next.")
	source := `local names = ["metalambda.next", "metalambda.reply", "metalambda.next.", "metalambda.reply.", "next", "reply", "nextName", "replyName", ""];
function(request)
  local probe = {[n]: std.type(std.native(n)) for n in names};
  if request.parent.metadata.name == "fail" then
    error std.toString(probe)
  else if request.parent.metadata.name == "trace" then
    std.trace(std.toString(probe), std.foldl(function(a, b) a + b, std.range(1, 3), 0))
  else
    probe`
	requests := []string{`{"parent":{"metadata":{"name":"ok"}}}`, `{"parent":{"metadata":{"name":"trace"}}}`, `{"parent":{"metadata":{"name":"fail"}}}`, `{"parent":{"metadata":{"name":"ok"}}}`}
	replies := goldenWorkerReplies(t, source, nil, requests)
	for i, reply := range replies {
		if strings.Contains(reply, suffix) {
			t.Errorf("reply %d holds the natives' random names: %s", i, reply)
		}
		if strings.Contains(reply, `"function"`) {
			t.Errorf("reply %d: the function found a native function: %s", i, reply)
		}
	}
	if !strings.Contains(replies[0], `"metalambda.next":"null"`) {
		t.Errorf("reply 0 = %s, want the old names to be null", replies[0])
	}
	// Errors raised under the loop's frames: a response that cannot be
	// manifested (the reply native's argument), a function of other
	// parameters, the deepest recursion; their traces name no native.
	for _, source := range []string{
		`function(request) {f: function(x) x}`,
		`function(request, extra) 1`,
		`function(request) std.foldl(function(a, b) a.nope, [1, 2], {})`,
		`local f(n) = if n == 0 then error "bottom" else f(n - 1); function(request) f(600)`,
	} {
		replies := append(goldenWorkerReplies(t, source, nil, requests[:1]), goldenInProcessReplies(t, source, nil, requests[:1])...)
		for _, reply := range replies {
			if strings.Contains(reply, suffix) || strings.Contains(reply, "metalambda.") || strings.Contains(reply, residentFile) {
				t.Errorf("%s: reply %s names the loop or its natives", source, reply)
			}
		}
	}
}

// TestJsonnetMemberNamesDoNotCarryOver: the request decoder's member-name
// cache must not put one call's names into the next call's request.
func TestJsonnetMemberNamesDoNotCarryOver(t *testing.T) {
	source := `function(request) {fields: std.objectFieldsAll(request.parent.spec)}`
	requests := []string{
		`{"parent":{"metadata":{"name":"a"},"spec":{"secretOfA":1,"caf\u00e9":2}}}`,
		`{"parent":{"metadata":{"name":"b"},"spec":{"other":1,"caf\u0065\u0301":2}}}`,
	}
	replies := goldenWorkerReplies(t, source, nil, requests)
	if strings.Contains(replies[1], "secretOfA") || !strings.Contains(replies[1], `"other"`) {
		t.Errorf("the second call's request carries the first's names: %s", replies[1])
	}
}

// TestJsonnetMemberNameCacheIsBoundedInBytes: a worker's request decoder
// lives as long as the worker and keeps the first maxNames member names it
// reads. Whoever may call a function sends it requests whose member names are
// long (a request may be MaxBodyBytes): the worker would keep them all, for
// good, up to its memory limit, counted in the gateway's worker memory budget
// (which stops other tenants' idle workers). What the cache keeps stays
// small, whatever the requests' names.
func TestJsonnetMemberNameCacheIsBoundedInBytes(t *testing.T) {
	var d jsonDecoder
	long := strings.Repeat("n", 64<<10)
	for i := range maxNames + 10 {
		doc := fmt.Sprintf(`{"%s%d":1,"short":2}`, long, i)
		if _, err := d.decode([]byte(doc)); err != nil {
			t.Fatal(err)
		}
	}
	kept := 0
	for name := range d.names {
		kept += len(name)
	}
	if kept > 64<<10 {
		t.Errorf("the decoder keeps %d bytes of member names from earlier requests", kept)
	}
	if _, ok := d.names["short"]; !ok {
		t.Errorf("a short name repeated in every request is not kept")
	}
}

// TestClosedZygoteSignalsNoReusedProcessGroup: a zygote that died (killed, or
// out of memory) is still Closed by retire, up to a second later. Its
// launcher's process group number is free by then, and a process the gateway
// starts meanwhile in a group of its own (any sandboxed worker) may have it:
// Close must not kill that group. The pid is taken for the stand-in with
// ns_last_pid, as a pid wrap would give it.
func TestClosedZygoteSignalsNoReusedProcessGroup(t *testing.T) {
	rt := zygoteRuntime(t, Options{WorkerSpares: -1})
	mustCompile(t, rt, pyFn("group", pyEcho))
	zs := zygoteOf(t, rt, false)
	zs.mu.Lock()
	z := zs.current
	zs.setCurrentLocked(nil)
	zs.mu.Unlock()
	if z == nil {
		t.Fatal("no zygote")
	}
	launcher := z.PID()
	for launcher != 0 && parentOf(launcher) != os.Getpid() {
		launcher = parentOf(launcher)
	}
	if launcher == 0 {
		t.Fatal("the zygote's launcher is not found")
	}
	if err := syscall.Kill(-launcher, syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	<-z.Done()
	// The group's number is free once its last zombie is reaped.
	for end := time.Now().Add(10 * time.Second); syscall.Kill(-launcher, 0) == nil && time.Now().Before(end); {
		time.Sleep(50 * time.Millisecond)
	}
	// ns_last_pid is the host's: a few tries only, each moving the host's
	// next pid back to the launcher's (starting a command may take a pid or
	// two before the command's own).
	var standIn *exec.Cmd
	var got []int
	for i := range 50 {
		if err := os.WriteFile("/proc/sys/kernel/ns_last_pid", []byte(strconv.Itoa(launcher-1-i%3)), 0); err != nil {
			t.Skip(err)
		}
		cmd := exec.Command("sleep", "60")
		cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		if cmd.Process.Pid == launcher {
			standIn = cmd
			break
		}
		got = append(got, cmd.Process.Pid)
		_ = cmd.Process.Kill()
		_ = cmd.Wait()
	}
	if standIn == nil {
		_, err := os.Stat("/proc/" + strconv.Itoa(launcher))
		t.Skipf("the launcher's pid %d was not taken again (a zombie of its group not yet reaped holds it, or other processes fork meanwhile; its /proc: %v; the tries got %v)", launcher, err, got[:min(len(got), 6)])
	}
	exited := make(chan struct{})
	go func() {
		_ = standIn.Wait()
		close(exited)
	}()
	defer func() {
		_ = standIn.Process.Kill()
		<-exited
	}()
	z.Close()
	select {
	case <-exited:
		t.Errorf("closing the dead zygote killed process group %d, now another process's", launcher)
	case <-time.After(time.Second):
	}
}
