package sandbox

import (
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
)

// A WorkerExecutable beside the running executable is the default launcher;
// anything else there (missing, not executable, a directory) leaves the running
// executable its own launcher.
func TestTheLauncherIsTheWorkerExecutableBesideTheCaller(t *testing.T) {
	dir := t.TempDir()
	self := filepath.Join(dir, "gateway")
	worker := filepath.Join(dir, WorkerExecutable)
	if got := besideOrSelf(self); got != self {
		t.Errorf("with no worker executable: %s, want %s", got, self)
	}
	if err := os.Mkdir(worker, 0o755); err != nil {
		t.Fatal(err)
	}
	if got := besideOrSelf(self); got != self {
		t.Errorf("with a directory of that name: %s, want %s", got, self)
	}
	os.Remove(worker)
	if err := os.WriteFile(worker, []byte("#!/bin/true\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	if got := besideOrSelf(self); got != self {
		t.Errorf("with a file that is not executable: %s, want %s", got, self)
	}
	if err := os.Chmod(worker, 0o755); err != nil {
		t.Fatal(err)
	}
	if got := besideOrSelf(self); got != worker {
		t.Errorf("with an executable: %s, want %s", got, worker)
	}
}

// A launcher given a launch of another protocol (a worker executable left from
// another build) refuses it, naming itself and what to do.
func TestTheLauncherRefusesAnotherProtocol(t *testing.T) {
	self, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	r, err := filterPipe([]byte(`{"protocol": 1, "args": ["/bin/true"]}`))
	if err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(self, LauncherMarker)
	cmd.ExtraFiles = []*os.File{r}
	out, err := cmd.CombinedOutput()
	r.Close()
	if cmd.ProcessState == nil || cmd.ProcessState.ExitCode() != 126 {
		t.Fatalf("the launcher ran a launch of protocol 1: %v, %s", err, out)
	}
	for _, want := range []string{self, "launch protocol " + strconv.Itoa(launchProtocol) + " and was given 1", "rebuild"} {
		if !strings.Contains(string(out), want) {
			t.Errorf("%q does not say %q", out, want)
		}
	}
}
