//go:build !integration

package deploy

import (
	"io"
	"log"
	"os"
	"testing"

	"github.com/metalambda/metalambda/internal/gateway/lambda"
)

// TestMain quiets the chart loader, which logs every symbolic link it follows
// (the chart links the CRDs and the gateway's RBAC from where they live).
func TestMain(m *testing.M) {
	lambda.ServeWorker() // a gateway's sandbox starts this binary as its launcher and workers
	log.SetOutput(io.Discard)
	os.Exit(m.Run())
}
