package lambda

import (
	"bufio"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"testing"
	"time"
)

// A script worker that made garbage while busy gives its free memory back to
// the system once it is idle: its anonymous memory falls from what its calls
// left (GOGC=400 collects only past a 16 MiB heap) to near what it started
// with.
func TestScriptWorkerReleasesMemoryWhenIdle(t *testing.T) {
	self, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(self, ScriptWorkerMarker)
	cmd.Env = []string{"GOMAXPROCS=1", "GOGC=400"} // as the gateway starts them
	stdin, _ := cmd.StdinPipe()
	stdout, _ := cmd.StdoutPipe()
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	defer func() {
		stdin.Close()
		_ = cmd.Wait()
	}()
	replies := bufio.NewReader(stdout)
	roundTrip := func(frame []byte) {
		t.Helper()
		if _, err := stdin.Write(frame); err != nil {
			t.Fatal(err)
		}
		line, err := replies.ReadBytes('\n')
		if err != nil || !strings.HasPrefix(string(line), `{"ok":true`) {
			t.Fatalf("reply %q, %v", line, err)
		}
	}
	// Each call leaves a few MiB of garbage.
	source := `function sync(request) {
  const junk = [];
  for (let i = 0; i < 20000; i++) junk.push({i: i});
  return {status: {n: junk.length}};
}`
	init, _ := json.Marshal(scriptInit{Protocol: scriptProtocol, Runtime: JavaScript, Name: "test/garbage", Source: source, Timeout: 5e9})
	roundTrip(append(init, '\n'))
	frame, _ := requestFrame("test", echoRequest("x"))
	for range 20 {
		roundTrip(frame)
	}
	busy := anonymousMemory(t, cmd.Process.Pid)
	if busy < 12<<20 {
		t.Fatalf("a busy worker holds %d MiB, want the garbage of its calls (12 MiB or more) for this test to tell", busy>>20)
	}
	deadline := time.Now().Add(20 * time.Second)
	for {
		idle := anonymousMemory(t, cmd.Process.Pid)
		if idle < busy/3 {
			t.Logf("anonymous memory: %d KiB busy, %d KiB idle", busy>>10, idle>>10)
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("an idle worker still holds %d KiB of anonymous memory, %d KiB when busy; want under a third", idle>>10, busy>>10)
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// anonymousMemory is Pss_Anon of process pid, in bytes.
func anonymousMemory(t *testing.T, pid int) int64 {
	t.Helper()
	raw, err := os.ReadFile(fmt.Sprintf("/proc/%d/smaps_rollup", pid))
	if err != nil {
		t.Fatal(err)
	}
	for _, line := range strings.Split(string(raw), "\n") {
		if f := strings.Fields(line); len(f) == 3 && f[0] == "Pss_Anon:" {
			kb, _ := strconv.ParseInt(f[1], 10, 64)
			return kb << 10
		}
	}
	t.Fatal("no Pss_Anon in smaps_rollup")
	return 0
}
