//go:build integration

package main

import (
	"os"
	"testing"

	"github.com/metalambda/metalambda/internal/gateway/lambda"
	"github.com/metalambda/metalambda/internal/kubetest"
	"github.com/metalambda/metalambda/internal/local/cluster"
)

var env *kubetest.Env

// TestMain lets the sandboxes start this test binary again as their launcher and
// worker, and runs the tests against one control plane; the restricted child of
// TestBuildSandboxRestricted runs its one test without one.
func TestMain(m *testing.M) {
	lambda.ServeWorker()
	if os.Getenv(restrictedChildEnv) != "" {
		os.Exit(m.Run())
	}
	opts := cluster.Defaults()
	opts.Components = nil // etcd and kube-apiserver alone
	kubetest.Main(m, &env, opts)
}
