package platform

import (
	"os"
	"testing"

	"github.com/metalambda/metalambda/internal/gateway/lambda"
)

// TestMain lets the platform's sandboxes start this test binary again as their launcher
// (no init function does it).
func TestMain(m *testing.M) {
	lambda.ServeWorker()
	os.Exit(m.Run())
}
