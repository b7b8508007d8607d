//go:build !integration

package node

import (
	"os"
	"testing"

	"github.com/metalambda/metalambda/internal/gateway/sandbox"
)

// TestMain lets the node's sandboxes start this test binary again as their launcher
// (no init function does it).
func TestMain(m *testing.M) {
	sandbox.ServeLauncher()
	os.Exit(m.Run())
}
