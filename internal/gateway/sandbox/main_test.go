package sandbox

import (
	"os"
	"testing"
)

// TestMain lets the sandboxes of the tests start this test binary again as their launcher
// (no init function does it).
func TestMain(m *testing.M) {
	ServeLauncher()
	os.Exit(m.Run())
}
