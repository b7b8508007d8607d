//go:build !integration

package deploy

import (
	"io"
	"log"
	"os"
	"testing"
)

// TestMain quiets the chart loader, which logs every symbolic link it follows
// (the chart links the CRDs and the gateway's RBAC from where they live).
func TestMain(m *testing.M) {
	log.SetOutput(io.Discard)
	os.Exit(m.Run())
}
