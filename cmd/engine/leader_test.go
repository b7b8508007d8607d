package main

import (
	"flag"
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

func TestLeaderElectionFlags(t *testing.T) {
	o := defaultOptions()
	fs := flag.NewFlagSet("engine", flag.ContinueOnError)
	fs.SetOutput(io.Discard)
	o.bindFlags(fs)
	if err := fs.Parse([]string{"--leader-election", "--leader-election-namespace=ops", "--leader-election-id=mc", "--leader-election-lease-duration=30s"}); err != nil {
		t.Fatal(err)
	}
	if err := o.validate(); err != nil {
		t.Fatal(err)
	}
	got := o.leader
	if !got.enabled || got.namespace != "ops" || got.id != "mc" || got.resourceLock != "leases" || got.leaseDuration != 30*time.Second || got.renewDeadline != 10*time.Second || got.retryPeriod != 2*time.Second {
		t.Errorf("options = %+v", got)
	}
}

func TestLeaderElectionIsOffByDefault(t *testing.T) {
	o := defaultOptions()
	o.leader.namespaceFile = filepath.Join(t.TempDir(), "absent")
	if err := o.validate(); err != nil {
		t.Fatalf("defaults refused out of cluster: %v", err)
	}
	if o.leader.enabled || o.leader.id != "metacontroller" || o.leader.resourceLock != "leases" {
		t.Errorf("defaults = %+v", o.leader)
	}
}

func TestLeaderElectionNamespaceInCluster(t *testing.T) {
	file := filepath.Join(t.TempDir(), "namespace")
	if err := os.WriteFile(file, []byte("metacontroller\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	o := defaultLeaderOptions()
	o.enabled, o.namespaceFile = true, file
	if err := o.validate(); err != nil {
		t.Fatal(err)
	}
	if o.namespace != "metacontroller" {
		t.Errorf("namespace = %q, want the pod's namespace", o.namespace)
	}
}

func TestInvalidLeaderElectionIsRefused(t *testing.T) {
	for _, tt := range []struct {
		name string
		set  func(*leaderOptions)
		want string
	}{
		{"configmap lock", func(o *leaderOptions) { o.resourceLock = "configmapsleases" }, `--leader-election-resource-lock "configmapsleases" is not supported: the only lock is "leases"`},
		{"endpoints lock, election off", func(o *leaderOptions) { o.enabled = false; o.resourceLock = "endpoints" }, `"endpoints" is not supported`},
		{"out of cluster without namespace", func(o *leaderOptions) { o.namespace = "" }, "--leader-election-namespace is required when running outside a cluster"},
		{"empty id", func(o *leaderOptions) { o.id = "" }, "--leader-election-id"},
		{"renew deadline not below lease", func(o *leaderOptions) { o.renewDeadline = o.leaseDuration }, "lease duration (15s) > renew deadline (15s)"},
		{"retry period too long", func(o *leaderOptions) { o.retryPeriod = 9 * time.Second }, "retry period (9s)"},
		{"no retry period", func(o *leaderOptions) { o.retryPeriod = 0 }, "retry period (0s) > 0"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			o := defaultLeaderOptions()
			o.enabled, o.namespace, o.namespaceFile = true, "ops", filepath.Join(t.TempDir(), "absent")
			tt.set(&o)
			if err := o.validate(); err == nil || !strings.Contains(err.Error(), tt.want) {
				t.Errorf("validate() = %v, want an error containing %q", err, tt.want)
			}
		})
	}
}
