//go:build !integration

package main

import (
	"os"
	"testing"

	"github.com/metalambda/metalambda/internal/gateway/lambda"
)

// TestMain lets the sandboxes the flag tests probe start this test binary again as their launcher
// (no init function does it).
func TestMain(m *testing.M) {
	lambda.ServeWorker()
	os.Exit(m.Run())
}
