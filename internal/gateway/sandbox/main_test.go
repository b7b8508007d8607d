package sandbox

import (
	"fmt"
	"os"
	"testing"
)

// TestMain lets the sandboxes of the tests start this test binary again as their launcher
// (no init function does it). The tests' sandboxes of a root caller make their
// commands' directory (workersDirName) in the temporary directory, which the
// tests get a private one for, every user may traverse, and is removed after them.
func TestMain(m *testing.M) {
	ServeLauncher()
	os.Exit(runInPrivateTmp(m))
}

func runInPrivateTmp(m *testing.M) int {
	tmp, err := os.MkdirTemp("", "metalambda-sandbox-tests-")
	if err == nil {
		err = os.Chmod(tmp, 0o711)
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	defer os.RemoveAll(tmp)
	os.Setenv("TMPDIR", tmp)
	return m.Run()
}
