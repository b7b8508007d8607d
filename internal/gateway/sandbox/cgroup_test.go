package sandbox

import (
	"testing"
	"time"
)

// TestWorkersCPUKeepsExitedCommands: WorkersCPU counts the processor time of a
// command that has exited and whose cgroup is gone.
func TestWorkersCPUKeepsExitedCommands(t *testing.T) {
	s := newSandbox(t)
	if ok, why := s.Cgroups(); !ok {
		t.Skipf("no cgroups here: %v", why)
	}
	before, ok := WorkersCPU()
	if !ok {
		t.Fatal("WorkersCPU: none, where the sandbox gives commands cgroups")
	}
	spin := `import time
end = time.process_time() + 0.3
while time.process_time() < end:
    pass`
	cmd, err := s.Command(Spec{Args: []string{python, "-I", "-c", spin}})
	if err != nil {
		t.Fatal(err)
	}
	if out, err := output(cmd); err != nil {
		t.Fatalf("%v: %s", err, out)
	}
	after, ok := WorkersCPU()
	if used := after - before; !ok || used < 300*time.Millisecond {
		t.Errorf("WorkersCPU grew by %v (ok %v) over a command that spun 300 ms of processor time; want at least that", used, ok)
	}
}

// TestMemoryCgroupDirIsTheSandboxesOwn: the directory MemoryCgroupDir names is
// the one the sandboxes of this process make their memory cgroups in.
func TestMemoryCgroupDirIsTheSandboxesOwn(t *testing.T) {
	cs := newCgroups()
	if len(cs.parents) == 0 {
		t.Skip("no cgroups here:", cs.reason)
	}
	defer cs.close()
	want := cs.parents["memory"]
	if cs.v2 {
		want = cs.parents[""]
	}
	if dir, v2 := MemoryCgroupDir(); dir != want || v2 != cs.v2 {
		t.Errorf("MemoryCgroupDir() = %q, %v; the sandboxes make theirs in %q (v2: %v)", dir, v2, want, cs.v2)
	}
}
